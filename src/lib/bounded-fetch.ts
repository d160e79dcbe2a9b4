/**
 * A fetch whose answers may hold at most `maxBytes` of body: past that the body fails with
 * `tooLarge()` instead of growing in memory. For clients that read a whole answer (or a whole
 * server-sent event) before they look at it, such as the MCP SDK's HTTP transport: a server that
 * sends without end would otherwise hold the server's memory without end.
 */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

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
