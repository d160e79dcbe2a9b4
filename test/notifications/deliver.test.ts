/**
 * One delivery attempt's error text, against local receivers: a non-2xx body becomes a short
 * snippet (control characters folded, at most 200 characters), a body that never ends is not read
 * to its end (the attempt returns, the rest is cancelled), and a body cut short still gives the
 * status with what arrived.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { attempt } from "../../src/notifications/deliver.ts";
import type { NetworkPolicy } from "../../src/lib/ssrf.ts";
import { classifyAddress } from "../../src/lib/ip.ts";
import { waitFor } from "../helpers/net.ts";

const net: NetworkPolicy = { guard: false, resolve: async () => [], classify: classifyAddress };
const stops: (() => void)[] = [];
afterAll(() => stops.forEach((stop) => stop()));

function serve(respond: () => Response) {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: respond });
  stops.push(() => server.stop(true));
  return `http://127.0.0.1:${server.port}/hook`;
}

const send = (url: string) => attempt({ url, body: "{}", headers: { "content-type": "application/json" } }, { net, timeoutMs: 5000 });

describe("attempt's error text", () => {
  test("control characters in the body are folded to one space and the ends trimmed", async () => {
    const url = serve(() => new Response("\n boom\r\n\tline two\u0000 \n", { status: 500 }));
    expect(await send(url)).toEqual({ kind: "retry", status: 500, error: "HTTP 500: boom line two" });
  });

  test("a long body is cut to its first 200 characters and an ellipsis; an empty one gives the status alone", async () => {
    const url = serve(() => new Response("é".repeat(3000), { status: 422 }));
    expect(await send(url)).toEqual({ kind: "fail", status: 422, error: `HTTP 422: ${"é".repeat(200)}…` });
    expect(await send(serve(() => new Response(null, { status: 404 })))).toEqual({ kind: "fail", status: 404, error: "HTTP 404" });
  });

  test("a body that never ends is not read to its end: the attempt returns and the rest is cancelled", async () => {
    let cancelled = false;
    const chunk = new TextEncoder().encode("x".repeat(1024));
    const url = serve(
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async pull(c) {
              await Bun.sleep(2);
              c.enqueue(chunk);
            },
            cancel: () => void (cancelled = true),
          }),
          { status: 503 },
        ),
    );
    const out = await send(url);
    expect(out).toEqual({ kind: "retry", status: 503, error: `HTTP 503: ${"x".repeat(200)}…` });
    await waitFor(() => cancelled, { what: "the endless body cancelled" });
  });

  test("a body cut short (the connection closed before its Content-Length) gives the status and what arrived", async () => {
    const listener = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(socket) {
          socket.write("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\npartial answer");
          setTimeout(() => socket.end(), 50);
        },
      },
    });
    stops.push(() => listener.stop(true));
    expect(await send(`http://127.0.0.1:${listener.port}/hook`)).toEqual({ kind: "retry", status: 500, error: "HTTP 500: partial answer" });
  });
});
