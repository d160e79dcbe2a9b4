/**
 * The composition root's lifecycle: a graceful stop lets an in-flight request finish, closes
 * WebSockets with 1001, and leaves a database that reopens cleanly.
 */
import { expect, test } from "bun:test";
import { startMockAnthropic } from "./helpers/mock-anthropic.ts";
import { startTestApp } from "./helpers/app.ts";
import { createProfile } from "./helpers/agent.ts";
import { createUser } from "./helpers/users.ts";
import { WsClient } from "./helpers/ws-client.ts";

test("stop(): in-flight requests finish, WebSockets close with 1001, new connections are refused", async () => {
  const mock = startMockAnthropic();
  const t = await startTestApp({ keepDataDir: true });
  const user = await createUser(t);
  const profileId = await createProfile(t, user, { mock });
  const ws = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
  mock.script(() => ({ text: "hi" }));
  // A request that takes a while (it creates a container) is in flight when the stop begins.
  const inflight = fetch(`${t.url}/v1/tasks`, { method: "POST", headers: user.bearer, body: JSON.stringify({ profile_id: profileId, prompt: "x" }) });
  await Bun.sleep(20);
  const stopping = t.app.stop();
  const res = await inflight;
  expect(res.status).toBe(202);
  expect((await ws.waitClose()).code).toBe(1001);
  await stopping;
  expect(await fetch(`${t.url}/healthz`).then(() => "answered", () => "refused")).toBe("refused");

  // The database was checkpointed and closed cleanly: the same data dir serves again.
  const again = await startTestApp({ dataDir: t.dataDir });
  const r = await fetch(`${again.url}/v1/api-tokens`, { headers: user.bearer });
  expect(r.status).toBe(200);
  await again.stop();
  await mock.stop();
});

test("a request body of any size is answered by runcell (413 in the error shape, with every header), never by Bun's bare limit", async () => {
  const t = await startTestApp();
  const user = await createUser(t);
  const big = JSON.stringify({ name: "x".repeat(9 * 1024 * 1024) });
  const expect413 = async (r: Response) => {
    expect(r.status).toBe(413);
    expect(await r.json()).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "body" } });
    expect(r.headers.get("x-request-id")).toMatch(/^req_/);
    expect(r.headers.get("ratelimit-limit")).toMatch(/^\d+$/);
  };
  await expect413(await t.fetch("/v1/api-tokens", { method: "POST", headers: user.bearer, body: big }));
  // Streamed without a length: read up to the limit, then refused.
  const chunks = (function* () {
    for (let i = 0; i < 20; i++) yield new Uint8Array(1024 * 1024).fill(0x20);
  })();
  const stream = new ReadableStream({ pull: (c) => { const n = chunks.next(); n.done ? c.close() : c.enqueue(n.value); } });
  await expect413(await t.fetch("/v1/api-tokens", { method: "POST", headers: user.bearer, body: stream }));
  // Without a credential the credential comes first, whatever the size.
  expect((await t.fetch("/v1/api-tokens", { method: "POST", headers: { "content-type": "application/json" }, body: big })).status).toBe(401);
  // A declared length far beyond anything: refused at once, nothing read.
  const reply = await rawHttp(t.url, `POST /v1/api-tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.token}\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{}`);
  expect(reply).toStartWith("HTTP/1.1 413");
  expect(reply).toContain('"code":"VALIDATION_FAILED"');
  await t.stop();
});

test("a short Host (a container's or a proxy's name like `api`) reaches the same routes", async () => {
  const t = await startTestApp();
  const user = await createUser(t);
  for (const host of ["x", "api", "web:80", "[::1]"]) {
    const list = await rawHttp(t.url, `GET /v1/api-tokens?limit=1 HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${user.token}\r\n\r\n`);
    expect(list, host).toStartWith("HTTP/1.1 200");
    expect(list).toContain('"next_cursor"');
    const body = JSON.stringify({ name: `via ${host}` });
    const made = await rawHttp(t.url, `POST /v1/api-tokens HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${user.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(made, host).toStartWith("HTTP/1.1 201");
    expect(made).toContain(`"name":"via ${host}"`);
  }
  await t.stop();
});

test("a request without a Host header (HTTP/1.0 health checkers) or with an empty one reaches the same routes", async () => {
  const t = await startTestApp();
  const user = await createUser(t);
  const health = await rawHttp(t.url, "GET /healthz HTTP/1.0\r\n\r\n");
  expect(health).toStartWith("HTTP/1.1 200");
  expect(health).toContain('"status":"ok"');
  const doc = await rawHttp(t.url, "GET /v1/openapi.json HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n");
  expect(doc).toStartWith("HTTP/1.1 200");
  expect(doc).toContain('"openapi"');
  expect(await rawHttp(t.url, "GET /v1/me HTTP/1.0\r\n\r\n")).toStartWith("HTTP/1.1 401");
  const me = await rawHttp(t.url, `GET /v1/me HTTP/1.0\r\nAuthorization: Bearer ${user.token}\r\n\r\n`);
  expect(me).toStartWith("HTTP/1.1 200");
  expect(me).toContain(user.email);
  // The stream's upgrade reads ?token= from such a URL too (no 500).
  expect(await rawHttp(t.url, "GET /v1/stream?token=rc_x HTTP/1.0\r\n\r\n")).toStartWith("HTTP/1.1 401");
  await t.stop();
});

/** One request written on a raw socket (a Host or a Content-Length no fetch would send); the answer's text. */
function rawHttp(base: string, request: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let text = "";
    Bun.connect({
      hostname: "127.0.0.1",
      port: Number(new URL(base).port),
      socket: {
        open: (s) => void s.write(request),
        data: (s, d) => {
          text += d.toString();
          const head = text.indexOf("\r\n\r\n");
          const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
          if (head >= 0 && text.length - head - 4 >= length) s.end();
        },
        close: () => resolve(text),
        error: (_s, e) => reject(e),
      },
    });
  });
}
