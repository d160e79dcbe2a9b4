/**
 * kill -9 with 100 pending deliveries: runcell runs as a real subprocess (`bun src/main.ts serve`),
 * is killed with SIGKILL while deliveries (and retries) are in flight, and started again on the
 * same data dir. Every one of the 100 ends delivered or failed; none is lost; only requests in
 * flight at the kill may arrive twice, with the same X-Service-Delivery.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { createApp } from "../../src/app.ts";
import { parseArgs, resolveConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { CONCURRENCY } from "../../src/notifications/worker.ts";
import { tempDir } from "../helpers/app.ts";
import { sqlAllIn } from "../helpers/db.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { databaseArgs, dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";
import { startReceiver } from "./receiver.ts";

const ROOT = join(import.meta.dir, "..", "..");
const SECRET = "whsec_restart_test";
const N = 100;
const FLAGS = ["--allow-private-webhooks", "--webhook-backoff", "150ms", "--webhook-timeout", "2s", "--log-level", "warn"];

const dataDir = tempDir("runcell-ntf-restart-");
const procs: ReturnType<typeof Bun.spawn>[] = [];
afterAll(async () => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
  await dropDatabaseFor(dataDir);
});

async function serve(port: number) {
  const out: string[] = [];
  const proc = Bun.spawn(["bun", join(ROOT, "src/main.ts"), "serve", "--data-dir", dataDir, ...(await databaseArgs(dataDir)), "--http", `127.0.0.1:${port}`, ...FLAGS], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root" },
    stdout: "pipe",
    stderr: "pipe",
  });
  procs.push(proc);
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const reader = stream.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(new TextDecoder().decode(r.value));
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, { timeoutMs: 20_000, what: `runcell on ${port}` }).catch((e: Error) => {
    throw new Error(`${e.message}; its output: ${out.join("")}`);
  });
  return proc;
}

async function counts(): Promise<Record<string, number>> {
  const rows = await sqlAllIn<{ status: string; n: number }>(dataDir, "SELECT status, count(*) AS n FROM notification_log GROUP BY status");
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

test("kill -9 with 100 pending deliveries loses none", async () => {
  // Every third notification is refused once (503) so retries are pending across the kill too.
  const okFor = new Map<string, number>();
  const seen = new Map<string, number>();
  const rcv = startReceiver({
    secret: SECRET,
    async respond(_n, req) {
      const id = req.headers.get("x-service-delivery")!;
      const k = (seen.get(id) ?? 0) + 1;
      seen.set(id, k);
      await Bun.sleep(25);
      if (k === 1 && Number.parseInt(id.slice(-2), 32) % 3 === 0) return new Response("busy", { status: 503 });
      okFor.set(id, (okFor.get(id) ?? 0) + 1);
      return new Response("ok");
    },
  });

  // 1. Seed the data dir: a user, a webhook, 100 pending notifications (no worker running yet).
  const config = resolveConfig(parseArgs(["--data-dir", dataDir, ...(await databaseArgs(dataDir)), ...FLAGS]).flags, {});
  const seed = await createApp(config, { logger: silentLogger });
  const s = seed.services;
  const user = await s.users.create({ email: "restart@example.com", name: "restart", password: "correct horse battery" });
  const token = (await s.tokens.create(user.id, "restart")).token;
  await s.notifications.integrations.upsert(user.id, { type: "webhook", config: { url: rcv.url + "/in", secret: SECRET } });
  const ids = (await Promise.all(Array.from({ length: N }, (_, i) => s.notifications.enqueue({ userId: user.id, source: "agent", message: `job ${i} done` })))).map((q) => q!.id);
  await seed.stop();
  expect(await counts()).toEqual({ pending: N });

  // 2. Serve, and kill -9 while requests are in flight.
  const first = await serve(await freePort());
  await waitFor(() => rcv.received.length >= 30, { timeoutMs: 20_000, what: "30 requests" });
  first.kill("SIGKILL");
  expect(await first.exited).not.toBe(0);
  const atKill = await counts();
  const receivedAtKill = rcv.received.length;
  expect(atKill.pending ?? 0).toBeGreaterThan(0);

  // 3. Restart on the same data dir; everything drains.
  const port = await freePort();
  const second = await serve(port);
  const pending = () => fetch(`http://127.0.0.1:${port}/v1/notifications?status=pending&limit=100`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.json() as Promise<{ data: unknown[] }>);
  // On PostgreSQL a start releases only leases that ran out (src/notifications/outbox.ts,
  // releaseStaleLeases: replicas may share the outbox), so the rows in flight at the kill resume
  // once theirs expires: --webhook-timeout (2 s) + 30 s after their claim.
  const leaseWait = PG_SERVER ? 2_000 + 30_000 : 0;
  await waitFor(async () => (await pending()).data.length === 0, { timeoutMs: 30_000 + leaseWait, intervalMs: 100, what: "no pending notifications" });
  second.kill("SIGTERM");
  expect(await second.exited).toBe(0);
  rcv.stop();

  // 4. None lost: all 100 delivered (the receiver accepts every second try), each one seen by
  //    the receiver with a 2xx; duplicates only among the requests in flight at the kill.
  const final = await counts();
  expect(final).toEqual({ delivered: N });
  for (const id of ids) expect(okFor.get(id) ?? 0, id).toBeGreaterThanOrEqual(1);
  const duplicates = [...okFor.values()].filter((n) => n > 1).length;
  expect(duplicates).toBeLessThanOrEqual(CONCURRENCY);
  expect(rcv.received.every((r) => r.hmacOk && r.stripeOk)).toBe(true);
  expect(rcv.received.length).toBeGreaterThan(receivedAtKill);
  console.log(`at kill: ${JSON.stringify(atKill)}, ${receivedAtKill} requests received; after restart: ${JSON.stringify(final)}, ${rcv.received.length} requests, ${duplicates} sent twice`);
}, 120_000);

test("a graceful stop cuts an attempt short and gives the row back; the next start delivers it", async () => {
  const { startTestApp } = await import("../helpers/app.ts");
  const { createUser, api } = await import("../helpers/users.ts");
  const dir = tempDir("runcell-ntf-stop-");
  let slow = true;
  const rcv = startReceiver({
    async respond() {
      if (slow) await Bun.sleep(3000);
      return new Response("ok");
    },
  });
  try {
    const t1 = await startTestApp({ dataDir: dir, flags: ["--webhook-timeout", "5s"] });
    const u = await createUser(t1);
    await api(t1, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: rcv.url } });
    const id = (await api(t1, "POST", "/v1/notifications", u.bearer, { message: "in flight at shutdown" })).body.id as string;
    await waitFor(() => rcv.received.length === 1);
    const started = Date.now();
    await t1.stop();
    expect(Date.now() - started).toBeLessThan(2000);
    const [row] = await sqlAllIn<{ status: string; attempts: number; lease_id: string | null }>(dir, "SELECT status, attempts, lease_id FROM notification_log WHERE id = ?", [id]);
    expect(row).toEqual({ status: "pending", attempts: 0, lease_id: null });

    slow = false;
    const t2 = await startTestApp({ dataDir: dir });
    try {
      const n = await waitFor(async () => {
        const r = await t2.app.services.notifications.get(u.id, id);
        return r.status === "delivered" ? r : null;
      });
      expect(n.attempts).toBe(1);
      expect(rcv.received.map((r) => r.headers["x-service-delivery"])).toEqual([id, id]);
    } finally {
      await t2.stop();
    }
  } finally {
    rcv.stop();
    rmSync(dir, { recursive: true, force: true });
    await dropDatabaseFor(dir);
  }
}, 30_000);
