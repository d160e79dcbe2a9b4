/**
 * Work that must happen once, split across two real replicas (`runcell serve` processes on one
 * PostgreSQL database):
 * - 100 webhook notifications queued through both replicas reach a local receiver exactly once
 *   each (counted by X-Service-Delivery, the notification id; every signature checked), and both
 *   replicas delivered some (their own runcell_webhook_deliveries_total counters on /metrics).
 * - A seconds-level playbook schedule runs on both replicas for about 14 s, each frozen in turn
 *   past its lease: every slot between the first and the last is recorded exactly once (one task,
 *   or one skipped/failed run, per scheduled_for), none is missing, and both replicas ran some
 *   (runcell_task_duration_seconds per replica). The playbook is made through one replica: the other learns of its schedule
 *   from the database (a NOTIFY on the schedules channel), not from a restart.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import { waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { createProfile, type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import type { ServerProcess } from "../../helpers/server-process.ts";
import { type Receiver, startReceiver } from "../../notifications/receiver.ts";

const ADMIN = "split test admin password";
const N = 100;
/** How long each replica is frozen: past the 3 s lease and the next heartbeat's takeover round. */
const FREEZE_MS = 5_000;
const mock = startMockAnthropic().script(() => ({ text: "tick done" }));

/** One sample of a Prometheus text exposition (labels matched exactly as given). */
async function metric(server: ServerProcess, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(server.url + "/metrics", { headers: { authorization: `Bearer ${ADMIN}` } })).text();
  let total = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/([a-zA-Z_]+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[3]);
  }
  return total;
}

describe.skipIf(!PG_SERVER)("work split across two replicas, each piece exactly once", () => {
  let r: ReplicaSet;
  let rcv: Receiver;
  const secret = "whsec_" + crypto.randomUUID();
  beforeAll(async () => {
    // A slow receiver (30 ms an answer): neither replica can take everything while the other waits.
    rcv = startReceiver({ secret, respond: async () => (await Bun.sleep(30), new Response("ok")) });
    r = await startReplicas(2, { env: { RUNCELL_ADMIN_PASSWORD: ADMIN }, flags: ["--replica-lease", "3s"] });
    const integ = await fetch(r.servers[0]!.url + "/v1/integrations", { method: "POST", headers: r.headers, body: JSON.stringify({ type: "webhook", config: { url: rcv.url + "/hook", secret } }) });
    expect(integ.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await r?.stop();
    rcv?.stop();
    await mock.stop();
  });

  test(`${N} notifications queued through both replicas: each delivered exactly once, signed, by both replicas between them`, async () => {
    const [a, b] = r.servers as [ServerProcess, ServerProcess];
    const ids = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const res = await fetch((i % 2 ? b : a).url + "/v1/notifications", { method: "POST", headers: r.headers, body: JSON.stringify({ message: `n${i}` }) });
        expect(res.status).toBe(202);
        return (await res.json()).id as string;
      }),
    );
    expect(new Set(ids).size).toBe(N);
    await waitFor(() => rcv.received.length >= N || null, { timeoutMs: 30_000, what: `${N} deliveries` });
    await waitFor(async () => (await r.sql`SELECT count(*)::int AS n FROM notification_log WHERE status = 'delivered'`)[0].n === N || null, { timeoutMs: 10_000, what: "every row delivered" });
    await Bun.sleep(500); // a duplicate would arrive now

    const byId = new Map<string, number>();
    for (const rec of rcv.received) byId.set(rec.headers["x-service-delivery"]!, (byId.get(rec.headers["x-service-delivery"]!) ?? 0) + 1);
    expect(rcv.received).toHaveLength(N);
    expect(new Set(byId.keys())).toEqual(new Set(ids));
    expect([...byId.values()].every((n) => n === 1)).toBe(true);
    expect(rcv.received.every((rec) => rec.hmacOk === true)).toBe(true);
    // One attempt each: nothing was retried or claimed twice.
    const attempts = await r.sql`SELECT notification_id, count(*)::int AS n FROM notification_attempts GROUP BY notification_id`;
    expect(attempts).toHaveLength(N);
    expect(attempts.every((row: { n: number }) => row.n === 1)).toBe(true);

    const delivered = [await metric(a, "runcell_webhook_deliveries_total", { outcome: "delivered" }), await metric(b, "runcell_webhook_deliveries_total", { outcome: "delivered" })];
    expect(delivered[0]! + delivered[1]!).toBe(N);
    expect(delivered[0]).toBeGreaterThan(0);
    expect(delivered[1]).toBeGreaterThan(0);
  }, 60_000);

  test("a seconds-level schedule on both replicas for ~14 s, each frozen for 5 s (past its lease) in turn: every slot recorded exactly once, none missing, run by both replicas", async () => {
    const [a, b] = r.servers as [ServerProcess, ServerProcess];
    const tasksBefore = [await metric(a, "runcell_task_duration_seconds_count"), await metric(b, "runcell_task_duration_seconds_count")];
    const profile = await createProfile(r, a, {
      name: "ticker",
      modelUrl: mock.url,
      limits: { max_concurrency: 50, max_turns: 5, max_budget_usd: 1, memory_mb: 128, cpus: 0.5, pids: 64 },
    });
    expect(profile.status).toBe(201);
    const profileId = (await profile.json()).id;
    // Made through A only: B hears of it from the database.
    const made = await fetch(a.url + "/v1/playbooks", { method: "POST", headers: r.headers, body: JSON.stringify({ name: "every second", profile_id: profileId, prompt: "Tick.", schedule: "* * * * * *" }) });
    expect(made.status).toBe(201);
    const pb = (await made.json()).id as string;
    // Both replicas' timers fire every slot; whichever claims first runs it. Which one that is
    // depends on timing, so each replica is frozen (SIGSTOP) in turn, for longer than the 3 s lease:
    // the other must run the slots of that time (a run the frozen one had going — its task, or its
    // workspace still being made — is taken over once the lease runs out; until then the slots are
    // skipped), and the frozen one, thawed with timers long due, must not run them again.
    await Bun.sleep(2_000);
    a.proc.kill("SIGSTOP");
    await Bun.sleep(FREEZE_MS);
    a.proc.kill("SIGCONT");
    await Bun.sleep(1_000);
    b.proc.kill("SIGSTOP");
    await Bun.sleep(FREEZE_MS);
    b.proc.kill("SIGCONT");
    await Bun.sleep(1_000);
    // Disabled through B.
    expect((await fetch(`${b.url}/v1/playbooks/${pb}`, { method: "PATCH", headers: r.headers, body: JSON.stringify({ enabled: false }) })).status).toBe(200);
    const stoppedAt = Date.now();

    // Every run's task ends (the demo answer is instant; the container start is what takes time).
    await waitFor(async () => (await r.sql`SELECT count(*)::int AS n FROM tasks WHERE playbook_id = ${pb} AND status NOT IN ('completed', 'failed', 'cancelled')`)[0].n === 0 || null, { timeoutMs: 60_000, what: "the runs to end" });
    const tasks = await r.sql`SELECT id, status, scheduled_for, error_code, error_message FROM tasks WHERE playbook_id = ${pb}`;
    const missed = await r.sql`SELECT status, scheduled_for, error_code FROM playbook_missed_runs WHERE playbook_id = ${pb}`;
    const slots = [...tasks, ...missed].map((row: { scheduled_for: string | number }) => Number(row.scheduled_for)).sort((x, y) => x - y);
    const detail = JSON.stringify({ tasks: tasks.map((t: any) => [Number(t.scheduled_for) % 100_000, t.status, ...(t.error_code ? [t.error_code, t.error_message] : [])]), missed: missed.map((m: any) => [Number(m.scheduled_for) % 100_000, m.status, m.error_code]) });
    // About one slot a second for 10 s.
    expect(slots.length, detail).toBeGreaterThanOrEqual(8);
    // Exactly once each: no scheduled_for twice among the tasks and the missed runs together.
    expect(new Set(slots).size, detail).toBe(slots.length);
    // None missing: consecutive slots are one second apart, from the first to the last.
    for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!, detail).toBe(1000);
    for (const s of slots) expect(s % 1000).toBe(0);
    expect(slots[slots.length - 1]!).toBeLessThanOrEqual(stoppedAt);
    // No run failed to start (a skipped slot — the previous run still going — is allowed and recorded).
    expect(missed.filter((m: { status: string }) => m.status !== "skipped"), detail).toEqual([]);
    expect(tasks.every((t: { status: string }) => t.status === "completed"), detail).toBe(true);
    // Both replicas ran some of the tasks (each while the other was frozen: the slots it claimed, or
    // the run it took over; a task ends where it last ran).
    const ran = [(await metric(a, "runcell_task_duration_seconds_count")) - tasksBefore[0]!, (await metric(b, "runcell_task_duration_seconds_count")) - tasksBefore[1]!];
    expect(ran[0]! + ran[1]!, detail).toBe(tasks.length);
    expect(ran[0], JSON.stringify(ran)).toBeGreaterThan(0);
    expect(ran[1], JSON.stringify(ran)).toBeGreaterThan(0);

    // Nothing more after the schedule was disabled.
    await Bun.sleep(1500);
    expect((await r.sql`SELECT count(*)::int AS n FROM tasks WHERE playbook_id = ${pb}`)[0].n).toBe(tasks.length);
  }, 120_000);
});
