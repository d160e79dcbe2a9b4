/** The openai provider (official SDK) against a local server speaking Chat Completions SSE, as OpenAI and compatible servers do. */
import { describe, expect, test } from "bun:test";
import { OpenAIProvider, openaiParams, TOOL_ERROR_PREFIX, toOpenAIMessages, usesMaxCompletionTokens } from "../../../src/agents/providers/openai.ts";
import { type ChatMessage, getProvider, ModelError } from "../../../src/agents/providers/index.ts";
import { UsageMeter } from "../../../src/agents/providers/usage-meter.ts";
import { createLogger } from "../../../src/log.ts";
import { startMockOpenAI, toolMessages } from "../../helpers/mock-openai.ts";
import { providerScenarios, request, run } from "./scenarios.ts";

const p = getProvider("openai");

const CONVERSATION: ChatMessage[] = [
  { role: "user", content: [{ type: "text", text: "List the files, then show a.txt" }] },
  {
    role: "assistant",
    content: [
      { type: "text", text: "Listing." },
      { type: "tool_use", id: "call_A", name: "Bash", input: { command: "ls" } },
      { type: "tool_use", id: "call_B", name: "Read", input: { file_path: "a.txt" } },
    ],
  },
  {
    role: "user",
    content: [
      { type: "tool_result", tool_use_id: "call_A", content: "a.txt\n[exit code: 0]" },
      { type: "tool_result", tool_use_id: "call_B", content: "File not found: a.txt", is_error: true },
    ],
  },
  { role: "assistant", content: [{ type: "text", text: "a.txt is listed but cannot be read." }] },
  { role: "user", content: [{ type: "text", text: "Why?" }] },
];

describe("openai provider", () => {
  const mock = providerScenarios({
    provider: p,
    start: () => startMockOpenAI({ apiKey: "sk-test" }),
    toolEventsInContentOrder: false,
    streamErrorMessage: "The server had an error while processing your request.",
  });

  test("getProvider returns the OpenAI implementation", () => {
    expect(p).toBeInstanceOf(OpenAIProvider);
    expect(p.name).toBe("openai");
  });

  test("sends a streaming Chat Completions request with usage requested and function tools", async () => {
    mock().enqueue({ text: "ok" });
    await run(p, request(mock(), { model: "llama3.1:8b", maxTokens: 555 }));
    const r = mock().requests[0]!;
    expect(r.path).toBe("/v1/chat/completions");
    expect(r.headers.authorization).toBe("Bearer sk-test");
    expect(r.body).toEqual({
      model: "llama3.1:8b",
      messages: [
        { role: "system", content: "You are a test agent." },
        { role: "user", content: "Say hello" },
      ],
      max_tokens: 555,
      tools: [{ type: "function", function: { name: "Bash", description: "Run a shell command", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } }],
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  test("history conversion: system first, assistant tool_calls, role:tool results (errors prefixed), then text", () => {
    expect(toOpenAIMessages("SYS", CONVERSATION)).toEqual([
      { role: "system", content: "SYS" },
      { role: "user", content: "List the files, then show a.txt" },
      {
        role: "assistant",
        content: "Listing.",
        tool_calls: [
          { id: "call_A", type: "function", function: { name: "Bash", arguments: '{"command":"ls"}' } },
          { id: "call_B", type: "function", function: { name: "Read", arguments: '{"file_path":"a.txt"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_A", content: "a.txt\n[exit code: 0]" },
      { role: "tool", tool_call_id: "call_B", content: `${TOOL_ERROR_PREFIX}File not found: a.txt` },
      { role: "assistant", content: "a.txt is listed but cannot be read." },
      { role: "user", content: "Why?" },
    ]);
    expect(toOpenAIMessages("", [{ role: "assistant", content: [{ type: "tool_use", id: "c", name: "Bash", input: {} }] }])).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "Bash", arguments: "{}" } }] },
    ]);
    expect(toOpenAIMessages("", [{ role: "user", content: [{ type: "tool_result", tool_use_id: "c", content: "out" }, { type: "text", text: "and more" }] }])).toEqual([
      { role: "tool", tool_call_id: "c", content: "out" },
      { role: "user", content: "and more" },
    ]);
  });

  test("tool round trip through the server: its tool calls come back as tool messages the server accepts", async () => {
    mock().enqueue({ toolCalls: [{ name: "Bash", input: { command: "ls" } }, { name: "Bash", input: { command: "cat x" } }] }, { text: "done" });
    const first = await run(p, request(mock()));
    const ids = first.res!.content.filter((b) => b.type === "tool_use").map((b) => (b as { id: string }).id);
    const messages: ChatMessage[] = [
      ...request(mock()).messages,
      { role: "assistant", content: first.res!.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: ids[0]!, content: "x" }, { type: "tool_result", tool_use_id: ids[1]!, content: "no such file", is_error: true }] },
    ];
    const second = await run(p, request(mock(), { messages }));
    expect(second.err).toBeUndefined();
    expect(toolMessages(mock().requests[1]!.body)).toEqual([
      { role: "tool", tool_call_id: ids[0]!, content: "x" },
      { role: "tool", tool_call_id: ids[1]!, content: `${TOOL_ERROR_PREFIX}no such file` },
    ]);
  });

  test("a server that sends no usage chunk: the tokens are estimated (request JSON and answer, 3 characters a token) and a warning says so", async () => {
    const lines: string[] = [];
    const log = createLogger({ level: "warn", sink: (l) => lines.push(l) });
    mock().enqueue({ text: "ok, a longer answer", usage: null });
    const { res } = await run(p, request(mock(), { log }));
    const sent = mock().requests[0]!.body;
    const requestChars = JSON.stringify(sent.messages).length + (sent.tools ? JSON.stringify(sent.tools).length : 0);
    expect(res!.usage).toEqual({ input_tokens: Math.ceil(requestChars / 3), output_tokens: Math.ceil("ok, a longer answer".length / 3) });
    expect(res!.usage.input_tokens).toBeGreaterThan(0);
    expect(res!.content).toEqual([{ type: "text", text: "ok, a longer answer" }]);
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([{ level: "warn", msg: "the model server sent no usage: tokens estimated from the request and answer sizes", provider: "openai" }]);
  });

  test("usage figures that are not non-negative safe integers count as absent, with one warning per field naming it", async () => {
    const lines: string[] = [];
    const log = createLogger({ level: "warn", sink: (l) => lines.push(l) });
    for (const [prompt, completion] of [[10.5, 7], ["12", 1.5e308], [-3, 2 ** 53]] as const) {
      lines.length = 0;
      mock().enqueue({ text: "ok", usage: { input_tokens: prompt as number, output_tokens: completion as number } });
      const meter = new UsageMeter();
      const { res, err } = await run(p, request(mock(), { log, meter }));
      expect(err).toBeUndefined();
      const output = Number.isSafeInteger(completion) ? completion : 0;
      expect(res!.usage).toEqual({ input_tokens: 0, output_tokens: output });
      expect(meter.used().input_tokens).toBe(0);
      const warned = lines.map((l) => JSON.parse(l));
      expect(warned.map((w) => w.field)).toEqual(Number.isSafeInteger(completion) ? ["prompt_tokens"] : ["prompt_tokens", "completion_tokens"]);
      expect(warned.every((w) => w.level === "warn" && w.provider === "openai")).toBe(true);
      // The figure itself is not logged (it is the server's body).
      // (Its timestamp left out: "12" is a figure tested here, and a time may hold it.)
      expect(JSON.stringify(warned.map(({ time: _, ...w }) => w))).not.toContain(String(prompt));
    }
  });

  test("a tool call id repeated within one message gets a generated one (results are matched by id)", async () => {
    mock().enqueue({ toolCalls: [{ id: "call_X", name: "Bash", input: { command: "echo d1" } }, { id: "call_X", name: "Bash", input: { command: "echo d2" } }, { id: "call_Y", name: "Bash", input: { command: "echo d3" } }] });
    const { res, events } = await run(p, request(mock()));
    const uses = res!.content.filter((b) => b.type === "tool_use") as unknown as { id: string; input: { command: string } }[];
    expect(uses.map((u) => u.input.command)).toEqual(["echo d1", "echo d2", "echo d3"]);
    expect(uses[0]!.id).toBe("call_X");
    expect(uses[2]!.id).toBe("call_Y");
    expect(uses[1]!.id).toMatch(/^call_[0-9a-f]{24}$/);
    // The events carry the ids the message is stored with.
    expect(events.filter((e) => e.type === "tool_use").map((e) => (e as { id: string }).id)).toEqual(uses.map((u) => u.id));
    mock().enqueue({ text: "ok" });
    const messages: ChatMessage[] = [
      ...request(mock()).messages,
      { role: "assistant", content: res!.content },
      { role: "user", content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: u.input.command.slice(5) })) },
    ];
    expect((await run(p, request(mock(), { messages }))).err).toBeUndefined();
    expect(toolMessages(mock().requests[1]!.body)).toEqual(uses.map((u) => ({ role: "tool", tool_call_id: u.id, content: u.input.command.slice(5) })));
  });

  test("tool calls finished with 'stop' (Ollama) still count as tool_use", async () => {
    mock().enqueue({ toolCalls: [{ name: "Bash", input: { command: "ls" } }], stopReason: "stop" });
    const { res, events } = await run(p, request(mock()));
    expect(res!.stopReason).toBe("tool_use");
    expect(events).toHaveLength(1);
  });

  test("finish reasons map to ours (length, content_filter, stop)", async () => {
    for (const [wire, ours] of [["length", "max_tokens"], ["content_filter", "refusal"], ["stop", "end_turn"]] as const) {
      mock().enqueue({ text: "x", stopReason: wire });
      expect((await run(p, request(mock()))).res!.stopReason).toBe(ours);
    }
  });

  test("a refusal (delta.refusal) is the answer's text, streamed as it arrives, with stop reason refusal", async () => {
    mock().enqueue({ refusal: ["I'm sorry, ", "I can't ", "help with that."] });
    const { res, events, err } = await run(p, request(mock()));
    expect(err).toBeUndefined();
    expect(events).toEqual([
      { type: "text", text: "I'm sorry, " },
      { type: "text", text: "I can't " },
      { type: "text", text: "help with that." },
    ]);
    expect(res!.content).toEqual([{ type: "text", text: "I'm sorry, I can't help with that.", refusal: true }]);
    expect(res!.stopReason).toBe("refusal");
  });

  test("text before a refusal is kept in front of it, in a block of its own (the refusal's is marked)", async () => {
    mock().enqueue({ text: ["Let me see. "], refusal: ["No."] });
    const { res } = await run(p, request(mock()));
    expect(res!.content).toEqual([
      { type: "text", text: "Let me see. " },
      { type: "text", text: "No.", refusal: true },
    ]);
    expect(res!.stopReason).toBe("refusal");
  });

  test("a refused answer goes back to the server with its text in the assistant message's refusal field, not its content", async () => {
    const refused: ChatMessage[] = [
      { role: "user", content: [{ type: "text", text: "Do the bad thing" }] },
      { role: "assistant", content: [{ type: "text", text: "I can't help with that.", refusal: true }] },
      { role: "user", content: [{ type: "text", text: "Then say hello" }] },
      { role: "assistant", content: [{ type: "text", text: "Let me see. " }, { type: "text", text: "No.", refusal: true }] },
      { role: "user", content: [{ type: "text", text: "Hello?" }] },
    ];
    mock().enqueue({ text: "Hello." });
    const { err } = await run(p, request(mock(), { messages: refused }));
    expect(err).toBeUndefined();
    expect(mock().requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role === "assistant")).toEqual([
      { role: "assistant", content: "", refusal: "I can't help with that." },
      { role: "assistant", content: "Let me see. ", refusal: "No." },
    ]);
  });

  test("arguments that are not valid JSON reach the tool as _raw_arguments (the model sees the tool's error)", async () => {
    mock().enqueue({ toolCalls: [{ name: "Bash", input: {}, rawArguments: ['{"command": "ls', " -la"] }, { name: "Bash", input: {}, rawArguments: [] }] });
    const { res } = await run(p, request(mock()));
    expect(res!.content.map((b) => (b as { input: unknown }).input)).toEqual([{ _raw_arguments: '{"command": "ls -la' }, {}]);
  });

  test("arguments nested deeper than 64 levels are not read as arguments (nothing walks them)", async () => {
    const deep = `{"command":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    mock().enqueue({ toolCalls: [{ name: "Bash", input: {}, rawArguments: [deep] }] });
    const { res } = await run(p, request(mock()));
    expect(res!.content.map((b) => (b as { input: unknown }).input)).toEqual([{ _raw_arguments: "(arguments nested deeper than 64 levels, not read)" }]);
  });

  /** A server answering every request with `chunks` as a Chat Completions stream. */
  const rawStream = (chunks: object[]) =>
    Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response(chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n", { headers: { "content-type": "text/event-stream" } }),
    });
  const call = (index: number, id: string | undefined, name: string | undefined, args: string) => ({
    choices: [{ index: 0, delta: { tool_calls: [{ index, ...(id ? { id, type: "function" } : {}), function: { ...(name ? { name } : {}), arguments: args } }] }, finish_reason: null }],
  });
  const finished = { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] };

  test("parallel calls all numbered index 0 (Ollama, some gateways) are told apart by their ids; a call's later pieces without an id stay its own", async () => {
    const server = rawStream([
      call(0, "call_w", "Write", '{"file_path":"o.txt",'),
      call(0, undefined, undefined, '"content":"x"}'),
      call(0, "call_b", "Bash", '{"command":"echo second"}'),
      finished,
    ]);
    try {
      const { res, events } = await run(p, request(mock(), { baseUrl: `http://127.0.0.1:${server.port}/v1` }));
      const uses = res!.content.filter((b) => b.type === "tool_use");
      expect(uses).toEqual([
        { type: "tool_use", id: "call_w", name: "Write", input: { file_path: "o.txt", content: "x" } },
        { type: "tool_use", id: "call_b", name: "Bash", input: { command: "echo second" } },
      ]);
      expect(events.map((e) => (e as { id?: string }).id)).toEqual(["call_w", "call_b"]);
      expect(res!.stopReason).toBe("tool_use");
    } finally {
      server.stop(true);
    }
  });

  test("vLLM's error chunk ({object: 'error', message}) fails the request with its message", async () => {
    const server = rawStream([{ object: "error", message: "This model's maximum context length is 4096 tokens", type: "BadRequestError", code: 400 }]);
    try {
      const { err } = await run(p, request(mock(), { baseUrl: `http://127.0.0.1:${server.port}/v1` }));
      expect(err).toBeInstanceOf(ModelError);
      expect((err as ModelError).message).toBe("This model's maximum context length is 4096 tokens");
    } finally {
      server.stop(true);
    }
  });

  test("a 4xx error body with a bare string message (Ollama) gives that message", async () => {
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ error: 'model "nope" not found, try pulling it first' }, { status: 404 }) });
    try {
      const { err } = await run(p, request(mock(), { baseUrl: `http://127.0.0.1:${server.port}/v1` }));
      expect(err).toBeInstanceOf(ModelError);
      expect([(err as ModelError).message, (err as ModelError).status, (err as ModelError).retryable]).toEqual(['model "nope" not found, try pulling it first', 404, false]);
    } finally {
      server.stop(true);
    }
  });

  test("max_completion_tokens for OpenAI's own API, max_tokens for compatible servers", () => {
    expect(usesMaxCompletionTokens(null)).toBe(true);
    expect(usesMaxCompletionTokens("https://api.openai.com/v1")).toBe(true);
    expect(usesMaxCompletionTokens("http://localhost:11434/v1")).toBe(false);
    expect(usesMaxCompletionTokens("https://openrouter.ai/api/v1")).toBe(false);
    const req = request(mock(), { baseUrl: null });
    expect(openaiParams(req)).toMatchObject({ max_completion_tokens: 1024 });
    expect("max_tokens" in openaiParams(req)).toBe(false);
  });

  test("no tools: the tools field is left out (some servers reject an empty list)", async () => {
    mock().enqueue({ text: "ok" });
    await run(p, request(mock(), { tools: [] }));
    expect("tools" in mock().requests[0]!.body).toBe(false);
  });

  test("a custom base_url without a key works (local servers need none); no key for api.openai.com fails early", async () => {
    const open = startMockOpenAI();
    try {
      open.enqueue({ text: "local" });
      const { res } = await run(p, request(open, { apiKey: null }));
      expect(res!.content).toEqual([{ type: "text", text: "local" }]);
    } finally {
      await open.stop();
    }
    const { err } = await run(p, request(mock(), { apiKey: null, baseUrl: null }));
    expect((err as ModelError).message).toContain("OPENAI_API_KEY");
  });

  test("the server environment's OpenAI settings never reach a custom base_url (admin key, org, project, custom headers)", async () => {
    const env = { OPENAI_ADMIN_KEY: "sk-admin-operator", OPENAI_ORG_ID: "org-operator", OPENAI_PROJECT_ID: "proj-operator", OPENAI_CUSTOM_HEADERS: "X-Gateway-Key: gw-operator-secret" };
    Object.assign(process.env, env);
    const fresh = startMockOpenAI(); // a new base URL, so a new SDK client reads the environment
    try {
      fresh.enqueue({ text: "ok" });
      const { res } = await run(p, request(fresh, { apiKey: "sk-user" }));
      expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
      const h = fresh.requests[0]!.headers;
      expect(h.authorization).toBe("Bearer sk-user");
      for (const v of Object.values(env)) expect(JSON.stringify(h)).not.toContain(v.split(": ").pop()!);
    } finally {
      for (const k of Object.keys(env)) delete process.env[k];
      await fresh.stop();
    }
  });
});
