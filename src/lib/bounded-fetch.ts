/**
 * Reading an HTTP answer's body only so far: a server that sends without end (or a proxy's large
 * page) must not be held whole in memory.
 */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * A fetch whose answers may hold at most `maxBytes` of body: past that the body fails with
 * `tooLarge()` instead of growing in memory. For clients that read a whole answer (or a whole
 * server-sent event) before they look at it, such as the MCP SDK's HTTP transport.
 */
export function boundedFetch(base: FetchLike, maxBytes: number, tooLarge: () => Error): FetchLike {
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body) return res;
    const declared = Number(res.headers.get("content-length") ?? NaN);
    if (declared > maxBytes) {
      await res.body.cancel().catch(() => {});
      throw tooLarge();
    }
    let seen = 0;
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, out) {
          seen += chunk.byteLength;
          if (seen > maxBytes) out.error(tooLarge());
          else out.enqueue(chunk);
        },
      }),
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * The first `max` bytes of a body (none when there is no body); the rest is cancelled, not read,
 * which closes the connection. For error answers, whose message is at the start: a read that fails
 * ends it early, and what arrived before is the message there is.
 */
export async function readHead(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array<ArrayBuffer>> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < max) {
      const { value, done } = await reader.read();
      if (done) break;
      const part = value.byteLength > max - size ? value.subarray(0, max - size) : value;
      parts.push(part);
      size += part.byteLength;
    }
  } catch {
    // Keep what arrived.
  } finally {
    reader.cancel().catch(() => {});
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
