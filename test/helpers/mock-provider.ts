/**
 * The engine shared by the model-provider mocks (mock-anthropic.ts, mock-openai.ts): a real HTTP
 * server on 127.0.0.1 (Bun.serve, port 0) that validates requests like the real API, records them,
 * and answers each one with the next scripted turn, streamed as SSE in the wire format the mock
 * file defines. The scripting types below are the ones tests use; see those files for the API.
 */

/** One request the server received (bodies are parsed JSON). */
export interface RecordedRequest {
  /** 0-based arrival order. */
  index: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
  /** performance.now() when it arrived. */
  receivedAt: number;
}

export interface MockToolCall {
  /** Default: toolu_mock_<request>_<n> (Anthropic) / call_mock_<request>_<n> (OpenAI). */
  id?: string;
  name: string;
  input: Record<string, unknown>;
  /** The input JSON is sent in this many fragments (default 3). */
  chunks?: number;
  /** Send these exact argument fragments instead of the JSON of `input` (e.g. invalid JSON). */
  rawArguments?: string[];
}

/** Text is split into `chunks` pieces (default: one piece per word), or sent as the exact pieces given. */
export type MockBlock = { text: string | string[]; chunks?: number } | { tool: MockToolCall };

/** A successful, streamed answer. */
export interface MockReply {
  /** Text streamed first. */
  text?: string | string[];
  chunks?: number;
  /** Tool calls after the text. */
  toolCalls?: MockToolCall[];
  /**
   * OpenAI only: a refusal (structured outputs, safety), streamed as `delta.refusal` pieces after
   * any text, split like `text`. (Anthropic's refusal is text with stopReason "refusal".)
   */
  refusal?: string | string[];
  /** Ordered content instead of text + toolCalls, for interleaving (text, tool, text, tool…). */
  blocks?: MockBlock[];
  /** Default: ≈ request chars / 4 and output chars / 4. null: no usage (OpenAI omits the usage chunk, Anthropic sends zeros). */
  usage?: { input_tokens: number; output_tokens: number } | null;
  /** Wire stop/finish reason; default tool_use|end_turn (Anthropic), tool_calls|stop (OpenAI). */
  stopReason?: string;
  /** Wait between content chunks. */
  delayMs?: number;
  /** Send this many content chunks, then stall until the client goes away (abort tests). */
  hangAfter?: number;
  /** Send this many content chunks, then an in-stream error event, then close. */
  failAfter?: number;
  failWith?: { type?: string; message?: string };
  /** Send this many content chunks, then close the stream without finishing it. */
  dropAfter?: number;
  /** Send this many content chunks, then reset the connection (the body errors: no clean end). */
  resetAfter?: number;
}

/** An HTTP error answered with the API's own error JSON. */
export interface MockHttpError {
  status: number;
  message: string;
  /** Default from the status (overloaded_error for 529, rate_limit_error for 429…). */
  type?: string;
  /** Sent as the Retry-After header (seconds, or an HTTP date). */
  retryAfter?: number | string;
  headers?: Record<string, string>;
}

/**
 * An answer sent exactly as given, whatever the API would say: a proxy's HTML page, JSON from a
 * server that ignores `stream: true`, an error body that never ends (a function making a fresh stream).
 */
export interface MockRawAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string | (() => ReadableStream<Uint8Array>);
}

export type MockTurn = MockReply | { error: MockHttpError } | { raw: MockRawAnswer };
/** Script mode: decide the answer from the request (e.g. react to the tool results it carries). */
export type MockScript = (req: RecordedRequest) => MockTurn | Promise<MockTurn>;

export interface ResponseTiming {
  request: number;
  /** performance.now() when the first / last SSE frame was handed to the socket. */
  firstFrameAt: number | null;
  lastFrameAt: number | null;
}

export interface MockProviderServer {
  /** Base URL for the SDK / profile `model.base_url`. */
  readonly url: string;
  readonly requests: RecordedRequest[];
  readonly timings: ResponseTiming[];
  /** Streams whose client went away before the end (aborts). */
  readonly disconnects: number;
  /** Adds turns to the queue; each request takes the next one. */
  enqueue(...turns: MockTurn[]): MockProviderServer;
  /** Answers requests once the queue is empty (null to remove). */
  script(fn: MockScript | null): MockProviderServer;
  /** Turns still queued. */
  pending(): number;
  /** Resolves once at least n requests have arrived. */
  waitForRequests(n: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Clears queue, script, records and counters. */
  reset(): void;
  stop(): Promise<void>;
}

export interface MockOptions {
  /** When set, requests without this key get the API's 401. */
  apiKey?: string;
}

/** A block ready to encode: text pieces or a tool call with its argument fragments. */
export type WireBlock = { kind: "text"; pieces: string[] } | { kind: "tool"; id: string; name: string; pieces: string[] };
export interface WireReply {
  blocks: WireBlock[];
  /** The refusal's pieces (OpenAI's delta.refusal). */
  refusal?: string[];
  usage: { input_tokens: number; output_tokens: number } | null;
  stopReason?: string;
}
/** An SSE frame; `content` frames are the ones counted by hangAfter / failAfter / dropAfter and paced by delayMs. */
export interface Frame {
  data: string;
  content: boolean;
}

/** What a mock file supplies: its endpoint, request validation, error JSON and SSE encoding. */
export interface WireFormat {
  name: string;
  /** Appended to the server's origin to make `url` (the SDK's base URL). */
  basePath: string;
  toolIdPrefix: string;
  endpoint(path: string): boolean;
  /** The error the real API would answer for this request, or null. */
  validate(body: any, headers: Headers, opts: MockOptions): MockHttpError | null;
  errorBody(err: MockHttpError, requestIndex: number): { type: string; body: unknown; headers?: Record<string, string> };
  frames(reply: WireReply, req: RecordedRequest): Frame[];
  streamError(e: { type?: string; message?: string }): string;
}

/** Splits text into n pieces of about equal length (n omitted: one piece per word). */
export function splitText(text: string, n?: number): string[] {
  if (!n) return text.match(/\S+\s*|\s+/g) ?? [];
  const size = Math.max(1, Math.ceil(text.length / n));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function toWire(reply: MockReply, req: RecordedRequest, prefix: string): WireReply {
  const src: MockBlock[] = reply.blocks ?? [
    ...(reply.text !== undefined ? [{ text: reply.text, chunks: reply.chunks }] : []),
    ...(reply.toolCalls ?? []).map((tool) => ({ tool })),
  ];
  let toolN = 0;
  const blocks: WireBlock[] = src.map((b) => {
    if ("text" in b) return { kind: "text", pieces: Array.isArray(b.text) ? b.text : splitText(b.text, b.chunks) };
    const t = b.tool;
    const id = t.id ?? `${prefix}${req.index}_${toolN++}`;
    return { kind: "tool", id, name: t.name, pieces: t.rawArguments ?? splitText(JSON.stringify(t.input), t.chunks ?? 3) };
  });
  const refusal = reply.refusal === undefined ? undefined : Array.isArray(reply.refusal) ? reply.refusal : splitText(reply.refusal, reply.chunks);
  const outChars = blocks.reduce((n, b) => n + b.pieces.join("").length, 0) + (refusal?.join("").length ?? 0);
  const usage = reply.usage === null ? null : (reply.usage ?? { input_tokens: Math.ceil(JSON.stringify(req.body).length / 4), output_tokens: Math.ceil(outChars / 4) });
  return { blocks, usage, stopReason: reply.stopReason, ...(refusal ? { refusal } : {}) };
}

export function startMockServer(format: WireFormat, opts: MockOptions = {}): MockProviderServer {
  const enc = new TextEncoder();
  let queue: MockTurn[] = [];
  let scriptFn: MockScript | null = null;
  const requests: RecordedRequest[] = [];
  const timings: ResponseTiming[] = [];
  const open = new Set<() => void>();
  let disconnects = 0;

  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
  const httpError = (err: MockHttpError, index: number) => {
    const e = format.errorBody(err, index);
    const headers: Record<string, string> = { ...e.headers, ...err.headers };
    if (err.retryAfter !== undefined) headers["retry-after"] = String(err.retryAfter);
    return json(err.status, e.body, headers);
  };

  function stream(reply: MockReply, rec: RecordedRequest, signal: AbortSignal): Response {
    const frames = format.frames(toWire(reply, rec, format.toolIdPrefix), rec);
    const timing: ResponseTiming = { request: rec.index, firstFrameAt: null, lastFrameAt: null };
    timings.push(timing);
    let gone = false;
    let wake: () => void = () => {};
    const goneP = new Promise<void>((r) => (wake = r));
    const onGone = () => {
      if (gone) return;
      gone = true;
      disconnects++;
      wake();
    };
    signal.addEventListener("abort", onGone, { once: true });
    open.add(onGone);
    const limit = Math.min(reply.hangAfter ?? Infinity, reply.failAfter ?? Infinity, reply.dropAfter ?? Infinity, reply.resetAfter ?? Infinity);
    const RESET = "\u0000reset";
    async function* gen(): AsyncGenerator<string> {
      let content = 0;
      for (const f of frames) {
        if (f.content) {
          if (content >= limit) break;
          if (content > 0 && reply.delayMs) await Promise.race([Bun.sleep(reply.delayMs), goneP]);
          if (gone) return;
          content++;
        }
        yield f.data;
      }
      if (content >= limit && limit === reply.hangAfter) {
        await goneP;
        return;
      }
      if (content >= limit && limit === reply.failAfter) yield format.streamError(reply.failWith ?? {});
      if (content >= limit && limit === reply.resetAfter) yield RESET;
    }
    const it = gen();
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        const { value, done } = await it.next();
        if (value === RESET) {
          // Let what was sent reach the client first; then the connection goes without an end.
          await Bun.sleep(50);
          open.delete(onGone);
          signal.removeEventListener("abort", onGone);
          c.error(new Error("connection reset by the mock"));
          return;
        }
        if (done || gone) {
          open.delete(onGone);
          signal.removeEventListener("abort", onGone);
          if (!gone) c.close();
          return;
        }
        const now = performance.now();
        timing.firstFrameAt ??= now;
        timing.lastFrameAt = now;
        c.enqueue(enc.encode(value));
      },
      cancel() {
        onGone();
        open.delete(onGone);
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } });
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (req.method !== "POST" || !format.endpoint(url.pathname)) {
        return httpError({ status: 404, message: `${format.name}: no route ${req.method} ${url.pathname}` }, -1);
      }
      let body: any = null;
      try {
        body = await req.json();
      } catch {
        return httpError({ status: 400, message: "The request body is not valid JSON" }, -1);
      }
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      const rec: RecordedRequest = {
        index: requests.length,
        method: req.method,
        path: url.pathname,
        headers,
        body,
        receivedAt: performance.now(),
      };
      requests.push(rec);
      const invalid = format.validate(body, req.headers, opts);
      if (invalid) return httpError(invalid, rec.index);
      const turn = queue.length ? queue.shift()! : scriptFn ? await scriptFn(rec) : null;
      if (!turn) return httpError({ status: 400, type: "invalid_request_error", message: `${format.name}: no scripted turn left for request #${rec.index}` }, rec.index);
      if ("error" in turn) return httpError(turn.error, rec.index);
      if ("raw" in turn) return new Response(typeof turn.raw.body === "function" ? turn.raw.body() : (turn.raw.body ?? null), { status: turn.raw.status, headers: turn.raw.headers });
      return stream(turn, rec, req.signal);
    },
  });

  const self: MockProviderServer = {
    url: `http://127.0.0.1:${server.port}${format.basePath}`,
    requests,
    timings,
    get disconnects() {
      return disconnects;
    },
    enqueue(...turns) {
      queue.push(...turns);
      return self;
    },
    script(fn) {
      scriptFn = fn;
      return self;
    },
    pending: () => queue.length,
    async waitForRequests(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`${format.name}: expected ${n} requests, got ${requests.length}`);
        await Bun.sleep(5);
      }
      return requests.slice(0, n);
    },
    reset() {
      queue = [];
      scriptFn = null;
      requests.length = 0;
      timings.length = 0;
      disconnects = 0;
    },
    async stop() {
      for (const wakeOne of [...open]) wakeOne();
      await server.stop(true);
    },
  };
  return self;
}
