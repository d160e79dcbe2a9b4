/**
 * The wire-format mocks the whole suite relies on: their raw SSE matches the real formats, script
 * mode, recording, and request validation like the real APIs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../../helpers/mock-openai.ts";
import type { RecordedRequest } from "../../helpers/mock-provider.ts";

const anthropic = startMockAnthropic();
const openai = startMockOpenAI();
afterAll(async () => {
  await anthropic.stop();
  await openai.stop();
});

async function sse(url: string, body: unknown): Promise<{ status: number; events: { event?: string; data: string }[]; text: string }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  const events = text
    .split("\n\n")
    .filter(Boolean)
    .map((f) => ({ event: /^event: (.*)$/m.exec(f)?.[1], data: /^data: (.*)$/m.exec(f)?.[1] ?? "" }));
  return { status: res.status, events, text };
}

const aBody = { model: "m", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hi" }] };
const oBody = { model: "m", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hi" }] };

describe("mock-anthropic wire format", () => {
  test("event sequence of a text + tool reply", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: ["Hi", "!"], toolCalls: [{ id: "toolu_1", name: "Bash", input: { command: "ls" }, chunks: 2 }], usage: { input_tokens: 9, output_tokens: 4 } });
    const { status, events } = await sse(`${anthropic.url}/v1/messages`, aBody);
    expect(status).toBe(200);
    expect(events.map((e) => e.event)).toEqual([
      "message_start", "ping",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "message_delta", "message_stop",
    ]);
    const data = events.map((e) => JSON.parse(e.data));
    expect(data[0].message.usage.input_tokens).toBe(9);
    expect(data[6].content_block).toEqual({ type: "tool_use", id: "toolu_1", name: "Bash", input: {} });
    expect(data[7].delta.type).toBe("input_json_delta");
    expect(data[7].delta.partial_json + data[8].delta.partial_json).toBe('{"command":"ls"}');
    expect(data[10]).toEqual({ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 4 } });
  });

  test("errors carry Anthropic's error JSON; 529 is overloaded_error; Retry-After is sent", async () => {
    anthropic.reset();
    anthropic.enqueue({ error: { status: 529, message: "Overloaded", retryAfter: 2 } });
    const res = await fetch(`${anthropic.url}/v1/messages`, { method: "POST", body: JSON.stringify(aBody) });
    expect(res.status).toBe(529);
    expect(res.headers.get("retry-after")).toBe("2");
    expect(await res.json()).toEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" }, request_id: "req_mock_0" });
  });

  test("no scripted turn left: a 400 that says so", async () => {
    anthropic.reset();
    const res = await fetch(`${anthropic.url}/v1/messages`, { method: "POST", body: JSON.stringify(aBody) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toContain("no scripted turn left");
  });

  test("validation like the real API: missing max_tokens, empty or whitespace-only text block", async () => {
    anthropic.reset();
    anthropic.script(() => ({ text: "never" }));
    const withText = (text: string) => ({ ...aBody, messages: [{ role: "user", content: [{ type: "text", text }] }] });
    for (const body of [{ ...aBody, max_tokens: undefined }, withText(""), withText(" \n\n\t")]) {
      const res = await fetch(`${anthropic.url}/v1/messages`, { method: "POST", body: JSON.stringify(body) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.type).toBe("invalid_request_error");
    }
  });

  test("script mode sees each recorded request and the queue goes first", async () => {
    anthropic.reset();
    const seen: RecordedRequest[] = [];
    anthropic.enqueue({ text: "queued" }).script((r) => {
      seen.push(r);
      return { text: `echo ${r.body.messages[0].content}` };
    });
    const first = await sse(`${anthropic.url}/v1/messages`, aBody);
    const second = await sse(`${anthropic.url}/v1/messages`, { ...aBody, messages: [{ role: "user", content: "ping" }] });
    expect(first.text).toContain("queued");
    expect(second.text).toContain('"echo "');
    expect(second.text).toContain('"ping"');
    expect(seen.map((r) => r.index)).toEqual([1]);
    expect((await anthropic.waitForRequests(2)).map((r) => r.body.messages[0].content)).toEqual(["hi", "ping"]);
  });
});

describe("mock-openai wire format", () => {
  test("chunks, tool_calls by index, finish_reason, usage chunk, [DONE]", async () => {
    openai.reset();
    openai.enqueue({ text: "Hi", toolCalls: [{ id: "call_1", name: "Bash", input: { command: "ls" }, chunks: 2 }], usage: { input_tokens: 9, output_tokens: 4 } });
    const { events } = await sse(`${openai.url}/chat/completions`, oBody);
    expect(events[events.length - 1]!.data).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(chunks[1].choices[0].delta).toEqual({ content: "Hi" });
    expect(chunks[2].choices[0].delta.tool_calls).toEqual([{ index: 0, id: "call_1", type: "function", function: { name: "Bash", arguments: "" } }]);
    expect(chunks[3].choices[0].delta.tool_calls[0].function.arguments + chunks[4].choices[0].delta.tool_calls[0].function.arguments).toBe('{"command":"ls"}');
    expect(chunks[5].choices[0].finish_reason).toBe("tool_calls");
    expect(chunks[6]).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } });
  });

  test("no usage chunk unless the request asks for it", async () => {
    openai.reset();
    openai.enqueue({ text: "Hi" });
    const { events } = await sse(`${openai.url}/chat/completions`, { ...oBody, stream_options: undefined });
    expect(events.some((e) => e.data.includes('"prompt_tokens"'))).toBe(false);
  });

  test("errors carry OpenAI's error JSON", async () => {
    openai.reset();
    openai.enqueue({ error: { status: 500, message: "The server had an error" } });
    const res = await fetch(`${openai.url}/chat/completions`, { method: "POST", body: JSON.stringify(oBody) });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { message: "The server had an error", type: "server_error", param: null, code: null } });
  });

  test("validation like the real API: unanswered tool_calls, stray tool message", async () => {
    openai.reset();
    openai.script(() => ({ text: "never" }));
    const call = { id: "call_9", type: "function", function: { name: "Bash", arguments: "{}" } };
    const unanswered = [{ role: "user", content: "hi" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "user", content: "?" }];
    const stray = [{ role: "user", content: "hi" }, { role: "tool", tool_call_id: "call_9", content: "x" }];
    for (const [messages, needle] of [[unanswered, "call_9"], [stray, "role 'tool'"]] as const) {
      const res = await fetch(`${openai.url}/chat/completions`, { method: "POST", body: JSON.stringify({ ...oBody, messages }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.message).toContain(needle);
    }
  });
});
