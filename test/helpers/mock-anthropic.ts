/**
 * A local server speaking Anthropic's Messages API (POST /v1/messages, `stream: true`), for tests
 * and benchmarks. Point the provider at it with `baseUrl: mock.url` (a profile: `model.base_url`).
 *
 *   const mock = startMockAnthropic();                 // { apiKey } to demand that key (x-api-key or Bearer)
 *   mock.enqueue(
 *     { text: "Let me look.", toolCalls: [{ name: "Bash", input: { command: "ls" } }], usage: { input_tokens: 20, output_tokens: 7 } },
 *     { text: ["Done", " here."] },                     // exact pieces; a string is split per word (or `chunks: n`)
 *   );
 *   … run the code under test …
 *   mock.requests[1].body.messages                     // what was sent (system, tools, tool_result blocks…)
 *   toolResults(mock.requests[1].body)                 // the tool_result blocks of the last user message
 *   await mock.stop();
 *
 * Turns (a queue; each request takes the next one):
 * - reply: `text`, `chunks`, `toolCalls` (one or several; `chunks` fragments of input JSON, or
 *   `rawArguments`), `blocks` (ordered text/tool interleaving), `usage` (input/output tokens),
 *   `stopReason`, `delayMs` between chunks, `hangAfter: n` (stall until the client aborts),
 *   `failAfter: n` + `failWith` (in-stream `event: error`, default overloaded_error), `dropAfter: n`
 *   (close the stream without message_stop).
 * - `{ error: { status, message, type?, retryAfter? } }`: Anthropic's error JSON with that status
 *   (529 → overloaded_error, 429 → rate_limit_error, 500 → api_error…).
 * - `{ raw: { status, headers?, body? } }`: exactly that answer (an HTML page, JSON to a stream
 *   request); `body` may be a function making a fresh ReadableStream (a body that never ends).
 * - `mock.script(req => turn)`: answers once the queue is empty (react to the conversation).
 * With neither, a request gets a 400 naming the missing turn. Invalid requests get the 400 the
 * real API gives (tool_use without its tool_result, empty or whitespace-only text block, missing max_tokens…).
 * Also: `mock.waitForRequests(n)`, `mock.disconnects` (aborted streams), `mock.timings`, `mock.reset()`.
 *
 * Wire format: message_start (usage.input_tokens), ping, per block content_block_start /
 * content_block_delta (text_delta | input_json_delta) / content_block_stop, message_delta
 * (stop_reason, usage.output_tokens), message_stop.
 */
import { type Frame, type MockHttpError, type MockOptions, type MockProviderServer, startMockServer, type WireFormat } from "./mock-provider.ts";

export type { MockBlock, MockHttpError, MockProviderServer, MockReply, MockScript, MockToolCall, MockTurn, RecordedRequest } from "./mock-provider.ts";

const TYPE_BY_STATUS: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error",
};

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const bad = (message: string): MockHttpError => ({ status: 400, type: "invalid_request_error", message });

function validate(body: any, headers: Headers, opts: MockOptions): MockHttpError | null {
  // The key arrives as x-api-key (classic) or Authorization: Bearer (current SDKs); either is accepted.
  if (opts.apiKey && headers.get("x-api-key") !== opts.apiKey && headers.get("authorization") !== `Bearer ${opts.apiKey}`) {
    return { status: 401, type: "authentication_error", message: "invalid x-api-key" };
  }
  if (!body || typeof body !== "object") return bad("body: expected an object");
  if (typeof body.model !== "string" || !body.model) return bad("model: Field required");
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return bad("max_tokens: Field required");
  if (body.stream !== true) return bad("mock-anthropic only answers streaming requests (stream: true)");
  if (body.system !== undefined && typeof body.system !== "string" && !Array.isArray(body.system)) return bad("system: Input should be a valid string");
  const msgs = body.messages;
  if (!Array.isArray(msgs) || msgs.length === 0) return bad("messages: at least one message is required");
  if (msgs[0].role !== "user") return bad("messages: first message must use the \"user\" role");
  for (const [i, t] of (body.tools ?? []).entries()) {
    if (!/^[a-zA-Z0-9_-]{1,128}$/.test(t?.name ?? "")) return bad(`tools.${i}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`);
    if (t.input_schema?.type !== "object") return bad(`tools.${i}.input_schema.type: Input should be 'object'`);
  }
  for (const [i, m] of msgs.entries()) {
    if (m.role !== "user" && m.role !== "assistant") return bad(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    const blocks = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
    if (!Array.isArray(blocks)) return bad(`messages.${i}.content: Input should be a valid list`);
    if (blocks.length === 0 && i < msgs.length - 1) return bad(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`);
    for (const b of blocks) {
      // As the API answers a request whose history holds tool calls but which declares no tools.
      if ((b.type === "tool_use" || b.type === "tool_result") && !(body.tools ?? []).length) return bad("Requests which include `tool_use` or `tool_result` blocks must define tools.");
      if (b.type === "text" && !b.text) return bad(`messages.${i}: text content blocks must be non-empty`);
      if (b.type === "text" && !b.text.trim()) return bad(`messages: text content blocks must contain non-whitespace text`);
    }
    const uses = blocks.filter((b: any) => b.type === "tool_use").map((b: any) => b.id);
    if (m.role === "assistant" && uses.length && i < msgs.length - 1) {
      const next = msgs[i + 1];
      const answered = new Set((Array.isArray(next.content) ? next.content : []).filter((b: any) => b.type === "tool_result").map((b: any) => b.tool_use_id));
      const missing = uses.filter((id: string) => !answered.has(id));
      if (missing.length) {
        return bad(`messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
      }
    }
    for (const b of blocks.filter((x: any) => x.type === "tool_result")) {
      const prev = i > 0 ? msgs[i - 1] : null;
      const ids = prev?.role === "assistant" && Array.isArray(prev.content) ? prev.content.filter((x: any) => x.type === "tool_use").map((x: any) => x.id) : [];
      if (!ids.includes(b.tool_use_id)) return bad(`messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
    }
  }
  return null;
}

export const anthropicFormat: WireFormat = {
  name: "mock-anthropic",
  basePath: "",
  toolIdPrefix: "toolu_mock_",
  endpoint: (path) => path.endsWith("/v1/messages"),
  validate,
  errorBody(err, index) {
    const type = err.type ?? TYPE_BY_STATUS[err.status] ?? (err.status >= 500 ? "api_error" : "invalid_request_error");
    const requestId = `req_mock_${index}`;
    return { type, body: { type: "error", error: { type, message: err.message }, request_id: requestId }, headers: { "request-id": requestId } };
  },
  frames(reply, req) {
    if (reply.refusal) throw new Error("mock-anthropic: `refusal` is OpenAI's delta.refusal; Anthropic refuses with text and stopReason: \"refusal\"");
    const usage = reply.usage ?? { input_tokens: 0, output_tokens: 0 };
    const hasTool = reply.blocks.some((b) => b.kind === "tool");
    const f: Frame[] = [];
    const meta = (event: string, data: unknown) => f.push({ data: sse(event, data), content: false });
    meta("message_start", {
      type: "message_start",
      message: {
        id: `msg_mock_${req.index}`,
        type: "message",
        role: "assistant",
        model: req.body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: usage.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: Math.min(1, usage.output_tokens) },
      },
    });
    meta("ping", { type: "ping" });
    reply.blocks.forEach((b, index) => {
      if (b.kind === "text") {
        meta("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
        for (const text of b.pieces) f.push({ data: sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } }), content: true });
      } else {
        meta("content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
        for (const partial_json of b.pieces) {
          f.push({ data: sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } }), content: true });
        }
      }
      meta("content_block_stop", { type: "content_block_stop", index });
    });
    meta("message_delta", {
      type: "message_delta",
      delta: { stop_reason: reply.stopReason ?? (hasTool ? "tool_use" : "end_turn"), stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    });
    meta("message_stop", { type: "message_stop" });
    return f;
  },
  streamError: (e) => sse("error", { type: "error", error: { type: e.type ?? "overloaded_error", message: e.message ?? "Overloaded" } }),
};

export function startMockAnthropic(opts: MockOptions = {}): MockProviderServer {
  return startMockServer(anthropicFormat, opts);
}

/** The tool_result blocks of the last user message of a recorded request body. */
export function toolResults(body: any): { type: "tool_result"; tool_use_id: string; content?: unknown; is_error?: boolean }[] {
  const last = body.messages[body.messages.length - 1];
  return Array.isArray(last?.content) ? last.content.filter((b: any) => b.type === "tool_result") : [];
}
