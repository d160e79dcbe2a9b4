/**
 * Anthropic Messages API through the official SDK: streaming (`stream: true`), tool use. Text
 * deltas are emitted as they arrive; a tool call is emitted once complete (content_block_stop),
 * its input being the accumulated input_json_delta fragments (or, with none, the input its
 * content_block_start carried). Usage comes from message_start
 * (input: its own, cache creation and cache reads) and message_delta (output, cumulative; an
 * input figure it restates replaces that one field only). `base_url` may point at any server speaking
 * the Messages API (a proxy, a gateway).
 */
// Loaded on first use: the SDK costs tens of milliseconds of start-up for a server that may never call it.
type Sdk = typeof import("@anthropic-ai/sdk");
let sdk: Sdk | null = null;
const load = (): Sdk => (sdk ??= require("@anthropic-ai/sdk") as Sdk);
import type { ContentBlockParam, MessageCreateParamsStreaming, MessageParam, RawMessageStreamEvent } from "@anthropic-ai/sdk/resources/messages/messages";
import { abortError, answerLimit, ModelError, withoutKey } from "./model-error.ts";
import { assertEventStream } from "./model-answer.ts";
import { parseRetryAfter, retryableStatus, transientType, withRetries } from "./retry.ts";
import { bodyMessage, ClientCache, connectionMessage, droppedError, dropEnvHeaders, describeEndpoint, parseToolArguments, resolveApiKey } from "./sdk-support.ts";
import { readServerSentEvents } from "./sse.ts";
import { withDeferred, withStreamedArrays } from "./streamed-body.ts";
import { TokenCounts } from "./token-count.ts";
import type { ChatMessage, ContentBlock, ModelRequest, ModelResponse, Provider, StopReason, StreamEvent } from "./types.ts";

// The SDK sends the key as `Authorization: Bearer`; gateways behind a custom base_url may only know
// the classic `x-api-key`, so those get both — and never the operator's ANTHROPIC_CUSTOM_HEADERS.
// Passing apiKey explicitly keeps the SDK from reading ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN.
const clients = new ClientCache(
  (baseURL, apiKey, fetchImpl) =>
    new (load().default)({
      apiKey,
      baseURL,
      maxRetries: 0,
      // The conversation is streamed into the request body rather than made one string (streamed-body.ts).
      fetch: withStreamedArrays(fetchImpl ?? ((input, init) => fetch(input, init))),
      ...(baseURL ? { defaultHeaders: { ...dropEnvHeaders("ANTHROPIC_CUSTOM_HEADERS"), "x-api-key": apiKey } } : {}),
    }),
);

/**
 * Our conversation as Messages API params. Text blocks of only whitespace (or none) are left out:
 * the API rejects them ("text content blocks must contain non-whitespace text"), and a model may
 * answer "\n\n" before a tool call, or whitespace alone — stored as it came, such a block would
 * fail every later request of the session. A message left with no content is left out like an
 * empty answer (transcript.ts), the user turns around it merged into one.
 */
/**
 * The transcript in Anthropic's message shape. `toolsAsText`: the request declares no tools (the
 * profile's were all turned off after some ran) — Anthropic refuses tool_use and tool_result
 * blocks in a request without tools, so the earlier calls and their results go as text the model
 * can still read.
 */
export function toAnthropicMessages(messages: ChatMessage[], toolsAsText = false): MessageParam[] {
  const out: { role: ChatMessage["role"]; content: ContentBlockParam[] }[] = [];
  for (const m of messages) {
    const content = m.content
      .filter((b) => b.type !== "text" || b.text.trim() !== "")
      .map((b): ContentBlockParam => {
        if (b.type === "text") return { type: "text" as const, text: b.text };
        if (b.type === "tool_use") {
          if (toolsAsText) return { type: "text" as const, text: `[Called the tool ${b.name} (call ${b.id}) with ${JSON.stringify(b.input)}]` };
          return { type: "tool_use" as const, id: b.id, name: b.name, input: b.input };
        }
        if (toolsAsText) return { type: "text" as const, text: `[Result of call ${b.tool_use_id}${b.is_error ? " (an error)" : ""}: ${b.content}]` };
        return {
          type: "tool_result" as const,
          tool_use_id: b.tool_use_id,
          ...(b.content !== "" ? { content: b.content } : {}),
          ...(b.is_error ? { is_error: true } : {}),
        };
      });
    if (content.length === 0) continue;
    const prev = out[out.length - 1];
    if (prev?.role === m.role) prev.content.push(...content);
    else out.push({ role: m.role, content });
  }
  return out;
}

export function anthropicParams(req: ModelRequest): MessageCreateParamsStreaming {
  return {
    model: req.model,
    max_tokens: req.maxTokens,
    ...(req.system ? { system: req.system } : {}),
    messages: toAnthropicMessages(req.messages, req.tools.length === 0),
    ...(req.tools.length
      ? { tools: req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema as { type: "object" } })) }
      : {}),
    stream: true,
  };
}

const STOP: Record<string, StopReason> = { end_turn: "end_turn", tool_use: "tool_use", max_tokens: "max_tokens", stop_sequence: "stop_sequence", refusal: "refusal" };

/** An `error` event inside a 200 stream, as the SDK's APIError (no status; its type says what it is). */
function streamError(data: string, headers: Headers): Error {
  let body: { error?: { type?: string } } | string = data;
  try {
    body = JSON.parse(data);
  } catch {
    // kept as text
  }
  const type = typeof body === "object" ? body?.error?.type : undefined;
  return new (load().APIError)(undefined, body as object, undefined, headers, type as never);
}

/** Whatever the SDK threw, as a ModelError carrying Anthropic's own message. */
export function anthropicError(e: unknown, baseUrl?: string | null): ModelError {
  if (e instanceof ModelError) return e;
  const APIConnectionError = sdk?.APIConnectionError;
  const APIError = sdk?.APIError;
  if (APIConnectionError && e instanceof APIConnectionError) {
    return new ModelError(connectionMessage(describeEndpoint(baseUrl ?? undefined, "api.anthropic.com"), e), { provider: "anthropic", retryable: true });
  }
  if (APIError && e instanceof APIError) {
    const msg = e.apiMessage ?? bodyMessage(e.error) ?? e.message;
    const type = e.type ?? undefined;
    // An error event inside a 200 stream has no status: its type says whether it is transient.
    const retryable = e.status !== undefined ? retryableStatus(e.status) || transientType(type) : transientType(type) || type === undefined;
    return new ModelError(msg, { provider: "anthropic", status: e.status, type, retryable, retryAfterMs: parseRetryAfter(e.headers), fromServer: true });
  }
  const err = e instanceof Error ? e : new Error(String(e));
  const dropped = droppedError(err, "anthropic", describeEndpoint(baseUrl ?? undefined, "api.anthropic.com"));
  if (dropped) return dropped;
  return new ModelError(`Invalid response from Anthropic: ${err.message}`, { provider: "anthropic", retryable: false, fromServer: true });
}

const DELTA_HEAD = '{"type":"content_block_delta","index":';
const DELTA_TEXT = ',"delta":{"type":"text_delta","text":"';
const DELTA_TAIL = '"}}';

/**
 * A text delta as the Messages API sends it, read without JSON.parse: most of a streamed answer's
 * events are these, and parsing each one made an event, a delta and their strings only to take
 * the text out (bench/memory.ts). Only the exact shape is read here — these keys in this order,
 * a text without a double quote (so the literal cannot end early); anything else is parsed in
 * full. The text is read by JSON.parse of its literal alone (escapes decoded, a string of its own).
 */
export function textDeltaOf(data: string): RawMessageStreamEvent | null {
  if (!data.startsWith(DELTA_HEAD) || !data.endsWith(DELTA_TAIL)) return null;
  const at = data.indexOf(DELTA_TEXT, DELTA_HEAD.length);
  if (at < 0) return null;
  const digits = data.slice(DELTA_HEAD.length, at);
  if (!/^\d{1,9}$/.test(digits)) return null;
  const body = data.slice(at + DELTA_TEXT.length, data.length - DELTA_TAIL.length);
  if (body.includes('"')) return null;
  // Parsed as a literal even without an escape: a slice would share the whole read it came from,
  // and the answer accumulated from such slices kept every read of it alive (a 2 MiB answer held
  // ~5 MiB of reads; bench/memory.ts part 2 peaked at 5.7x instead of 3.9x). The parse makes a
  // string of its own (and refuses raw control characters, as the full parse would).
  const text = JSON.parse(`"${body}"`) as string;
  return { type: "content_block_delta", index: Number(digits), delta: { type: "text_delta", text } };
}

/** `input`: what content_block_start carried, the input when no input_json_delta follows (toolInput). */
type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown; json: string; done: boolean };

/**
 * A tool call's input: its input_json_delta fragments, or — when none came — the input its
 * content_block_start carried. The API sends `{}` there and the input in deltas; some gateways send
 * the whole input at the start and no delta (the SDK's own stream builder reads it from there too).
 */
function toolInput(b: Extract<Block, { type: "tool_use" }>): Record<string, unknown> {
  if (b.json === "" && b.input && typeof b.input === "object" && !Array.isArray(b.input)) return b.input as Record<string, unknown>;
  return parseToolArguments(b.json);
}

export class AnthropicProvider implements Provider {
  readonly name = "anthropic" as const;

  complete(req: ModelRequest, onEvent: (e: StreamEvent) => void): Promise<ModelResponse> {
    const counts = new TokenCounts("anthropic", req.log);
    return withRetries(req.signal, onEvent, (emit) => this.attempt(req, emit, counts), (e) => anthropicError(e, req.baseUrl)).catch((e) => {
      throw withoutKey(e, req.apiKey, "ANTHROPIC_API_KEY");
    });
  }

  private async attempt(req: ModelRequest, emit: (e: StreamEvent) => void, counts: TokenCounts): Promise<ModelResponse> {
    const baseUrl = req.baseUrl || undefined;
    const client = clients.get(baseUrl, resolveApiKey("anthropic", "ANTHROPIC_API_KEY", req.apiKey, baseUrl), req.fetch);
    const params = anthropicParams(req);
    // The SDK sends the request and turns an error status into its APIError; the events are read
    // here (sse.ts), not through the SDK's stream iterator, whose per-event garbage is the largest
    // part of the server's memory peak with many streams at once.
    const response = await withDeferred(params.messages, (messages) =>
      client.messages.create({ ...params, messages: messages as typeof params.messages }, { signal: req.signal }).asResponse(),
    );
    assertEventStream(response, "anthropic");
    if (!response.body) throw new ModelError("The Anthropic response had no body", { provider: "anthropic", retryable: true });
    const blocks: Block[] = [];
    const meter = req.meter;
    meter?.begin();
    // The input's three parts, as message_start reported them and message_delta may restate them.
    const inputs = { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    let input = 0;
    let output = 0;
    /**
     * Takes the input figures `u` gives: a field null or absent keeps what was reported before
     * (message_delta often restates input_tokens alone, and must not drop message_start's cache tokens);
     * so does a field that is not a count (token-count.ts).
     */
    const inputFrom = (u: Partial<Record<keyof typeof inputs, unknown>>) => {
      for (const k of Object.keys(inputs) as (keyof typeof inputs)[]) {
        const n = counts.read(u[k], k);
        if (n != null) inputs[k] = n;
      }
      return inputs.input_tokens + inputs.cache_creation_input_tokens + inputs.cache_read_input_tokens;
    };
    let stop: string | null = null;
    let finished = false;
    const handle = (ev: RawMessageStreamEvent) => {
      switch (ev.type) {
        case "message_start": {
          const u = ev.message.usage;
          input = inputFrom(u);
          output = counts.read(u.output_tokens, "output_tokens") ?? 0;
          meter?.reported(input, output);
          break;
        }
        case "content_block_start": {
          const cb = ev.content_block;
          if (cb.type === "text") {
            blocks[ev.index] = { type: "text", text: cb.text };
            meter?.received(cb.text.length);
            if (cb.text) emit({ type: "text", text: cb.text });
          } else if (cb.type === "tool_use") {
            blocks[ev.index] = { type: "tool_use", id: cb.id, name: cb.name, input: cb.input, json: "", done: false };
          }
          break;
        }
        case "content_block_delta": {
          const b = blocks[ev.index];
          if (ev.delta.type === "text_delta" && b?.type === "text") {
            b.text += ev.delta.text;
            meter?.received(ev.delta.text.length);
            if (ev.delta.text) emit({ type: "text", text: ev.delta.text });
          } else if (ev.delta.type === "input_json_delta" && b?.type === "tool_use") {
            b.json += ev.delta.partial_json;
            meter?.received(ev.delta.partial_json.length);
          }
          break;
        }
        case "content_block_stop": {
          const b = blocks[ev.index];
          if (b?.type === "tool_use" && !b.done) {
            b.done = true;
            emit({ type: "tool_use", id: b.id, name: b.name, input: toolInput(b) });
          }
          break;
        }
        case "message_delta": {
          stop = ev.delta.stop_reason ?? stop;
          const u = ev.usage;
          const out = counts.read(u.output_tokens, "output_tokens");
          if (out != null) output = out;
          input = inputFrom(u);
          // Its output count is the message's (cumulative): no estimate from here on.
          meter?.reported(input, output, out != null);
          break;
        }
        case "message_stop":
          finished = true;
          break;
      }
    };
    try {
      await readServerSentEvents(response.body, (event, data) => {
        // As the SDK's own stream: pings and unnamed events skipped, an error event thrown as its APIError.
        if (event === null || event === "ping") return;
        if (event === "error") throw streamError(data, response.headers);
        if (!data) return;
        const delta = textDeltaOf(data);
        handle(delta ?? (JSON.parse(data) as RawMessageStreamEvent));
      }, answerLimit("anthropic"));
    } catch (e) {
      if (!req.signal?.aborted) throw e;
    }
    if (req.signal?.aborted) throw abortError(req.signal);
    if (!finished) throw new ModelError("The Anthropic stream ended before message_stop", { provider: "anthropic", retryable: true });
    const content: ContentBlock[] = [];
    for (const b of blocks) {
      if (!b) continue;
      if (b.type === "text") {
        if (b.text) content.push({ type: "text", text: b.text });
      } else content.push({ type: "tool_use", id: b.id, name: b.name, input: toolInput(b) });
    }
    return { content, stopReason: (stop && Object.hasOwn(STOP, stop) && STOP[stop]) || "other", usage: { input_tokens: input, output_tokens: output } };
  }
}
