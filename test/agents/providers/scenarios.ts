/**
 * The scenarios every SDK-backed provider must pass against its wire-format mock: streaming order,
 * tool calls, usage, retries (and when not to retry), abort. anthropic.test.ts and openai.test.ts
 * run them with their own provider and mock, plus their provider-specific cases.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { DEFAULT_RETRY_POLICY, setRetryPolicy } from "../../../src/agents/providers/retry.ts";
import { type ModelRequest, type ModelResponse, ModelError, type Provider, type StreamEvent } from "../../../src/agents/providers/types.ts";
import type { MockProviderServer } from "../../helpers/mock-provider.ts";
import { freePort, waitFor } from "../../helpers/net.ts";

export const FAST_RETRIES = { retries: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 400 };

export const BASH_SPEC = {
  name: "Bash",
  description: "Run a shell command",
  input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
};

export function request(mock: MockProviderServer, over: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: "test-model",
    system: "You are a test agent.",
    messages: [{ role: "user", content: [{ type: "text", text: "Say hello" }] }],
    tools: [BASH_SPEC],
    maxTokens: 1024,
    baseUrl: mock.url,
    apiKey: "sk-test",
    ...over,
  };
}

/** Runs complete() and keeps every event (and the error, if it failed). */
export async function run(p: Provider, req: ModelRequest): Promise<{ events: StreamEvent[]; res?: ModelResponse; err?: unknown; ms: number }> {
  const events: StreamEvent[] = [];
  const t0 = performance.now();
  try {
    const res = await p.complete(req, (e) => events.push(e));
    return { events, res, ms: performance.now() - t0 };
  } catch (err) {
    return { events, err, ms: performance.now() - t0 };
  }
}

export interface ScenarioOptions {
  provider: Provider;
  start(): MockProviderServer;
  /** Whether tool_use events are emitted in content order (Anthropic) or at the end (OpenAI's finish_reason). */
  toolEventsInContentOrder: boolean;
  /** The message of the mock's default in-stream error. */
  streamErrorMessage: string;
}

export function providerScenarios(o: ScenarioOptions): () => MockProviderServer {
  let mock: MockProviderServer;
  beforeAll(() => {
    setRetryPolicy(FAST_RETRIES);
    mock = o.start();
  });
  afterEach(() => mock.reset());
  afterAll(async () => {
    setRetryPolicy(DEFAULT_RETRY_POLICY);
    await mock.stop();
  });
  const p = o.provider;

  test("plain text is streamed piece by piece, in order", async () => {
    mock.enqueue({ text: ["Hel", "lo, ", "wor", "ld!"], delayMs: 2 });
    const { events, res } = await run(p, request(mock));
    expect(events).toEqual(["Hel", "lo, ", "wor", "ld!"].map((text) => ({ type: "text", text })));
    expect(res!.content).toEqual([{ type: "text", text: "Hello, world!" }]);
    expect(res!.stopReason).toBe("end_turn");
  });

  test("an answer streaming past the limit (32 MiB) is cut off: a ModelError, not retried", async () => {
    const MiB = "x".repeat(1024 * 1024);
    mock.enqueue({ text: Array.from({ length: 40 }, () => MiB) });
    const { err, events } = await run(p, request(mock));
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).message).toContain("went past 32 MiB");
    expect((err as ModelError).retryable).toBe(false);
    expect(mock.requests.length).toBe(1);
    expect(events.length).toBeLessThan(40);
  });

  test("text events arrive while the response is still streaming", async () => {
    mock.enqueue({ text: ["first ", "second ", "never"], hangAfter: 2 });
    const ctl = new AbortController();
    const events: StreamEvent[] = [];
    const done = p.complete(request(mock, { signal: ctl.signal }), (e) => events.push(e)).catch((e) => e);
    await waitFor(() => events.length === 2, { what: "two text events before the end of the stream" });
    expect(events.map((e) => (e as { text: string }).text)).toEqual(["first ", "second "]);
    ctl.abort();
    await done;
  });

  test("a single tool call: input JSON accumulated across fragments, emitted once complete", async () => {
    mock.enqueue({ toolCalls: [{ id: "call_1", name: "Bash", input: { command: "echo 'hi there' && ls -la /workspace" }, chunks: 7 }] });
    const { events, res } = await run(p, request(mock));
    const tool = { type: "tool_use" as const, id: "call_1", name: "Bash", input: { command: "echo 'hi there' && ls -la /workspace" } };
    expect(events).toEqual([tool]);
    expect(res!.content).toEqual([tool]);
    expect(res!.stopReason).toBe("tool_use");
  });

  test("several tool calls in one response keep their order and ids", async () => {
    mock.enqueue({
      text: "Running three things.",
      toolCalls: [
        { name: "Bash", input: { command: "ls" } },
        { name: "Bash", input: { command: "pwd" }, chunks: 1 },
        { name: "Read", input: { file_path: "notes.txt", limit: 10 } },
      ],
    });
    const { events, res } = await run(p, request(mock));
    const tools = events.filter((e) => e.type === "tool_use") as Extract<StreamEvent, { type: "tool_use" }>[];
    expect(tools.map((t) => [t.name, t.input])).toEqual([
      ["Bash", { command: "ls" }],
      ["Bash", { command: "pwd" }],
      ["Read", { file_path: "notes.txt", limit: 10 }],
    ]);
    expect(new Set(tools.map((t) => t.id)).size).toBe(3);
    expect(res!.content.map((b) => b.type)).toEqual(["text", "tool_use", "tool_use", "tool_use"]);
    expect(res!.content.slice(1)).toEqual(tools);
  });

  test("text and tool calls interleaved", async () => {
    mock.enqueue({
      blocks: [
        { text: "Look first." },
        { tool: { id: "t1", name: "Bash", input: { command: "ls" } } },
        { text: "Then read." },
        { tool: { id: "t2", name: "Read", input: { file_path: "a.txt" } } },
      ],
    });
    const { events, res } = await run(p, request(mock));
    const order = events.map((e) => (e.type === "text" ? "text" : e.id));
    if (o.toolEventsInContentOrder) expect(order).toEqual(["text", "text", "t1", "text", "text", "t2"]);
    else expect(order).toEqual(["text", "text", "text", "text", "t1", "t2"]);
    expect(res!.content).toEqual([
      { type: "text", text: "Look first." },
      { type: "tool_use", id: "t1", name: "Bash", input: { command: "ls" } },
      { type: "text", text: "Then read." },
      { type: "tool_use", id: "t2", name: "Read", input: { file_path: "a.txt" } },
    ]);
  });

  test("usage figures come from the stream", async () => {
    mock.enqueue({ text: "ok", usage: { input_tokens: 1234, output_tokens: 56 } });
    const { res } = await run(p, request(mock));
    expect(res!.usage).toEqual({ input_tokens: 1234, output_tokens: 56 });
  });

  test("500 is retried, then the success is returned once", async () => {
    mock.enqueue({ error: { status: 500, message: "Internal server error" } }, { error: { status: 503, message: "busy" } }, { text: ["ok"] });
    const { events, res } = await run(p, request(mock));
    expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    expect(events).toEqual([{ type: "text", text: "ok" }]);
    expect(mock.requests).toHaveLength(3);
  });

  test("500 forever: ModelError with the provider's message after bounded retries", async () => {
    mock.script(() => ({ error: { status: 500, message: "upstream exploded" } }));
    const { err } = await run(p, request(mock));
    expect(err).toBeInstanceOf(ModelError);
    const e = err as ModelError;
    expect(e.message).toBe("upstream exploded");
    expect([e.status, e.retryable, e.attempts, e.afterOutput]).toEqual([500, true, FAST_RETRIES.retries + 1, false]);
    expect(mock.requests).toHaveLength(FAST_RETRIES.retries + 1);
  });

  test("429 is retried", async () => {
    mock.enqueue({ error: { status: 429, message: "slow down" } }, { text: "ok" });
    const { res } = await run(p, request(mock));
    expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    expect(mock.requests).toHaveLength(2);
  });

  test("400 is not retried", async () => {
    mock.enqueue({ error: { status: 400, message: "max_tokens: too large" } }, { text: "never sent" });
    const { err } = await run(p, request(mock));
    expect(err).toBeInstanceOf(ModelError);
    expect([(err as ModelError).message, (err as ModelError).status, (err as ModelError).retryable, (err as ModelError).attempts]).toEqual(["max_tokens: too large", 400, false, 1]);
    expect(mock.requests).toHaveLength(1);
  });

  test("an error answer's body is read only to its first 64 KiB: a body that never ends fails at once, each retry too", async () => {
    let cancelled = 0;
    // 16 KiB every 5 ms, without end: read whole (as the SDKs do) it would never finish.
    const endless = () => {
      const chunk = new TextEncoder().encode("x".repeat(16 * 1024));
      return new ReadableStream<Uint8Array>({
        async pull(c) {
          await Bun.sleep(5);
          c.enqueue(chunk);
        },
        cancel: () => void cancelled++,
      });
    };
    mock.script(() => ({ raw: { status: 502, headers: { "content-type": "text/plain" }, body: endless } }));
    const { err, ms } = await run(p, request(mock));
    expect(err).toBeInstanceOf(ModelError);
    const e = err as ModelError;
    expect([e.status, e.retryable, e.attempts]).toEqual([502, true, FAST_RETRIES.retries + 1]);
    expect(e.message.length).toBeLessThanOrEqual(64 * 1024 + 10);
    expect(mock.requests).toHaveLength(FAST_RETRIES.retries + 1);
    expect(ms).toBeLessThan(10_000);
    await waitFor(() => cancelled === FAST_RETRIES.retries + 1, { what: "every endless body closed by the client" });
  });

  test("a JSON error body larger than 64 KiB still fails with its status (the cut JSON read as text), not retried", async () => {
    const big = JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "y".repeat(200_000) } });
    mock.enqueue({ raw: { status: 400, headers: { "content-type": "application/json" }, body: big } });
    const { err } = await run(p, request(mock));
    const e = err as ModelError;
    expect(e).toBeInstanceOf(ModelError);
    expect([e.status, e.retryable, e.attempts]).toEqual([400, false, 1]);
    expect(e.message.length).toBeLessThanOrEqual(64 * 1024 + 10);
  });

  test("a 200 that is not a stream (JSON from a server ignoring stream: true, an HTML login page) fails at once, not retried", async () => {
    for (const type of ["application/json", "text/html; charset=utf-8"]) {
      mock.reset();
      mock.script(() => ({ raw: { status: 200, headers: { "content-type": type }, body: type.startsWith("text/html") ? "<html><body>Sign in</body></html>" : '{"id":"x","content":[]}' } }));
      const { err } = await run(p, request(mock));
      expect(err).toBeInstanceOf(ModelError);
      const e = err as ModelError;
      expect(e.message).toBe(`The model server did not stream (content-type ${type})`);
      expect([e.retryable, e.attempts]).toEqual([false, 1]);
      expect(mock.requests).toHaveLength(1);
    }
  });

  test("the stream's content-type is read leniently (case, parameters); a missing one is read as a stream", async () => {
    // The mock's own answer, its content-type header changed on the way.
    const retyped = (type: string | null) =>
      (async (input: RequestInfo | URL, init?: RequestInit) => {
        const res = await fetch(input, init);
        const headers = new Headers(res.headers);
        if (type === null) headers.delete("content-type");
        else headers.set("content-type", type);
        return new Response(res.body, { status: res.status, headers });
      }) as typeof fetch;
    for (const type of ["Text/Event-Stream ; charset=UTF-8", null]) {
      mock.reset();
      mock.enqueue({ text: "ok" });
      const { res, err } = await run(p, request(mock, { fetch: retyped(type) }));
      expect(err).toBeUndefined();
      expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    }
  });

  test("401 (bad key) is not retried and names the problem", async () => {
    const { err } = await run(p, request(mock, { apiKey: "sk-wrong" }));
    expect(err).toBeInstanceOf(ModelError);
    expect([(err as ModelError).status, (err as ModelError).retryable]).toEqual([401, false]);
    expect(mock.requests).toHaveLength(1);
  });

  test("a key the server echoes in its error message is not in the ModelError (a gateway given the operator's key)", async () => {
    const key = "sk-operator-0123456789abcdef";
    // A server that repeats the key it was sent (either header) in its error, as some gateways do.
    const echo = (status: number) =>
      Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: (r) => {
          const sent = r.headers.get("x-api-key") ?? r.headers.get("authorization")?.replace(/^Bearer /, "");
          return Response.json({ type: "error", error: { type: "authentication_error", message: `Incorrect API key provided: ${sent}. Check ${sent} again.` } }, { status });
        },
      });
    for (const status of [401, 500]) {
      const server = echo(status);
      try {
        const { err } = await run(p, request(mock, { apiKey: key, baseUrl: `http://127.0.0.1:${server.port}/v1` }));
        expect(err).toBeInstanceOf(ModelError);
        expect([(err as ModelError).status, (err as ModelError).message]).toEqual([status, "Incorrect API key provided: [redacted key]. Check [redacted key] again."]);
      } finally {
        server.stop(true);
      }
    }
  });

  test("an in-stream error before any output is retried", async () => {
    mock.enqueue({ text: "x", failAfter: 0 }, { text: "recovered" });
    const { res } = await run(p, request(mock));
    expect(res!.content).toEqual([{ type: "text", text: "recovered" }]);
    expect(mock.requests).toHaveLength(2);
  });

  test("a failure after partial text is not retried (no duplicated text)", async () => {
    mock.enqueue({ text: ["partial ", "text ", "lost"], failAfter: 2 }, { text: "must not be requested" });
    const { events, err } = await run(p, request(mock));
    expect(events).toEqual([{ type: "text", text: "partial " }, { type: "text", text: "text " }]);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).message).toBe(o.streamErrorMessage);
    expect((err as ModelError).afterOutput).toBe(true);
    expect(mock.requests).toHaveLength(1);
  });

  test("a stream cut short is retried before output and fatal after it", async () => {
    mock.enqueue({ text: "a", dropAfter: 0 }, { text: "whole" });
    expect((await run(p, request(mock))).res!.content).toEqual([{ type: "text", text: "whole" }]);
    mock.reset();
    mock.enqueue({ text: ["one ", "two"], dropAfter: 1 }, { text: "never" });
    const { events, err } = await run(p, request(mock));
    expect(events).toHaveLength(1);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).afterOutput).toBe(true);
    expect(mock.requests).toHaveLength(1);
  });

  test("a failure after a complete tool call but before any text is retried: nothing was relayed", async () => {
    const calls = [
      { name: "Bash", input: { command: "echo one" } },
      { name: "Bash", input: { command: "echo two" } },
    ];
    // The first call's arguments stream in 3 pieces and its block closes; the stream fails in the second.
    mock.enqueue({ toolCalls: calls, failAfter: 4, failWith: { type: "overloaded_error", message: "busy" } }, { toolCalls: calls });
    const { events, err, res } = await run(p, request(mock));
    expect(err).toBeUndefined();
    expect(mock.requests).toHaveLength(2);
    expect(res!.content.filter((b) => b.type === "tool_use")).toHaveLength(2);
    // The first attempt's complete call was emitted, then the retry's two.
    expect(events.filter((e) => e.type === "tool_use").length).toBeGreaterThanOrEqual(2);
  });

  test("a connection reset mid-stream is a connection failure: retried before output, fatal after it, and said so", async () => {
    mock.enqueue({ text: "a", resetAfter: 0 }, { text: "whole" });
    expect((await run(p, request(mock))).res!.content).toEqual([{ type: "text", text: "whole" }]);
    expect(mock.requests).toHaveLength(2);
    mock.reset();
    mock.enqueue({ text: ["one ", "two"], resetAfter: 1 }, { text: "never" });
    const { events, err } = await run(p, request(mock));
    expect(events).toHaveLength(1);
    expect(err).toBeInstanceOf(ModelError);
    expect((err as ModelError).afterOutput).toBe(true);
    expect((err as ModelError).message).toContain("was lost while its answer streamed");
    // runcell's own words: logged with their detail (not the server's answer).
    expect((err as ModelError).fromServer).toBeFalsy();
    expect(mock.requests).toHaveLength(1);
  });

  test("abort mid-stream rejects promptly with the abort reason and closes the connection", async () => {
    mock.enqueue({ text: ["a ", "b ", "c"], hangAfter: 1 });
    const ctl = new AbortController();
    const events: StreamEvent[] = [];
    const pending = p.complete(request(mock, { signal: ctl.signal }), (e) => events.push(e));
    await waitFor(() => events.length === 1);
    const t0 = performance.now();
    ctl.abort();
    const err = await pending.catch((e) => e);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect((err as Error).name).toBe("AbortError");
    expect(err).not.toBeInstanceOf(ModelError);
    await waitFor(() => mock.disconnects === 1, { what: "the mock to see the client go away" });
  });

  test("abort during the retry wait stops at once, without another request", async () => {
    setRetryPolicy({ baseDelayMs: 30_000, maxDelayMs: 30_000 });
    try {
      mock.enqueue({ error: { status: 500, message: "down" } }, { text: "never" });
      const ctl = new AbortController();
      const pending = p.complete(request(mock, { signal: ctl.signal }), () => {});
      await mock.waitForRequests(1);
      await Bun.sleep(20);
      ctl.abort();
      const err = await pending.catch((e) => e);
      expect((err as Error).name).toBe("AbortError");
      expect(mock.requests).toHaveLength(1);
    } finally {
      setRetryPolicy(FAST_RETRIES);
    }
  });

  test("an unreachable server: connection failures retried, then ModelError naming the endpoint", async () => {
    const port = await freePort();
    const { err } = await run(p, request(mock, { baseUrl: `http://127.0.0.1:${port}${new URL(mock.url).pathname}` }));
    expect(err).toBeInstanceOf(ModelError);
    const e = err as ModelError;
    expect(e.message).toContain(`Cannot reach http://127.0.0.1:${port}`);
    expect([e.status, e.retryable, e.attempts]).toEqual([undefined, true, FAST_RETRIES.retries + 1]);
  });

  test("an exception thrown by onEvent is the caller's: rethrown as is, not retried", async () => {
    mock.enqueue({ text: "boom" }, { text: "never" });
    const mine = new Error("consumer failed");
    const err = await p.complete(request(mock), () => {
      throw mine;
    }).catch((e) => e);
    expect(err).toBe(mine);
    expect(mock.requests).toHaveLength(1);
  });

  return () => mock;
}
