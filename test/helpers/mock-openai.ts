/**
 * A local server speaking OpenAI's Chat Completions API (POST /v1/chat/completions, `stream: true`),
 * as OpenAI and the compatible servers (Ollama, vLLM, llama.cpp, OpenRouter) do. `mock.url` ends
 * in /v1, like the base_url of those servers: `baseUrl: mock.url` (a profile: `model.base_url`).
 *
 *   const mock = startMockOpenAI();                    // { apiKey } to demand `Authorization: Bearer …`
 *   mock.enqueue(
 *     { text: "Let me look.", toolCalls: [{ name: "Bash", input: { command: "ls" } }], usage: { input_tokens: 20, output_tokens: 7 } },
 *     { text: "Done.", usage: null },                   // usage: null → no usage chunk (servers that omit it)
 *   );
 *   mock.requests[1].body.messages                     // system first, assistant tool_calls, role:"tool" results…
 *   toolMessages(mock.requests[1].body)                // the role:"tool" messages
 *
 * Turns, script mode, errors and the other helpers are those of mock-anthropic.ts (same
 * MockTurn shapes; `usage` is given as input_tokens/output_tokens and sent as
 * prompt_tokens/completion_tokens). Error JSON: `{error:{message, type, param, code}}`.
 * Invalid requests get the 400 the real API gives (tool message without a preceding tool call,
 * unanswered tool_calls, missing model/messages…).
 *
 * Wire format: `data: {chat.completion.chunk}` frames — a first delta with the role, content
 * deltas, tool_calls deltas by index (id/name in the first, argument fragments after), `refusal`
 * deltas for a scripted `refusal` (`mock.enqueue({ refusal: "I can't help with that." })`), a
 * finish_reason chunk, a usage chunk with `choices: []` when the request asked for
 * `stream_options.include_usage`, then `data: [DONE]`. In-stream errors: `data: {"error":{…}}`.
 */
import { type Frame, type MockHttpError, type MockOptions, type MockProviderServer, startMockServer, type WireFormat } from "./mock-provider.ts";

export type { MockBlock, MockHttpError, MockProviderServer, MockReply, MockScript, MockToolCall, MockTurn, RecordedRequest } from "./mock-provider.ts";

const TYPE_BY_STATUS: Record<number, string> = { 400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_exceeded" };
const data = (obj: unknown) => `data: ${JSON.stringify(obj)}\n\n`;
const bad = (message: string): MockHttpError => ({ status: 400, type: "invalid_request_error", message });

function validate(body: any, headers: Headers, opts: MockOptions): MockHttpError | null {
  if (opts.apiKey && headers.get("authorization") !== `Bearer ${opts.apiKey}`) {
    return { status: 401, type: "invalid_request_error", message: "Incorrect API key provided." };
  }
  if (!body || typeof body !== "object") return bad("We could not parse the JSON body of your request.");
  if (typeof body.model !== "string" || !body.model) return bad("you must provide a model parameter");
  if (body.stream !== true) return bad("mock-openai only answers streaming requests (stream: true)");
  const msgs = body.messages;
  if (!Array.isArray(msgs) || msgs.length === 0) return bad("[] is too short - 'messages'");
  for (const [i, t] of (body.tools ?? []).entries()) {
    if (t?.type !== "function" || typeof t.function?.name !== "string") return bad(`Invalid value for 'tools[${i}]': expected a function tool.`);
  }
  let waiting: Set<string> | null = null;
  let answered = new Set<string>();
  for (const [i, m] of msgs.entries()) {
    if (!["system", "developer", "user", "assistant", "tool"].includes(m.role)) return bad(`Invalid value: '${m.role}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'.`);
    if (m.role === "tool") {
      if (!waiting || !waiting.has(m.tool_call_id)) {
        return bad(`Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[${i}])`);
      }
      answered.add(m.tool_call_id);
      if (typeof m.content !== "string") return bad(`messages[${i}].content: expected a string`);
      continue;
    }
    if (waiting) {
      const missing = [...waiting].filter((id) => !answered.has(id));
      if (missing.length) {
        return bad(`An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${missing.join(", ")}`);
      }
      waiting = null;
    }
    if (m.role === "assistant" && m.refusal != null && typeof m.refusal !== "string") return bad(`messages[${i}].refusal: expected a string or null`);
    if (m.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length) {
      waiting = new Set(m.tool_calls.map((c: any) => c.id));
      answered = new Set();
    } else if (m.content == null) return bad(`Invalid value for 'content': expected a string, got null. (messages[${i}])`);
  }
  const unanswered = waiting ? [...waiting].filter((id) => !answered.has(id)) : [];
  if (unanswered.length) {
    return bad(`An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${unanswered.join(", ")}`);
  }
  return null;
}

export const openaiFormat: WireFormat = {
  name: "mock-openai",
  basePath: "/v1",
  toolIdPrefix: "call_mock_",
  endpoint: (path) => path.endsWith("/chat/completions"),
  validate,
  errorBody(err) {
    const type = err.type ?? TYPE_BY_STATUS[err.status] ?? (err.status >= 500 ? "server_error" : "invalid_request_error");
    return { type, body: { error: { message: err.message, type, param: null, code: null } } };
  },
  frames(reply, req) {
    const includeUsage = req.body.stream_options?.include_usage === true;
    const base = { id: `chatcmpl-mock-${req.index}`, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: req.body.model, system_fingerprint: "fp_mock" };
    const chunk = (delta: unknown, finish: string | null = null) =>
      data({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) });
    const f: Frame[] = [{ data: chunk({ role: "assistant", content: "" }), content: false }];
    let toolIndex = 0;
    for (const b of reply.blocks) {
      if (b.kind === "text") {
        for (const content of b.pieces) f.push({ data: chunk({ content }), content: true });
        continue;
      }
      const index = toolIndex++;
      f.push({ data: chunk({ tool_calls: [{ index, id: b.id, type: "function", function: { name: b.name, arguments: "" } }] }), content: false });
      for (const args of b.pieces) f.push({ data: chunk({ tool_calls: [{ index, function: { arguments: args } }] }), content: true });
    }
    // A refusal comes as OpenAI sends it: `refusal` deltas (the first one with content null), and
    // finish_reason "stop".
    if (reply.refusal) {
      f.push({ data: chunk({ content: null, refusal: "" }), content: false });
      for (const refusal of reply.refusal) f.push({ data: chunk({ refusal }), content: true });
    }
    f.push({ data: chunk({}, reply.stopReason ?? (toolIndex > 0 ? "tool_calls" : "stop")), content: false });
    if (includeUsage && reply.usage) {
      const u = reply.usage;
      f.push({ data: data({ ...base, choices: [], usage: { prompt_tokens: u.input_tokens, completion_tokens: u.output_tokens, total_tokens: u.input_tokens + u.output_tokens } }), content: false });
    }
    f.push({ data: "data: [DONE]\n\n", content: false });
    return f;
  },
  streamError: (e) => data({ error: { message: e.message ?? "The server had an error while processing your request.", type: e.type ?? "server_error", param: null, code: null } }),
};

export function startMockOpenAI(opts: MockOptions = {}): MockProviderServer {
  return startMockServer(openaiFormat, opts);
}

/** The role:"tool" messages of a recorded request body. */
export function toolMessages(body: any): { role: "tool"; tool_call_id: string; content: string }[] {
  return body.messages.filter((m: any) => m.role === "tool");
}
