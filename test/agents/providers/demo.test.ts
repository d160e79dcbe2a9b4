/** The offline demo model: deterministic, one Bash call per prompt, then a streamed answer quoting the output. */
import { describe, expect, test } from "bun:test";
import { DEMO_COMMAND, DemoProvider } from "../../../src/agents/providers/demo.ts";
import { type ChatMessage, getProvider, type ModelRequest, type StreamEvent } from "../../../src/agents/providers/index.ts";
import { BASH_SPEC } from "./scenarios.ts";

const p = getProvider("demo");
const READ_SPEC = { name: "Read", description: "Read a file", input_schema: { type: "object" } };
const base = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  model: "demo",
  system: "You are an agent.",
  messages: [{ role: "user", content: [{ type: "text", text: "Show me around" }] }],
  tools: [BASH_SPEC, READ_SPEC],
  maxTokens: 1024,
  ...over,
});

async function run(req: ModelRequest) {
  const events: StreamEvent[] = [];
  const res = await p.complete(req, (e) => events.push(e));
  return { events, res };
}

const textOf = (events: StreamEvent[]) => events.map((e) => (e.type === "text" ? e.text : "")).join("");

describe("demo provider", () => {
  test("is the demo implementation and needs no key or network", () => {
    expect(p).toBeInstanceOf(DemoProvider);
    expect(p.name).toBe("demo");
  });

  test("a new prompt: streamed text quoting the prompt, then one Bash tool call", async () => {
    const { events, res } = await run(base());
    const tool = events[events.length - 1]!;
    expect(tool).toMatchObject({ type: "tool_use", name: "Bash", input: { command: DEMO_COMMAND } });
    expect(events.slice(0, -1).every((e) => e.type === "text")).toBe(true);
    expect(events.length).toBeGreaterThan(5);
    expect(textOf(events)).toContain("“Show me around”");
    expect(res.content).toEqual([{ type: "text", text: textOf(events) }, tool as never]);
    expect(res.stopReason).toBe("tool_use");
  });

  test("after the tool result: a final answer streamed word by word that quotes the output", async () => {
    const first = await run(base());
    const call = first.res.content[1] as { id: string };
    const output = "Hello from your runcell workspace\nLinux 3f2a 6.1.0 x86_64 GNU/Linux\ntotal 8\n[exit code: 0]";
    const messages: ChatMessage[] = [
      ...base().messages,
      { role: "assistant", content: first.res.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: output }] },
    ];
    const { events, res } = await run(base({ messages }));
    expect(events.every((e) => e.type === "text")).toBe(true);
    expect(events.length).toBeGreaterThan(10);
    expect(textOf(events)).toContain("Hello from your runcell workspace\nLinux 3f2a 6.1.0 x86_64 GNU/Linux");
    expect(res.content).toEqual([{ type: "text", text: textOf(events) }]);
    expect(res.stopReason).toBe("end_turn");
  });

  test("a cancelled call's result followed by the next prompt in the same message: a new prompt, a new call", async () => {
    const messages: ChatMessage[] = [
      ...base().messages,
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_demo_0001", name: "Bash", input: { command: DEMO_COMMAND } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_demo_0001", content: "[cancelled by the user]", is_error: true }, { type: "text", text: "Try again please" }] },
    ];
    const { events, res } = await run(base({ messages }));
    expect(textOf(events)).toContain("“Try again please”");
    expect(textOf(events)).not.toContain("The command failed");
    expect(res.stopReason).toBe("tool_use");
  });

  test("a failed tool result is reported as a failure", async () => {
    const messages: ChatMessage[] = [
      ...base().messages,
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_demo_0001", name: "Bash", input: { command: DEMO_COMMAND } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_demo_0001", content: "sh: uname: not found", is_error: true }] },
    ];
    const { res } = await run(base({ messages }));
    expect((res.content[0] as { text: string }).text).toContain("The command failed");
    expect((res.content[0] as { text: string }).text).toContain("sh: uname: not found");
  });

  test("deterministic: the same conversation gives the same events, content and usage", async () => {
    const a = await run(base());
    const b = await run(base());
    expect(b).toEqual(a);
    expect(a.res.usage.input_tokens).toBeGreaterThan(0);
    expect(a.res.usage.output_tokens).toBeGreaterThan(0);
    const longer = await run(base({ system: "You are an agent. ".repeat(40) }));
    expect(longer.res.usage.input_tokens).toBeGreaterThan(a.res.usage.input_tokens);
  });

  test("only calls tools the profile enables: without Bash it answers in text", async () => {
    const { events, res } = await run(base({ tools: [READ_SPEC] }));
    expect(events.every((e) => e.type === "text")).toBe(true);
    expect(res.content).toHaveLength(1);
    expect(res.stopReason).toBe("end_turn");
    expect(textOf(events)).toContain("Bash");
  });

  test("each prompt of a session gets its own call with a distinct id", async () => {
    const first = await run(base());
    const id1 = (first.res.content[1] as { id: string }).id;
    const messages: ChatMessage[] = [
      ...base().messages,
      { role: "assistant", content: first.res.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: id1, content: "ok" }] },
      { role: "assistant", content: [{ type: "text", text: "done" }] },
      { role: "user", content: [{ type: "text", text: "Again please" }] },
    ];
    const again = await run(base({ messages }));
    const id2 = (again.res.content[1] as { id: string }).id;
    expect(id2).not.toBe(id1);
    expect(textOf(again.events)).toContain("“Again please”");
  });

  test("an aborted request rejects with the abort reason", async () => {
    const ctl = new AbortController();
    const slow = new DemoProvider({ wordDelayMs: 5 });
    const events: StreamEvent[] = [];
    const pending = slow.complete(base({ signal: ctl.signal }), (e) => events.push(e)).catch((e) => e);
    await Bun.sleep(20);
    ctl.abort();
    const err = await pending;
    expect((err as Error).name).toBe("AbortError");
    expect(events.length).toBeGreaterThan(0);
    expect(events.some((e) => e.type === "tool_use")).toBe(false);
  });
});
