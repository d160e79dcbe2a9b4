/**
 * OpenAI Chat Completions through the official SDK, streaming, with tools as `type:"function"`.
 * Written for every compatible server (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter): it sends only
 * widely supported fields, tolerates a missing usage chunk (counts 0), missing tool-call indexes or
 * ids (an id repeated within a message is replaced too), "stop" as the finish reason of a tool
 * call, and arguments that are not valid JSON. A refusal's `delta.refusal` text is read as the
 * answer's text (stop reason `refusal`), in a text block marked `refusal` that later requests send
 * back as the assistant message's `refusal` field.
 */
import { randomUUID } from "node:crypto";
// Loaded on first use: the SDK costs tens of milliseconds of start-up for a server that may never call it.
type Sdk = typeof import("openai");
let sdk: Sdk | null = null;
const load = (): Sdk => (sdk ??= require("openai") as Sdk);
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { abortError, answerLimit, ModelError, withoutKey } from "./model-error.ts";
import { assertEventStream } from "./model-answer.ts";
import { parseRetryAfter, retryableStatus, transientType, withRetries } from "./retry.ts";
import { bodyMessage, ClientCache, connectionMessage, droppedError, dropEnvHeaders, describeEndpoint, parseToolArguments, resolveApiKey } from "./sdk-support.ts";
import { readServerSentEvents } from "./sse.ts";
import { withDeferred, withStreamedArrays } from "./streamed-body.ts";
import { TokenCounts } from "./token-count.ts";
import { CHARS_PER_TOKEN, type Usage } from "./usage-meter.ts";
import type { ChatMessage, ContentBlock, ModelRequest, ModelResponse, Provider, StopReason, StreamEvent } from "./types.ts";

/**
 * Only the request's key is sent. The SDK would otherwise pick up from the server's environment
 * OPENAI_ADMIN_KEY (an admin-endpoint credential; pinned to null), OPENAI_ORG_ID / OPENAI_PROJECT_ID
 * (they belong with the operator's own key, and only on OpenAI's endpoint) and
 * OPENAI_CUSTOM_HEADERS (kept for the operator's endpoint, dropped for a profile's base_url).
 */
const clients = new ClientCache(
  (baseURL, apiKey, fetchImpl) =>
    new (load().default)({
      apiKey,
      baseURL,
      maxRetries: 0,
      // The conversation is streamed into the request body rather than made one string (streamed-body.ts).
      fetch: withStreamedArrays(fetchImpl ?? ((input, init) => fetch(input, init))),
      adminAPIKey: null,
      ...(baseURL || apiKey !== process.env.OPENAI_API_KEY ? { organization: null, project: null } : {}),
      ...(baseURL ? { defaultHeaders: dropEnvHeaders("OPENAI_CUSTOM_HEADERS") } : {}),
    }),
);

/** How a failed tool result is marked for the model (Chat Completions has no is_error flag). */
export const TOOL_ERROR_PREFIX = "Error: ";

type TextBlock = Extract<ContentBlock, { type: "text" }>;

/** The text of the blocks, the refusal's (`refusal: true`) or the rest. */
const joinText = (blocks: ContentBlock[], refusal = false) =>
  blocks
    .filter((b): b is TextBlock => b.type === "text" && b.text !== "" && (b.refusal === true) === refusal)
    .map((b) => b.text)
    .join("\n\n");

/**
 * Our conversation as Chat Completions messages: the system message first; assistant tool calls
 * as `tool_calls`; a refusal's text in the assistant message's `refusal` field, where the model
 * gave it (as content it would read as an ordinary answer); each tool result as a `role:"tool"`
 * message right after them (failed ones prefixed with TOOL_ERROR_PREFIX); any user text of the
 * same message after the tool messages.
 */
export function toOpenAIMessages(system: string, messages: ChatMessage[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (system) out.push({ role: "system", content: system });
  for (const m of messages) {
    if (m.role === "assistant") {
      const calls = m.content.filter((b): b is Extract<ContentBlock, { type: "tool_use" }> => b.type === "tool_use");
      const text = joinText(m.content);
      const refusal = joinText(m.content, true);
      out.push({
        role: "assistant",
        content: text || (calls.length ? null : ""),
        ...(refusal ? { refusal } : {}),
        ...(calls.length
          ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: JSON.stringify(c.input) } })) }
          : {}),
      });
      continue;
    }
    for (const b of m.content) {
      if (b.type === "tool_result") out.push({ role: "tool", tool_call_id: b.tool_use_id, content: b.is_error ? TOOL_ERROR_PREFIX + b.content : b.content });
    }
    const text = joinText(m.content);
    if (text || !m.content.some((b) => b.type === "tool_result")) out.push({ role: "user", content: text });
  }
  return out;
}

/**
 * OpenAI's own API wants `max_completion_tokens` (its reasoning models reject `max_tokens`);
 * compatible servers know `max_tokens`, and not all of them the newer name.
 */
export function usesMaxCompletionTokens(baseUrl: string | null | undefined): boolean {
  if (!baseUrl) return true;
  try {
    return new URL(baseUrl).hostname === "api.openai.com";
  } catch {
    return false;
  }
}

export function openaiParams(req: ModelRequest): ChatCompletionCreateParamsStreaming {
  return {
    model: req.model,
    messages: toOpenAIMessages(req.system, req.messages),
    ...(usesMaxCompletionTokens(req.baseUrl) ? { max_completion_tokens: req.maxTokens } : { max_tokens: req.maxTokens }),
    ...(req.tools.length
      ? { tools: req.tools.map((t) => ({ type: "function" as const, function: { name: t.name, description: t.description, parameters: t.input_schema } })) }
      : {}),
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** Whatever the SDK threw, as a ModelError carrying the server's own message. */
export function openaiError(e: unknown, baseUrl?: string | null): ModelError {
  if (e instanceof ModelError) return e;
  const APIConnectionError = sdk?.APIConnectionError;
  const APIError = sdk?.APIError;
  if (APIConnectionError && e instanceof APIConnectionError) {
    return new ModelError(connectionMessage(describeEndpoint(baseUrl ?? undefined, "api.openai.com"), e), { provider: "openai", retryable: true });
  }
  if (APIError && e instanceof APIError) {
    const msg = bodyMessage(e.error) ?? e.message;
    const type = e.type ?? (typeof e.code === "string" ? e.code : undefined);
    // In-stream errors have no HTTP status; some servers (vLLM) put one in `code`.
    const inner = e.error as { code?: unknown } | undefined;
    const status = e.status ?? (typeof inner?.code === "number" ? inner.code : undefined);
    const retryable = status !== undefined ? retryableStatus(status) || transientType(type) : transientType(type) || type === undefined;
    return new ModelError(msg, { provider: "openai", status, type, retryable, retryAfterMs: parseRetryAfter(e.headers), fromServer: true });
  }
  const err = e instanceof Error ? e : new Error(String(e));
  const dropped = droppedError(err, "openai", describeEndpoint(baseUrl ?? undefined, "api.openai.com"));
  if (dropped) return dropped;
  return new ModelError(`Invalid response from the model server: ${err.message}`, { provider: "openai", retryable: false, fromServer: true });
}

function stopReason(finish: string, hasToolCalls: boolean, refused: boolean): StopReason {
  if (hasToolCalls && (finish === "tool_calls" || finish === "function_call" || finish === "stop")) return "tool_use";
  // A refusal finishes with "stop" (or "content_filter"): its `refusal` deltas say what it is.
  if (refused) return "refusal";
  if (finish === "stop") return "end_turn";
  if (finish === "length") return "max_tokens";
  if (finish === "content_filter") return "refusal";
  return "other";
}

interface Slot {
  id: string;
  name: string;
  args: string;
}
type Part = { kind: "text" | "refusal"; text: string } | { kind: "tool"; slot: Slot };

export class OpenAIProvider implements Provider {
  readonly name = "openai" as const;

  complete(req: ModelRequest, onEvent: (e: StreamEvent) => void): Promise<ModelResponse> {
    const counts = new TokenCounts("openai", req.log);
    return withRetries(req.signal, onEvent, (emit) => this.attempt(req, emit, counts), (e) => openaiError(e, req.baseUrl)).catch((e) => {
      throw withoutKey(e, req.apiKey, "OPENAI_API_KEY");
    });
  }

  private async attempt(req: ModelRequest, emit: (e: StreamEvent) => void, counts: TokenCounts): Promise<ModelResponse> {
    const baseUrl = req.baseUrl || undefined;
    const client = clients.get(baseUrl, resolveApiKey("openai", "OPENAI_API_KEY", req.apiKey, baseUrl), req.fetch);
    const params = openaiParams(req);
    // The SDK sends the request and turns an error status into its APIError; the chunks are read
    // here (sse.ts), not through the SDK's stream iterator (its per-event garbage: see sse.ts).
    const response = await withDeferred(params.messages, (messages) =>
      client.chat.completions.create({ ...params, messages: messages as typeof params.messages }, { signal: req.signal }).asResponse(),
    );
    assertEventStream(response, "openai");
    if (!response.body) throw new ModelError("The model server's response had no body", { provider: "openai", retryable: true });
    const parts: Part[] = [];
    const slots = new Map<number | string, Slot>();
    let lastKey: number | string | undefined;
    let synthetic = 0;
    let finish: string | null = null;
    let refused = false;
    let toolsEmitted = false;
    let usage = { input_tokens: 0, output_tokens: 0 };
    let usageSeen = false;
    // The usage chunk comes last (stream_options.include_usage): a stream cut before it has
    // reported no input tokens, and its output is estimated from what arrived (usage-meter.ts).
    const meter = req.meter;
    meter?.begin();
    // Its input is reported only at the end: a stream cut before that is charged an estimate.
    meter?.estimateInput(() => estimatedInputTokens(params));

    const emitTools = () => {
      if (toolsEmitted) return;
      toolsEmitted = true;
      // A call without an id, or with one an earlier call of this message has, gets an id of its
      // own: results are matched to their call by id (the transcript, the role:"tool" messages),
      // so two calls sharing one would both be answered with the same result.
      const seen = new Set<string>();
      for (const p of parts) {
        if (p.kind !== "tool") continue;
        if (!p.slot.id || seen.has(p.slot.id)) p.slot.id = `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;
        seen.add(p.slot.id);
        emit({ type: "tool_use", id: p.slot.id, name: p.slot.name, input: parseToolArguments(p.slot.args) });
      }
    };

    const addText = (text: string | null | undefined, kind: "text" | "refusal" = "text") => {
      if (typeof text !== "string" || text === "") return;
      const last = parts[parts.length - 1];
      if (last?.kind === kind) last.text += text;
      else parts.push({ kind, text });
      meter?.received(text.length);
      emit({ type: "text", text });
    };

    const handle = (chunk: ChatCompletionChunk) => {
      if (chunk.usage) {
        // A figure that is not a count (token-count.ts) is absent: 0, as with no usage chunk at all.
        const input = counts.read(chunk.usage.prompt_tokens, "prompt_tokens");
        const output = counts.read(chunk.usage.completion_tokens, "completion_tokens");
        usage = { input_tokens: input ?? 0, output_tokens: output ?? 0 };
        usageSeen = true;
        meter?.reported(usage.input_tokens, usage.output_tokens, output != null);
      }
      const choice = chunk.choices?.[0];
      if (!choice) return;
      const delta = choice.delta ?? {};
      addText(delta.content);
      // A refusal (structured outputs, safety) comes as `refusal` deltas instead of `content`, and
      // ends with finish_reason "stop": it is the answer the user sees, marked as a refusal (its
      // block too: sent back as the message's `refusal`, toOpenAIMessages).
      if (typeof delta.refusal === "string" && delta.refusal !== "") {
        refused = true;
        addText(delta.refusal, "refusal");
      }
      (delta.tool_calls ?? []).forEach((tc, i) => {
        // Servers that omit `index` send each call whole, or continue the last one.
        const key: number | string =
          typeof tc.index === "number" ? tc.index : tc.id ? `id:${tc.id}` : i === 0 && lastKey !== undefined ? lastKey : `n:${synthetic++}`;
        lastKey = key;
        let slot = slots.get(key);
        // A new id at an index already taken starts another call: servers that number every call
        // of a turn 0 (Ollama, some gateways) tell their parallel calls apart by id alone.
        if (slot && tc.id && slot.id && tc.id !== slot.id) slot = undefined;
        if (!slot) {
          slot = { id: "", name: "", args: "" };
          slots.set(key, slot);
          parts.push({ kind: "tool", slot });
        }
        if (tc.id && !slot.id) slot.id = tc.id;
        if (tc.function?.name && !slot.name) slot.name = tc.function.name;
        if (tc.function?.arguments) {
          slot.args += tc.function.arguments;
          meter?.received(tc.function.arguments.length);
        }
      });
      if (choice.finish_reason) {
        finish = choice.finish_reason;
        emitTools();
      }
    };
    try {
      await readServerSentEvents(response.body, (event, data) => {
        // As the SDK's own stream: [DONE] ends it, every other event is JSON, and an error event or
        // a chunk carrying `error` is thrown as its APIError.
        if (data === "[DONE]") return false;
        let chunk: ChatCompletionChunk & { error?: unknown };
        try {
          chunk = JSON.parse(data);
        } catch {
          throw new SyntaxError("Error reading response: malformed server-sent event JSON.");
        }
        if (event === "error") throw new (load().APIError)(undefined, ((chunk as { error?: object }).error ?? chunk) as object, undefined, response.headers);
        if (chunk?.error) throw new (load().APIError)(undefined, chunk.error as object, undefined, response.headers);
        // vLLM's error object, sent as a chunk of its own: its message is the failure.
        if ((chunk as { object?: unknown })?.object === "error") throw new (load().APIError)(undefined, chunk as object, undefined, response.headers);
        handle(chunk);
      }, answerLimit("openai"));
    } catch (e) {
      if (!req.signal?.aborted) throw e;
    }
    if (req.signal?.aborted) throw abortError(req.signal);
    if (!finish) throw new ModelError("The model stream ended before a finish_reason", { provider: "openai", retryable: true });

    const content: ContentBlock[] = parts.map((p) =>
      p.kind === "tool"
        ? { type: "tool_use", id: p.slot.id, name: p.slot.name, input: parseToolArguments(p.slot.args) }
        : { type: "text", text: p.text, ...(p.kind === "refusal" ? { refusal: true as const } : {}) },
    );
    if (!usageSeen) usage = estimatedUsage(params, parts.reduce((n, p) => n + (p.kind === "tool" ? p.slot.args.length : p.text.length), 0), req.log);
    return { content, stopReason: stopReason(finish, slots.size > 0, refused), usage };
  }
}

/** The request's input tokens estimated from its JSON: one per CHARS_PER_TOKEN characters (more than real models use). */
function estimatedInputTokens(params: { messages: unknown; tools?: unknown }): number {
  const requestChars = JSON.stringify(params.messages).length + (params.tools ? JSON.stringify(params.tools).length : 0);
  return Math.ceil(requestChars / CHARS_PER_TOKEN);
}

/**
 * A complete answer from a server that sent no usage chunk (some gateways drop it): its tokens are
 * estimated — the request's JSON and the answer's characters, one token per CHARS_PER_TOKEN, more
 * than real models use — rather than counted as 0, which let such a server's tasks run past
 * max_budget_usd and the monthly cap. Logged once per request (warn).
 */
function estimatedUsage(params: { messages: unknown; tools?: unknown }, outChars: number, log: ModelRequest["log"]): Usage {
  const usage = { input_tokens: estimatedInputTokens(params), output_tokens: Math.ceil(outChars / CHARS_PER_TOKEN) };
  log?.warn("the model server sent no usage: tokens estimated from the request and answer sizes", { provider: "openai", ...usage });
  return usage;
}
