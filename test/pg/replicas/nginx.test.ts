/**
 * Two replicas behind one URL: a real nginx (Debian's nginx-light; ./install.sh test installs it)
 * with the `upstream` block docs/scale.md shows — round robin, no sticky sessions — in front of two
 * `runcell serve` processes on one PostgreSQL database.
 *
 * Through the one URL: consecutive requests are answered by both replicas (/healthz names the
 * replica); a password sign-in's cookie made on one replica authenticates on the other; a
 * WebSocket through the proxy follows a task submitted through the proxy (whichever replica runs
 * it) to its end with contiguous seqs.
 *
 * Our own nginx on a free port with a temporary prefix, config and logs, stopped at the end.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { freePort, waitFor } from "../../helpers/net.ts";
import { type Nginx, proxyLocation, startNginx } from "../../helpers/nginx.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import { WsClient } from "../../helpers/ws-client.ts";

const mock = startMockAnthropic();

/** docs/scale.md's upstream and server blocks, with this test's ports. */
function blocks(port: number, upstreams: number[]) {
  return `  upstream runcell {
${upstreams.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=5s;`).join("\n")}
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 16m;
${proxyLocation("runcell", ["proxy_next_upstream error timeout;"])}
  }`;
}

describe.skipIf(!PG_SERVER)("two replicas behind nginx", () => {
  let r: ReplicaSet;
  let url = "";
  let nginx: Nginx | null = null;

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    r = await startReplicas(2, { flags: ["--public-url", url] });
    nginx = startNginx(blocks(port, r.servers.map((s) => s.port)));
    await waitFor(async () => (await fetch(url + "/healthz")).ok, { timeoutMs: 15_000, what: `nginx on ${url}: ${nginx.output()}` });
  }, 90_000);

  afterAll(async () => {
    await nginx?.stop();
    await r?.stop();
    mock.stop();
    if (nginx) rmSync(nginx.dir, { recursive: true, force: true });
  });

  test("requests through the one URL are answered by both replicas; a sign-in cookie made on one works on the other", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(((await (await fetch(url + "/healthz")).json()) as { replica: string }).replica);
    expect(seen.size).toBe(2);
    for (const id of seen) expect(id).toMatch(/^rep_/);

    const signIn = await fetch(url + "/api/auth/sign-in/email", {
      method: "POST",
      headers: { "content-type": "application/json", origin: url },
      body: JSON.stringify({ email: r.email, password: "correct horse battery" }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    // Straight to each replica: the session is in the shared database.
    for (const s of r.servers) {
      const me = await fetch(s.url + "/v1/me", { headers: { cookie } });
      expect(me.status).toBe(200);
      expect(((await me.json()) as { email: string }).email).toBe(r.email);
    }
  });

  test("a WebSocket through the proxy follows a task submitted through the proxy to its end, seqs contiguous", async () => {
    const profile = await (
      await fetch(url + "/v1/profiles", {
        method: "POST",
        headers: r.headers,
        body: JSON.stringify({ name: "lb", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
      })
    ).json();
    mock.enqueue({ text: Array.from({ length: 400 }, (_, i) => `lb${i} `), delayMs: 1 });
    const sub = await (await fetch(url + "/v1/tasks", { method: "POST", headers: r.headers, body: JSON.stringify({ profile_id: profile.id, prompt: "through the proxy" }) })).json();
    const ws = await WsClient.connect(`${url.replace(/^http/, "ws")}/v1/stream`, { protocols: [`Bearer.${r.token}`] });
    ws.send({ type: "session.resume", session_id: sub.session_id, after: 0 });
    await ws.waitFor((f) => f.type === "task:done" && f.task_id === sub.task_id, 30_000);
    const seqs = ws.frames.filter((f) => typeof f.seq === "number").map((f) => f.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const text = ws.frames.filter((f) => f.type === "task:token").map((f) => f.text).join("");
    expect(text).toContain("lb0 ");
    expect(text).toContain("lb399 ");
    ws.close();
  });
});
