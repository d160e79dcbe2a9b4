/**
 * A real nginx (Debian's `nginx-light`; `./install.sh test` installs it) in front of runcell with
 * TLS from a self-signed certificate, configured as README "Operations" shows: proxy_pass to the
 * loopback listener, the WebSocket upgrade headers, X-Forwarded-For / X-Forwarded-Proto.
 *
 * Over https through the proxy: sign-in sets a `__Secure-` cookie marked Secure, which then
 * authenticates REST and the /v1/stream WebSocket (the token subprotocol works too). The client
 * address runcell logs and rate-limits under comes from X-Forwarded-For only with --trust-proxy:
 * nginx here connects to the apps from 127.0.0.3 (`proxy_bind`, a test-only line), so the proxy's
 * address and the client's (127.0.0.1) differ; a forged X-Forwarded-For from the client never
 * changes the bucket or the logged address, with or without --trust-proxy (nginx appends the
 * real address, and runcell takes the last entry).
 *
 * Our own nginx on free ports with a temporary prefix, config and logs — never the system
 * service — stopped at the end.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import WebSocket from "ws";
import { startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { NGINX, type Nginx, proxyLocation, startNginx } from "../helpers/nginx.ts";
import { createUser, type TestUser } from "../helpers/users.ts";

const OPENSSL = Bun.which("openssl") ?? (existsSync("/usr/bin/openssl") ? "/usr/bin/openssl" : null);
/** The address nginx connects to the apps from (any 127/8 address is on lo). */
const PROXY_ADDR = "127.0.0.3";
const CLIENT_ADDR = "127.0.0.1";
const BURST = 200;
const TLS = { rejectUnauthorized: false };

let dir = "";
let nginx: Nginx | null = null;
/** Behind the proxy with --trust-proxy, and the same without it. */
let trusted: TestApp;
let untrusted: TestApp;
let trustedUrl = "";
let untrustedUrl = "";
let alice: TestUser;

/** The server block README shows, for one app (the test adds proxy_bind and its own paths). */
function serverBlock(port: number, appPort: number) {
  return `
  server {
    listen 127.0.0.1:${port} ssl;
    server_name 127.0.0.1;
    ssl_certificate     ${dir}/cert.pem;
    ssl_certificate_key ${dir}/key.pem;
    client_max_body_size 16m;

${proxyLocation(`127.0.0.1:${appPort}`, [`proxy_bind ${PROXY_ADDR};`])}
  }`;
}

beforeAll(async () => {
  if (!NGINX) throw new Error("nginx is not installed: this test runs a real nginx in front of runcell (Debian: apt-get install nginx-light; ./install.sh test installs it)");
  if (!OPENSSL) throw new Error("openssl is not installed: this test makes a self-signed certificate with it (Debian: apt-get install openssl)");
  dir = tempDir("runcell-nginx-");
  const cert = Bun.spawnSync(
    [OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (cert.exitCode !== 0) throw new Error(`openssl req -x509 failed: ${cert.stderr.toString()}`);

  const [p1, p2] = [await freePort(), await freePort()];
  trustedUrl = `https://127.0.0.1:${p1}`;
  untrustedUrl = `https://127.0.0.1:${p2}`;
  const limits = ["--rate-limit-per-minute", "1", "--rate-limit-burst", String(BURST)];
  trusted = await startTestApp({ flags: ["--trust-proxy", "--public-url", trustedUrl, ...limits] });
  untrusted = await startTestApp({ flags: ["--public-url", untrustedUrl, ...limits] });
  alice = await createUser(trusted, { email: "alice@example.com", password: "correct horse battery" });

  nginx = startNginx(`${serverBlock(p1, trusted.config.port)}\n${serverBlock(p2, untrusted.config.port)}`, { dir });
  for (const url of [trustedUrl, untrustedUrl]) {
    await waitFor(async () => (await fetch(url + "/healthz", { tls: TLS })).ok, {
      timeoutMs: 15_000,
      what: `nginx on ${url}: ${nginx!.output()}`,
    });
  }
}, 60_000);

afterAll(async () => {
  await nginx?.stop();
  await trusted?.stop();
  await untrusted?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The app's `request` / `stream connected` log line for a request id (the header nginx passes on). */
function logLine(t: TestApp, requestId: string): Record<string, unknown> {
  const line = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.request_id === requestId && (l.msg === "request" || l.msg === "stream connected"));
  if (!line) throw new Error(`no log line for ${requestId}`);
  return line;
}

let rid = 0;
const nextId = (what: string) => `nginx-${what}-${++rid}`;

/** An anonymous GET /v1/me (a rate-limited path): its bucket's remaining count and the logged ip. */
async function probe(t: TestApp, base: string, forwardedFor?: string) {
  const id = nextId("probe");
  const headers: Record<string, string> = { "x-request-id": id };
  if (forwardedFor) headers["x-forwarded-for"] = forwardedFor;
  const r = await fetch(base + "/v1/me", { headers, tls: TLS });
  expect(r.status).toBe(401);
  await r.arrayBuffer();
  return { remaining: Number(r.headers.get("ratelimit-remaining")), ip: logLine(t, id).ip as string };
}

function openSocket(url: string, opts: { protocols?: string[]; headers?: Record<string, string> }): Promise<{ ws: WebSocket; frames: any[]; next: (pred: (f: any) => boolean) => Promise<any> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, opts.protocols ?? [], { headers: opts.headers, rejectUnauthorized: false });
    const frames: any[] = [];
    const waiters: (() => void)[] = [];
    ws.on("message", (data) => {
      frames.push(JSON.parse(data.toString()));
      for (const w of waiters.splice(0)) w();
    });
    const next = async (pred: (f: any) => boolean) => {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const f = frames.find(pred);
        if (f) return f;
        if (Date.now() > deadline) throw new Error(`no such frame; got ${JSON.stringify(frames)}`);
        await new Promise<void>((r) => {
          const timer = setTimeout(r, 200);
          waiters.push(() => {
            clearTimeout(timer);
            r();
          });
        });
      }
    };
    ws.once("open", () => resolve({ ws, frames, next }));
    ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once("error", reject);
  });
}

describe("https through nginx", () => {
  test("sign-in sets a __Secure- cookie marked Secure; it authenticates the next requests through the proxy", async () => {
    const id = nextId("signin");
    const r = await fetch(trustedUrl + "/api/auth/sign-in/email", {
      method: "POST",
      headers: { "content-type": "application/json", origin: trustedUrl, "x-request-id": id },
      body: JSON.stringify({ email: alice.email, password: alice.password }),
      tls: TLS,
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { user: { email: string } }).user.email).toBe(alice.email);
    const setCookie = r.headers.get("set-cookie")!;
    expect(setCookie).toStartWith("__Secure-runcell.session_token=");
    expect(setCookie.split(/;\s*/).map((p) => p.toLowerCase())).toEqual(expect.arrayContaining(["secure", "httponly"]));
    const cookie = setCookie.split(";")[0]!;

    const me = await fetch(trustedUrl + "/v1/me", { headers: { cookie }, tls: TLS });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { email: string }).email).toBe(alice.email);

    // It went through nginx (its access log), and runcell saw the client, not the proxy.
    expect(readFileSync(join(dir, "access.log"), "utf8")).toContain('"POST /api/auth/sign-in/email HTTP/1.1" 200');
    expect(logLine(trusted, id)).toMatchObject({ status: 200, ip: CLIENT_ADDR });
    const audit = (await trusted.app.services.audit.list({ action: "auth.sign_in", limit: 10 })).data;
    expect(audit[0]).toMatchObject({ action: "auth.sign_in", ip: CLIENT_ADDR });
  });

  test("the /v1/stream WebSocket works through the proxy: with the Secure cookie and with the token subprotocol", async () => {
    const signIn = await fetch(trustedUrl + "/api/auth/sign-in/email", {
      method: "POST",
      headers: { "content-type": "application/json", origin: trustedUrl },
      body: JSON.stringify({ email: alice.email, password: alice.password }),
      tls: TLS,
    });
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const wss = trustedUrl.replace(/^https/, "wss") + "/v1/stream";

    const id = nextId("ws");
    const viaCookie = await openSocket(wss, { headers: { cookie, origin: trustedUrl, "x-request-id": id } });
    viaCookie.ws.send(JSON.stringify({ type: "session.resume", session_id: "sess_nope", request_id: "r1" }));
    expect(await viaCookie.next((f) => f.request_id === "r1")).toMatchObject({ type: "error", code: "NOT_FOUND" });
    // A bad message: the error frame, and the socket stays open through the proxy.
    viaCookie.ws.send("{nope");
    expect(await viaCookie.next((f) => f.type === "error" && f.code === "VALIDATION_FAILED")).toMatchObject({ details: { field: "frame" } });
    await Bun.sleep(1500);
    viaCookie.ws.send(JSON.stringify({ type: "session.resume", session_id: "sess_later", request_id: "r2" }));
    expect(await viaCookie.next((f) => f.request_id === "r2")).toMatchObject({ type: "error", code: "NOT_FOUND" });
    expect(logLine(trusted, id)).toMatchObject({ msg: "stream connected", authenticated: true, user_id: alice.id, ip: CLIENT_ADDR });
    viaCookie.ws.close(1000);

    const viaToken = await openSocket(wss, { protocols: [`Bearer.${alice.token}`] });
    expect(viaToken.ws.protocol).toBe(`Bearer.${alice.token}`);
    viaToken.ws.send(JSON.stringify({ type: "session.resume", session_id: "sess_nope", request_id: "t1" }));
    expect(await viaToken.next((f) => f.request_id === "t1")).toMatchObject({ type: "error", code: "NOT_FOUND" });
    viaToken.ws.close(1000);

    // The cookie from another origin is refused at the upgrade, as without the proxy.
    await expect(openSocket(wss, { headers: { cookie, origin: "https://evil.example.com" } })).rejects.toThrow("upgrade refused: 403");
    await waitFor(() => /"GET \/v1\/stream HTTP\/1\.1" 101/.test(readFileSync(join(dir, "access.log"), "utf8")), { what: "nginx's access log line for the upgrade" });
  });
});

describe("the client address: from X-Forwarded-For only with --trust-proxy", () => {
  test("--trust-proxy: the address nginx appends (the client's), in the logs and as the rate-limit bucket; a forged header changes neither", async () => {
    const forged = ["203.0.113.7", "203.0.113.8", "10.0.0.1, 203.0.113.9"];
    const first = await probe(trusted, trustedUrl);
    expect(first.ip).toBe(CLIENT_ADDR); // not the proxy's 127.0.0.3
    let last = first.remaining;
    for (const f of forged) {
      const p = await probe(trusted, trustedUrl, f);
      expect(p.ip).toBe(CLIENT_ADDR);
      expect(p.remaining).toBeLessThan(last); // the same bucket, taken again
      last = p.remaining;
    }
    // The proxied requests were bucketed under the client's address: a direct request from that
    // address (no header) continues the same bucket…
    const direct = await probe(trusted, trusted.url);
    expect(direct.ip).toBe(CLIENT_ADDR);
    expect(direct.remaining).toBeLessThan(last);
    // …and a header sent straight to the app is believed (hence: listen on loopback behind the proxy).
    const straight = await probe(trusted, trusted.url, "198.51.100.7");
    expect(straight.ip).toBe("198.51.100.7");
    expect(straight.remaining).toBe(BURST - 1);
    expect(trusted.logs.join("\n")).not.toContain("203.0.113.");
    expect(trusted.logs.join("\n")).not.toContain(`"ip":"${PROXY_ADDR}"`);
  });

  test("without --trust-proxy: the proxy's address for every client; X-Forwarded-For, forged or nginx's, is ignored", async () => {
    const first = await probe(untrusted, untrustedUrl);
    expect(first.ip).toBe(PROXY_ADDR);
    let last = first.remaining;
    for (const f of ["203.0.113.7", "198.51.100.7"]) {
      const p = await probe(untrusted, untrustedUrl, f);
      expect(p.ip).toBe(PROXY_ADDR);
      expect(p.remaining).toBeLessThan(last);
      last = p.remaining;
    }
    // The client's own address is another bucket (the proxied requests were not charged to it)…
    const direct = await probe(untrusted, untrusted.url);
    expect(direct.ip).toBe(CLIENT_ADDR);
    expect(direct.remaining).toBe(BURST - 1);
    // …and a header sent straight to the app is ignored too: the same bucket, the socket's address.
    const straight = await probe(untrusted, untrusted.url, "198.51.100.7");
    expect(straight.ip).toBe(CLIENT_ADDR);
    expect(straight.remaining).toBe(BURST - 2);
    expect(untrusted.logs.join("\n")).not.toContain("203.0.113.");
    expect(untrusted.logs.join("\n")).not.toContain("198.51.100.7");
  });
});
