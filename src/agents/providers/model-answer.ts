/**
 * Checks on a model server's HTTP answer, before the SDKs or our SSE reader look at it: an error
 * answer's body is read only so far (the SDKs read it whole, with no limit), and a 200 that is not
 * a stream of server-sent events fails at once instead of being read as an empty stream.
 */
import { type FetchLike, readHead } from "../../lib/bounded-fetch.ts";
import { ModelError, type ProviderName } from "./model-error.ts";

/**
 * The most of an error answer's body that is read. The message in it is short (Anthropic's and
 * OpenAI's error JSON is a few hundred bytes); a proxy's HTML page or a server that sends without
 * end would otherwise be held whole in memory, once for every retry.
 */
export const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * `base` with the body of every answer that is not 2xx cut to its first MAX_ERROR_BODY_BYTES (the
 * rest is not read: the connection is closed). The status and headers are kept, so the SDK makes
 * the same error of it (retried or not as before); a JSON body cut short is read as text.
 */
export function boundErrorBodies(base: FetchLike): typeof fetch {
  const wrapped = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const res = await base(input, init);
    if (res.ok || !res.body) return res;
    const head = await readHead(res.body, MAX_ERROR_BODY_BYTES);
    const headers = new Headers(res.headers);
    // The body is now these bytes, as they were decoded.
    headers.delete("content-length");
    headers.delete("content-encoding");
    return new Response(head, { status: res.status, statusText: res.statusText, headers });
  };
  return wrapped as typeof fetch;
}

/**
 * A successful answer to a streaming request must be server-sent events. A server that ignores
 * `stream: true` answers JSON, and a proxy or login page answers HTML: read as a stream, either
 * looks like a stream that ended early, which is retried (and each attempt may be billed). They
 * fail here, not retried. An answer without a content-type is read as a stream: the servers that
 * do not stream say what they send instead, and a minimal server that streams without the header
 * should keep working (if it does not stream, it ends early like any broken stream).
 */
export function assertEventStream(res: Response, provider: ProviderName): void {
  const type = res.headers.get("content-type");
  if (type === null || type.split(";")[0]!.trim().toLowerCase() === "text/event-stream") return;
  res.body?.cancel().catch(() => {});
  throw new ModelError(`The model server did not stream (content-type ${type.slice(0, 100)})`, { provider, retryable: false });
}
