/**
 * The SSRF guard switched on (the test app allows private webhooks by default, so this app is
 * started with --no-allow-private-webhooks). Configuration-time refusals, the re-check at every
 * delivery on the addresses resolved then (DNS rebinding), the connection going to exactly the
 * checked address (Host and TLS server name kept), and redirects never followed. Host names are
 * resolved through the service's injectable resolver, never /etc/hosts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { attempt } from "../../src/notifications/deliver.ts";
import type { ResolvedAddress } from "../../src/lib/ssrf.ts";
import { classifyAddress } from "../../src/lib/ip.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { type Receiver, startReceiver } from "./receiver.ts";

const PUBLIC = "93.184.216.34";
let t: TestApp;
let u: TestUser;
const receivers: Receiver[] = [];
/** Name → addresses for the injected resolver; a function lets an answer change between calls. */
let dns: Record<string, () => string[]> = {};
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  const answer = dns[host];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
  return answer().map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
};

beforeAll(async () => {
  t = await startTestApp({ flags: ["--no-allow-private-webhooks", "--webhook-backoff", "100ms", "--webhook-timeout", "2s"] });
  expect(t.config.allowPrivateWebhooks).toBe(false);
  t.app.services.notifications.net.resolve = resolver;
  u = await createUser(t);
});
afterEach(() => {
  dns = {};
  t.app.services.notifications.net.resolve = resolver;
  t.app.services.notifications.net.classify = classifyAddress;
});
afterAll(async () => {
  for (const r of receivers) r.stop();
  await t?.stop();
});

const configure = (url: string, who: TestUser = u) => api(t, "POST", "/v1/integrations", who.bearer, { type: "webhook", config: { url, secret: "whsec_ssrf" } });

describe("refused at configuration time", () => {
  test.each([
    ["http://127.0.0.1:8080/hook", "loopback"],
    ["http://[::1]/hook", "loopback"],
    ["http://[::ffff:127.0.0.1]/hook", "loopback"],
    ["http://[::ffff:169.254.169.254]/latest", "link-local"],
    ["http://169.254.169.254/latest/meta-data/", "link-local"],
    ["http://10.0.0.1/hook", "private"],
    ["http://192.168.1.10/hook", "private"],
    ["http://172.20.0.5/hook", "private"],
    ["http://[fd00::1]/hook", "private"],
    ["http://[fe80::1]/hook", "link-local"],
    ["http://100.64.0.1/hook", "cgnat"],
    ["http://224.0.0.1/hook", "multicast"],
    ["http://255.255.255.255/hook", "broadcast"],
    ["http://0.0.0.0/hook", "unspecified"],
    ["http://[::]/hook", "unspecified"],
    ["http://2130706433/hook", "loopback"],
    ["http://0x7f000001/hook", "loopback"],
    ["http://0177.0.0.1/hook", "loopback"],
    ["http://127.1/hook", "loopback"],
    ["https://metadata.internal.test/hook", "link-local"],
    ["https://intranet.test/hook", "private"],
    ["https://mixed.test/hook", "private"],
    ["https://mapped.test/hook", "loopback"],
    ["https://nowhere.test/hook", "unresolvable"],
  ])("%s → 400 config.url (%s)", async (url, reason) => {
    dns = {
      "metadata.internal.test": () => ["169.254.169.254"],
      "intranet.test": () => ["10.20.30.40"],
      "mixed.test": () => [PUBLIC, "192.168.0.7"],
      "mapped.test": () => ["::ffff:127.0.0.1"],
    };
    const res = await configure(url);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("VALIDATION_FAILED");
    expect(res.body.details).toMatchObject({ field: "config.url", reason });
    expect(res.body.error).toContain(reason === "unresolvable" ? "does not resolve" : "--allow-private-webhooks");
  });

  test("localhost through the real system resolver is refused", async () => {
    t.app.services.notifications.net.resolve = (await import("../../src/lib/ssrf.ts")).systemResolver;
    const res = await configure("http://localhost:7420/hook");
    expect(res.status).toBe(400);
    expect(res.body.details).toMatchObject({ field: "config.url", reason: "loopback" });
  });

  test("public addresses are accepted", async () => {
    dns = { "hooks.example.com": () => [PUBLIC, "2606:2800:220:1:248:1893:25c8:1946"] };
    const who = await createUser(t);
    expect((await configure("https://hooks.example.com/in", who)).status).toBe(201);
    expect((await configure(`https://${PUBLIC}/in`, who)).status).toBe(200);
    expect((await configure("https://[2606:4700:4700::1111]/in", who)).status).toBe(200);
  });
});

describe("checked again at every delivery", () => {
  async function deliverOnce(host: string, rcv: Receiver) {
    const who = await createUser(t);
    const url = `http://${host}:${rcv.port}/hook`;
    expect((await configure(url, who)).status).toBe(201);
    const n = await api(t, "POST", "/v1/notifications", who.bearer, { message: "rebind?" });
    expect(n.status).toBe(202);
    return waitFor(async () => {
      const rec = await t.app.services.notifications.get(who.id, n.body.id);
      return rec.status !== "pending" ? rec : null;
    });
  }

  test("DNS rebinding: public when configured, loopback when delivering → refused, nothing sent", async () => {
    const rcv = startReceiver({ secret: "whsec_ssrf" });
    receivers.push(rcv);
    let calls = 0;
    dns = { "rebind.test": () => (++calls === 1 ? [PUBLIC] : ["127.0.0.1"]) };
    const n = await deliverOnce("rebind.test", rcv);
    expect(calls).toBe(2);
    expect(n).toMatchObject({ status: "failed", attempts: 1 });
    expect(n.last_error).toBe("refused by the SSRF guard: rebind.test resolves to 127.0.0.1, a loopback address (webhooks may only reach public addresses)");
    expect(rcv.received).toHaveLength(0);
  });

  test("rebinding to an IPv4-mapped IPv6 loopback is refused too", async () => {
    const rcv = startReceiver({});
    receivers.push(rcv);
    let calls = 0;
    dns = { "rebind6.test": () => (++calls === 1 ? [PUBLIC] : ["::ffff:7f00:1"]) };
    const n = await deliverOnce("rebind6.test", rcv);
    expect(n.status).toBe("failed");
    expect(n.last_error).toContain("loopback");
    expect(rcv.received).toHaveLength(0);
  });

  test("the request goes to the checked address, with the URL's Host", async () => {
    // Stand-in for a public receiver: this policy treats 127.0.0.1 (only) as public.
    t.app.services.notifications.net.classify = (a) => (a === "127.0.0.1" ? null : classifyAddress(a));
    const rcv = startReceiver({ secret: "whsec_ssrf" });
    receivers.push(rcv);
    dns = { "hooks.public.test": () => ["127.0.0.1"] };
    const n = await deliverOnce("hooks.public.test", rcv);
    expect(n.status).toBe("delivered");
    expect(rcv.received).toHaveLength(1);
    expect(rcv.received[0]!.headers.host).toBe(`hooks.public.test:${rcv.port}`);
    expect(rcv.received[0]!.hmacOk).toBe(true);
  });

  test("a redirect to loopback is not followed", async () => {
    t.app.services.notifications.net.classify = (a) => (a === "127.0.0.1" ? null : classifyAddress(a));
    const inside = startReceiver({ hostname: "127.0.0.2" });
    const redirector = startReceiver({ respond: () => new Response(null, { status: 307, headers: { location: `${inside.url}/admin` } }) });
    receivers.push(inside, redirector);
    dns = { "redirector.test": () => ["127.0.0.1"] };
    const n = await deliverOnce("redirector.test", redirector);
    expect(n).toMatchObject({ status: "failed", attempts: 1 });
    expect(n.last_error).toContain("HTTP 307: redirects are not followed");
    expect(redirector.received).toHaveLength(1);
    await Bun.sleep(150);
    expect(inside.received).toHaveLength(0);
  });
});

describe("https to the checked address keeps the host name for SNI and certificate checks", () => {
  const dir = join(import.meta.dir, "fixtures");
  const cert = readFileSync(join(dir, "hooks.example.test.crt"), "utf8");
  const key = readFileSync(join(dir, "hooks.example.test.key"), "utf8");
  let server: ReturnType<typeof Bun.serve>;
  const seen: string[] = [];
  beforeAll(() => {
    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert, key },
      fetch(req) {
        seen.push(req.headers.get("host") ?? "");
        return new Response("ok");
      },
    });
  });
  afterAll(() => server.stop(true));
  const net = {
    guard: true,
    resolve: async () => [{ address: "127.0.0.1", family: 4 as const }],
    classify: (a: string) => (a === "127.0.0.1" ? null : classifyAddress(a)),
  };

  test("the certificate is verified against the URL's host name", async () => {
    const out = await attempt({ url: `https://hooks.example.test:${server.port}/in`, body: "{}", headers: { "content-type": "application/json" } }, { net, timeoutMs: 3000, ca: cert });
    expect(out).toEqual({ kind: "delivered", status: 200 });
    expect(seen.at(-1)).toBe(`hooks.example.test:${server.port}`);
  });

  test("a certificate for another name is refused", async () => {
    const before = seen.length;
    const out = await attempt({ url: `https://other.example.test:${server.port}/in`, body: "{}", headers: {} }, { net, timeoutMs: 3000, ca: cert });
    expect(out.kind).toBe("retry");
    expect(out.kind !== "delivered" && out.kind !== "aborted" && out.error).toStartWith("network error");
    expect(seen.length).toBe(before);
  });

  test("when the first checked address refuses the connection, the next one is tried", async () => {
    const only2 = startReceiver({ hostname: "127.0.0.2" });
    receivers.push(only2);
    const both = {
      guard: true,
      resolve: async () => [
        { address: "127.0.0.1", family: 4 as const },
        { address: "127.0.0.2", family: 4 as const },
      ],
      classify: (a: string) => (a.startsWith("127.0.0.") ? null : classifyAddress(a)),
    };
    const out = await attempt({ url: `http://two.example.test:${only2.port}/in`, body: "{}", headers: {} }, { net: both, timeoutMs: 3000 });
    expect(out).toEqual({ kind: "delivered", status: 200 });
    expect(only2.received).toHaveLength(1);
    expect(only2.received[0]!.headers.host).toBe(`two.example.test:${only2.port}`);
  });

  test("a refused address never opens a connection, even with a port that answers", async () => {
    const port = await freePort();
    const out = await attempt({ url: `http://127.0.0.1:${port}/`, body: "{}", headers: {} }, { net: { ...net, classify: classifyAddress }, timeoutMs: 1000 });
    expect(out).toMatchObject({ kind: "fail", status: null });
  });
});
