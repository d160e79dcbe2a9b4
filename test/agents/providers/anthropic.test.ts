/** The anthropic provider (official SDK) against a local server speaking the Messages API SSE format. */
import { describe, expect, test } from "bun:test";
import { AnthropicProvider, textDeltaOf, toAnthropicMessages } from "../../../src/agents/providers/anthropic.ts";
import { type ChatMessage, getProvider, ModelError } from "../../../src/agents/providers/index.ts";
import { UsageMeter } from "../../../src/agents/providers/usage-meter.ts";
import { createLogger } from "../../../src/log.ts";
import { startMockAnthropic, toolResults } from "../../helpers/mock-anthropic.ts";
import { FAST_RETRIES, providerScenarios, request, run } from "./scenarios.ts";

const p = getProvider("anthropic");

describe("anthropic provider", () => {
  const mock = providerScenarios({
    provider: p,
    start: () => startMockAnthropic({ apiKey: "sk-test" }),
    toolEventsInContentOrder: true,
    streamErrorMessage: "Overloaded",
  });

  test("getProvider returns the Anthropic implementation", () => {
    expect(p).toBeInstanceOf(AnthropicProvider);
    expect(p.name).toBe("anthropic");
  });

  test("sends model, max_tokens, system, tools and the conversation as the Messages API expects", async () => {
    mock().enqueue({ text: "ok" });
    await run(p, request(mock(), { model: "claude-sonnet-4-6", maxTokens: 777 }));
    const r = mock().requests[0]!;
    expect(r.path).toBe("/v1/messages");
    expect(r.headers.authorization ?? r.headers["x-api-key"]).toContain("sk-test");
    expect(r.body).toMatchObject({
      model: "claude-sonnet-4-6",
      max_tokens: 777,
      stream: true,
      system: "You are a test agent.",
      messages: [{ role: "user", content: [{ type: "text", text: "Say hello" }] }],
      tools: [{ name: "Bash", description: "Run a shell command", input_schema: { type: "object", required: ["command"] } }],
    });
    expect(r.headers["x-stainless-retry-count"]).toBe("0");
  });

  test("no system prompt and no tools: neither field is sent", async () => {
    mock().enqueue({ text: "ok" });
    await run(p, request(mock(), { system: "", tools: [] }));
    expect(Object.keys(mock().requests[0]!.body).sort()).toEqual(["max_tokens", "messages", "model", "stream"]);
  });

  test("a tool round trip: tool_use and tool_result blocks (incl. is_error) go back unchanged", async () => {
    mock().enqueue({ toolCalls: [{ id: "toolu_A", name: "Bash", input: { command: "ls" } }, { id: "toolu_B", name: "Bash", input: { command: "false" } }] }, { text: "Both ran." });
    const first = await run(p, request(mock()));
    const messages = [
      ...request(mock()).messages,
      { role: "assistant" as const, content: first.res!.content },
      {
        role: "user" as const,
        content: [
          { type: "tool_result" as const, tool_use_id: "toolu_A", content: "a.txt\nb.txt\n[exit code: 0]" },
          { type: "tool_result" as const, tool_use_id: "toolu_B", content: "[exit code: 1]", is_error: true },
        ],
      },
    ];
    const second = await run(p, request(mock(), { messages }));
    expect(second.err).toBeUndefined();
    expect(second.res!.content).toEqual([{ type: "text", text: "Both ran." }]);
    const sent = mock().requests[1]!.body;
    expect(sent.messages[1]).toEqual({ role: "assistant", content: first.res!.content.map((b) => ({ ...b })) });
    expect(toolResults(sent)).toEqual([
      { type: "tool_result", tool_use_id: "toolu_A", content: "a.txt\nb.txt\n[exit code: 0]" },
      { type: "tool_result", tool_use_id: "toolu_B", content: "[exit code: 1]", is_error: true },
    ]);
  });

  test("a refusal's text stored from an OpenAI answer (marked refusal) is sent as an ordinary text block, the mark left out", async () => {
    const messages: ChatMessage[] = [
      { role: "user", content: [{ type: "text", text: "Do the bad thing" }] },
      { role: "assistant", content: [{ type: "text", text: "Let me see. " }, { type: "text", text: "I can't help with that.", refusal: true }] },
      { role: "user", content: [{ type: "text", text: "Then say hello" }] },
    ];
    mock().enqueue({ text: "Hello." });
    const { err } = await run(p, request(mock(), { messages }));
    expect(err).toBeUndefined();
    expect(mock().requests.at(-1)!.body.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: "Let me see. " },
        { type: "text", text: "I can't help with that." },
      ],
    });
  });

  test("a request without tools (all turned off after some ran) carries the earlier calls and results as text, which the API accepts", async () => {
    const messages: ChatMessage[] = [
      { role: "user", content: [{ type: "text", text: "List the files" }] },
      { role: "assistant", content: [{ type: "text", text: "Listing." }, { type: "tool_use", id: "toolu_L", name: "Bash", input: { command: "ls" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_L", content: "no such dir", is_error: true }] },
      { role: "assistant", content: [{ type: "text", text: "Nothing there." }] },
      { role: "user", content: [{ type: "text", text: "Thanks" }] },
    ];
    mock().enqueue({ text: "You're welcome" });
    const { res, err } = await run(p, request(mock(), { messages, tools: [] }));
    expect(err).toBeUndefined();
    expect(res!.content).toEqual([{ type: "text", text: "You're welcome" }]);
    const sent = mock().requests[0]!.body;
    expect(sent.tools).toBeUndefined();
    expect(sent.messages.slice(1, 3)).toEqual([
      { role: "assistant", content: [{ type: "text", text: "Listing." }, { type: "text", text: '[Called the tool Bash (call toolu_L) with {"command":"ls"}]' }] },
      { role: "user", content: [{ type: "text", text: "[Result of call toolu_L (an error): no such dir]" }] },
    ]);
    // With tools declared, the blocks go as they are.
    mock().enqueue({ text: "ok" });
    expect((await run(p, request(mock(), { messages }))).err).toBeUndefined();
    expect(mock().requests[1]!.body.messages[1].content[1]).toEqual({ type: "tool_use", id: "toolu_L", name: "Bash", input: { command: "ls" } });
  });

  test("empty text blocks are dropped (the API rejects them) and empty tool output omits content", () => {
    const out = toAnthropicMessages([
      { role: "assistant", content: [{ type: "text", text: "" }, { type: "tool_use", id: "t", name: "Bash", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "" }] },
    ]);
    expect(out).toEqual([
      { role: "assistant", content: [{ type: "tool_use", id: "t", name: "Bash", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t" }] },
    ]);
  });

  test("whitespace-only text blocks are not sent (the API rejects them); a message left empty is dropped and its neighbours merged", async () => {
    // As a stored conversation holds them: "\n\n" before a tool call, a whitespace-only answer, a
    // whitespace-only prompt merged with the next one. The mock rejects each like the real API.
    const text = (t: string) => ({ type: "text" as const, text: t });
    const messages = [
      { role: "user" as const, content: [text("  "), text("first")] },
      { role: "assistant" as const, content: [text("\n\n"), { type: "tool_use" as const, id: "toolu_W", name: "Bash", input: { command: "echo hi" } }] },
      { role: "user" as const, content: [{ type: "tool_result" as const, tool_use_id: "toolu_W", content: "hi" }] },
      { role: "assistant" as const, content: [text("ok")] },
      { role: "user" as const, content: [text("second")] },
      { role: "assistant" as const, content: [text(" \n\n\t ")] },
      { role: "user" as const, content: [text("third")] },
    ];
    mock().enqueue({ text: "fine" });
    const { res, err } = await run(p, request(mock(), { messages }));
    expect(err).toBeUndefined();
    expect(res!.content).toEqual([text("fine")]);
    expect(mock().requests[0]!.body.messages).toEqual([
      { role: "user", content: [text("first")] },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_W", name: "Bash", input: { command: "echo hi" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_W", content: "hi" }] },
      { role: "assistant", content: [text("ok")] },
      { role: "user", content: [text("second"), text("third")] },
    ]);
  });

  test("529 overloaded is retried", async () => {
    mock().enqueue({ error: { status: 529, message: "Overloaded" } }, { error: { status: 529, message: "Overloaded" } }, { text: "ok" });
    const { res } = await run(p, request(mock()));
    expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    expect(mock().requests).toHaveLength(3);
  });

  test("529 forever: ModelError 'Overloaded' of type overloaded_error", async () => {
    mock().script(() => ({ error: { status: 529, message: "Overloaded" } }));
    const { err } = await run(p, request(mock()));
    expect(err).toBeInstanceOf(ModelError);
    const e = err as ModelError;
    expect([e.message, e.status, e.type, e.provider, e.attempts]).toEqual(["Overloaded", 529, "overloaded_error", "anthropic", FAST_RETRIES.retries + 1]);
  });

  test("an in-stream invalid_request_error is not retried", async () => {
    mock().enqueue({ text: "x", failAfter: 0, failWith: { type: "invalid_request_error", message: "prompt is too long" } }, { text: "never" });
    const { err } = await run(p, request(mock()));
    expect([(err as ModelError).message, (err as ModelError).retryable]).toEqual(["prompt is too long", false]);
    expect(mock().requests).toHaveLength(1);
  });

  test("stop reasons map to ours (max_tokens, refusal, unknown → other)", async () => {
    for (const [wire, ours] of [["max_tokens", "max_tokens"], ["refusal", "refusal"], ["stop_sequence", "stop_sequence"], ["pause_turn", "other"]] as const) {
      mock().enqueue({ text: "x", stopReason: wire });
      expect((await run(p, request(mock()))).res!.stopReason).toBe(ours);
    }
  });

  test("an invalid request is answered 400 by the mock like the real API (tool_use without its result)", async () => {
    const messages = [
      { role: "user" as const, content: [{ type: "text" as const, text: "hi" }] },
      { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "toolu_X", name: "Bash", input: {} }] },
      { role: "user" as const, content: [{ type: "text" as const, text: "no result" }] },
    ];
    const { err } = await run(p, request(mock(), { messages }));
    expect((err as ModelError).status).toBe(400);
    expect((err as ModelError).message).toContain("toolu_X");
  });

  test("no key and no base_url: fails before any request, saying how to fix it", async () => {
    const { err } = await run(p, request(mock(), { apiKey: null, baseUrl: null }));
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).message).toContain("ANTHROPIC_API_KEY");
    expect((err as ModelError).retryable).toBe(false);
    expect(mock().requests).toHaveLength(0);
  });

  test("the server's ANTHROPIC_API_KEY never goes to a custom base_url (the vault decides; the provider sends only the request's key)", async () => {
    process.env.ANTHROPIC_API_KEY = "sk-operator-secret";
    try {
      mock().enqueue({ text: "ok" });
      // This mock demands "sk-test": the placeholder is refused like a real server would.
      const { err } = await run(p, request(mock(), { apiKey: null }));
      expect((err as ModelError).status).toBe(401);
      const sent = JSON.stringify(mock().requests.at(-1)!.headers);
      expect(sent).not.toContain("sk-operator-secret");
      expect(mock().requests.at(-1)!.headers["x-api-key"]).toBe("no-key");
    } finally {
      delete process.env.ANTHROPIC_API_KEY;
    }
  });

  test("the operator's ANTHROPIC_CUSTOM_HEADERS and ANTHROPIC_AUTH_TOKEN never reach a custom base_url", async () => {
    process.env.ANTHROPIC_CUSTOM_HEADERS = "X-Gateway-Key: gw-operator-secret\nX-Other: other-operator-value";
    process.env.ANTHROPIC_AUTH_TOKEN = "operator-auth-token";
    const fresh = startMockAnthropic(); // a new base URL, so a new SDK client reads the environment
    try {
      fresh.enqueue({ text: "ok" });
      const { res } = await run(p, request(fresh, { apiKey: "sk-user" }));
      expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
      const sent = JSON.stringify(fresh.requests[0]!.headers);
      expect(sent).toContain("sk-user");
      for (const v of ["gw-operator-secret", "other-operator-value", "operator-auth-token"]) expect(sent).not.toContain(v);
    } finally {
      delete process.env.ANTHROPIC_CUSTOM_HEADERS;
      delete process.env.ANTHROPIC_AUTH_TOKEN;
      await fresh.stop();
    }
  });
});

describe("usage: message_delta's figures merged into message_start's, field by field", () => {
  /** A local server answering every request with message_start's usage `start` and message_delta's `delta`. */
  function usageServer(start: Record<string, unknown>, delta: Record<string, unknown>) {
    const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    return Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () =>
        new Response(
          sse("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: start } }) +
            sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
            sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hello" } }) +
            sse("content_block_stop", { type: "content_block_stop", index: 0 }) +
            sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: delta }) +
            sse("message_stop", { type: "message_stop" }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    });
  }

  const START = { input_tokens: 100, cache_creation_input_tokens: 2000, cache_read_input_tokens: 4000, output_tokens: 1 };
  const cases: [string, Record<string, unknown>, number][] = [
    ["input_tokens again, cache fields absent", { input_tokens: 100, output_tokens: 10 }, 6100],
    ["cache fields null", { input_tokens: 100, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens: 10 }, 6100],
    ["output only", { output_tokens: 10 }, 6100],
    ["input_tokens null", { input_tokens: null, output_tokens: 10 }, 6100],
    ["a field given replaces message_start's", { input_tokens: 150, cache_read_input_tokens: 5000, output_tokens: 10 }, 7150],
  ];
  for (const [name, delta, input] of cases) {
    test(`${name}: input ${input}`, async () => {
      const server = usageServer(START, delta);
      try {
        const meter = new UsageMeter();
        const { res, err } = await run(p, { model: "m", system: "", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], tools: [], maxTokens: 64, baseUrl: server.url.href.replace(/\/$/, ""), apiKey: "k", meter });
        expect(err).toBeUndefined();
        expect(res!.usage).toEqual({ input_tokens: input, output_tokens: 10 });
        // What a cancelled request would be charged agrees with the answer's figures.
        expect(meter.used()).toEqual({ input_tokens: input, output_tokens: 10 });
      } finally {
        server.stop(true);
      }
    });
  }
});

describe("usage figures that are not non-negative safe integers count as absent", () => {
  const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  function usageServer(start: Record<string, unknown>, delta: Record<string, unknown>) {
    return Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () =>
        new Response(
          sse("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: start } }) +
            sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
            sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hello" } }) +
            sse("content_block_stop", { type: "content_block_stop", index: 0 }) +
            sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: delta }) +
            sse("message_stop", { type: "message_stop" }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    });
  }
  const cases: [string, Record<string, unknown>, Record<string, unknown>, { input_tokens: number; output_tokens: number }, string[]][] = [
    ["a fraction", { input_tokens: 10.7, output_tokens: 1 }, { output_tokens: 2.2 }, { input_tokens: 0, output_tokens: 1 }, ["input_tokens", "output_tokens"]],
    // Added as strings, "12" was once recorded as 1200 input tokens.
    ["a string", { input_tokens: "12", cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }, { output_tokens: "x" }, { input_tokens: 0, output_tokens: 1 }, ["input_tokens", "output_tokens"]],
    ["past 2^53, restated", { input_tokens: 1e20, cache_read_input_tokens: 40, output_tokens: 1 }, { input_tokens: 1e20, output_tokens: 5 }, { input_tokens: 40, output_tokens: 5 }, ["input_tokens"]],
    ["1.5e308 and a negative", { input_tokens: 100, cache_creation_input_tokens: -5, output_tokens: 1 }, { output_tokens: 1.5e308 }, { input_tokens: 100, output_tokens: 1 }, ["cache_creation_input_tokens", "output_tokens"]],
  ];
  for (const [name, start, delta, usage, fields] of cases) {
    test(`${name}: ${JSON.stringify(usage)}, warned once for ${fields.join(", ")}`, async () => {
      const server = usageServer(start, delta);
      const lines: string[] = [];
      try {
        const meter = new UsageMeter();
        const log = createLogger({ level: "warn", sink: (l) => lines.push(l) });
        const { res, err } = await run(p, { model: "m", system: "", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], tools: [], maxTokens: 64, baseUrl: server.url.href.replace(/\/$/, ""), apiKey: "k", meter, log });
        expect(err).toBeUndefined();
        expect(res!.usage).toEqual(usage);
        expect(meter.used().input_tokens).toBe(usage.input_tokens);
        const warned = lines.map((l) => JSON.parse(l));
        expect(warned.map((w) => w.field)).toEqual(fields);
        expect(warned.every((w) => w.provider === "anthropic")).toBe(true);
      } finally {
        server.stop(true);
      }
    });
  }
});

describe("a tool_use whose input arrives whole in content_block_start (some gateways)", () => {
  test("is run with that input when no input_json_delta follows; deltas, when they come, are the input", async () => {
    const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () =>
        new Response(
          sse("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } }) +
            sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_full", name: "Bash", input: { command: "echo full-input" } } }) +
            sse("content_block_stop", { type: "content_block_stop", index: 0 }) +
            // The usual shape: an empty input at the start, the input in deltas.
            sse("content_block_start", { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_delta", name: "Bash", input: {} } }) +
            sse("content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"command":' } }) +
            sse("content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"echo streamed"}' } }) +
            sse("content_block_stop", { type: "content_block_stop", index: 1 }) +
            sse("message_delta", { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 5 } }) +
            sse("message_stop", { type: "message_stop" }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    });
    try {
      const { res, events, err } = await run(p, { model: "m", system: "", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], tools: [], maxTokens: 64, baseUrl: server.url.href.replace(/\/$/, ""), apiKey: "k" });
      expect(err).toBeUndefined();
      const expected = [
        { type: "tool_use", id: "toolu_full", name: "Bash", input: { command: "echo full-input" } },
        { type: "tool_use", id: "toolu_delta", name: "Bash", input: { command: "echo streamed" } },
      ];
      expect(events).toEqual(expected as never);
      expect(res!.content).toEqual(expected as never);
    } finally {
      server.stop(true);
    }
  });
});

describe("textDeltaOf (text deltas read without JSON.parse)", () => {
  const ev = (index: number, text: string) => ({ type: "content_block_delta", index, delta: { type: "text_delta", text } });
  test("the exact shape gives what JSON.parse gives, escapes included", () => {
    for (const [i, t] of [[0, "hello"], [12, "line\nnext\ttab"], [3, "é ✓ 🙂"], [0, "back\\slash \u0001"], [0, ""]] as const) {
      const data = JSON.stringify(ev(i, t));
      expect(textDeltaOf(data)).toEqual(JSON.parse(data));
    }
  });
  test("anything else is left to JSON.parse (null): a quote in the text, other key orders, extra fields, other deltas", () => {
    for (const data of [
      JSON.stringify(ev(0, 'say "hi"')),
      JSON.stringify({ index: 0, type: "content_block_delta", delta: { type: "text_delta", text: "x" } }),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "x" }, extra: 1 }),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{" } }),
      '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"x":{"y":"b"}}',
      '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}',
    ]) {
      expect(textDeltaOf(data)).toBeNull();
    }
  });
});
