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
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../helpers/app.ts";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { freePort, waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import { WsClient } from "../../helpers/ws-client.ts";

const NGINX = Bun.which("nginx") ?? ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].find((p) => existsSync(p)) ?? null;
const mock = startMockAnthropic();

/** docs/scale.md's block, with this test's ports and paths. */
function config(dir: string, port: number, upstreams: number[]) {
  return `worker_processes 1;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;

  map $http_upgrade $connection_upgrade {
    default upgrade;
    ''      close;
  }
  upstream runcell {
${upstreams.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=5s;`).join("\n")}
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 8m;
    location / {
      proxy_pass http://runcell;
      proxy_next_upstream error timeout;
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 1h;
      proxy_buffering off;
    }
  }
}
`;
}

describe.skipIf(!PG_SERVER)("two replicas behind nginx", () => {
  let r: ReplicaSet;
  let dir = "";
  let url = "";
  let nginx: ReturnType<typeof Bun.spawn> | null = null;

  beforeAll(async () => {
    if (!NGINX) throw new Error("nginx is not installed (Debian: apt-get install nginx-light; ./install.sh test installs it)");
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    r = await startReplicas(2, { flags: ["--public-url", url] });
    dir = tempDir("runcell-nginx-replicas-");
    chmodSync(dir, 0o755);
    for (const d of ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]) mkdirSync(join(dir, d));
    writeFileSync(join(dir, "nginx.conf"), config(dir, port, r.servers.map((s) => s.port)));
    nginx = Bun.spawn([NGINX, "-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "error.log"), "-g", `daemon off; pid ${dir}/nginx.pid;`], { stdout: "ignore", stderr: "pipe" });
    await waitFor(async () => (await fetch(url + "/healthz")).ok, {
      timeoutMs: 15_000,
      what: `nginx on ${url}: ${existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : ""}`,
    });
  }, 90_000);

  afterAll(async () => {
    if (nginx && nginx.exitCode === null) {
      nginx.kill("SIGQUIT");
      if ((await Promise.race([nginx.exited, Bun.sleep(5000).then(() => null)])) === null) nginx.kill("SIGKILL");
    }
    await r?.stop();
    mock.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
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
