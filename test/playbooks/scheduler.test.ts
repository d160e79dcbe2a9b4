/**
 * Persisted schedules with the binary's own scheduler, a SQLite file, dockerd and a local
 * Anthropic-format model server: a seconds-level schedule fires on its slots; a slot whose previous
 * run is still going is recorded as skipped; a slot refused by the profile's concurrency is
 * recorded with that error and notified; disabling stops it at once; a floor raised after it was
 * saved thins it; and across `kill -9` and 30 s
 * of downtime no slot runs twice and the missed ones run once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile, waitTask } from "../helpers/agent.ts";
import { removeInstanceWorkspaces, startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { cliAccount } from "../helpers/cli.ts";
import { sqlAllIn, sqlGet } from "../helpers/db.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { databaseArgs, dropDatabaseFor } from "../helpers/pg.ts";
import { spawnServer } from "../helpers/server-process.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { type Receiver, startReceiver } from "../notifications/receiver.ts";

let t: TestApp;
let mock: MockProviderServer;
let receiver: Receiver;
let alice: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic().script(() => ({ text: "scheduled work done" }));
  receiver = startReceiver();
  alice = await createUser(t);
  await api(t, "POST", "/v1/integrations", alice.bearer, { type: "webhook", config: { url: receiver.url } });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
  receiver.stop();
});

type Run = { task_id: string | null; trigger: string; status: string; scheduled_for: string | null; created_at: string; error: { code: string } | null };
const runsOf = async (id: string): Promise<Run[]> => (await api(t, "GET", `/v1/playbooks/${id}/runs?limit=100`, alice.bearer)).body.data;
async function playbook(profileId: string, over: Record<string, unknown>) {
  const r = await api(t, "POST", "/v1/playbooks", alice.bearer, { name: "every second", profile_id: profileId, prompt: "Tick.", ...over });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; next_run_at: string };
}
const disable = (id: string) => api(t, "PATCH", `/v1/playbooks/${id}`, alice.bearer, { enabled: false });

describe("in one process", () => {
  test("a seconds-level schedule fires once per slot, on time, as schedule runs", async () => {
    const profile = await createProfile(t, alice, { mock });
    const pb = await playbook(profile, { schedule: "* * * * * *" });
    const runs = await waitFor(async () => {
      const r = await runsOf(pb.id);
      return r.length >= 3 ? r : null;
    }, { timeoutMs: 15_000, what: "three scheduled runs" });
    await disable(pb.id);
    const slots = runs.map((r) => Date.parse(r.scheduled_for!)).sort();
    for (const r of runs) expect(r.trigger).toBe("schedule");
    expect(new Set(slots).size).toBe(slots.length);
    for (const s of slots) expect(s % 1000).toBe(0);
    for (const r of runs) expect(Date.parse(r.created_at) - Date.parse(r.scheduled_for!)).toBeLessThan(1000);
    for (const r of runs) if (r.task_id) await waitTask(t, alice, r.task_id);
  });

  test("a slot that comes while the previous run is still going is skipped and recorded; disabling stops the schedule at once", async () => {
    const profile = await createProfile(t, alice, { mock });
    mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Proceed?", options: [{ label: "yes" }] }] } }] });
    const pb = await playbook(profile, { schedule: "* * * * * *" });
    const runs = await waitFor(async () => {
      const r = await runsOf(pb.id);
      return r.filter((x) => x.status === "skipped").length >= 2 ? r : null;
    }, { timeoutMs: 15_000, what: "two skipped slots" });
    await disable(pb.id);
    const started = runs.filter((r) => r.task_id);
    expect(started).toHaveLength(1);
    expect(started[0]!.status).toBe("waiting_input");
    for (const s of runs.filter((r) => r.status === "skipped")) {
      expect(s).toMatchObject({ task_id: null, trigger: "schedule", error: null });
      expect(Date.parse(s.scheduled_for!)).toBeGreaterThan(Date.parse(started[0]!.scheduled_for!));
    }
    const count = (await runsOf(pb.id)).length;
    await Bun.sleep(2200);
    expect((await runsOf(pb.id)).length).toBe(count);
    await api(t, "POST", `/v1/tasks/${started[0]!.task_id}/answer`, alice.bearer, { answer: "yes" });
    await waitTask(t, alice, started[0]!.task_id!);
  });

  test("a slot that meets the profile's concurrency limit is recorded with that error and the owner is notified", async () => {
    const narrow = await createProfile(t, alice, { mock, limits: { max_concurrency: 1 } });
    const busy = await api(t, "POST", "/v1/sessions", alice.bearer, { profile_id: narrow });
    expect(busy.status).toBe(201);
    const pb = await playbook(narrow, { schedule: "* * * * * *", name: "crowded" });
    const refused = await waitFor(async () => (await runsOf(pb.id)).find((r) => r.status === "failed"), { timeoutMs: 10_000, what: "a refused slot" });
    await disable(pb.id);
    expect(refused).toMatchObject({ task_id: null, trigger: "schedule", error: { code: "CONCURRENCY_LIMIT" } });
    const note = await waitFor(() => receiver.received.map((r) => JSON.parse(r.body)).find((p) => p.playbook_id === pb.id), { what: "notification" });
    expect(note).toMatchObject({ source: "platform", urgency: "high" });
    expect(note.message).toContain("CONCURRENCY_LIMIT");
    expect(note.task_id).toBeUndefined();
    await api(t, "DELETE", `/v1/sessions/${busy.body.id}`, alice.bearer);
  });

  test("a finished run's workspace is stopped: runs one after another on a profile of max_concurrency 1 all start", async () => {
    const single = await createProfile(t, alice, { mock, limits: { max_concurrency: 1 } });
    const pb = await playbook(single, { schedule: "*/2 * * * * *", name: "one slot" });
    const runs = await waitFor(async () => {
      const r = (await runsOf(pb.id)).filter((x) => x.status === "completed");
      return r.length >= 3 ? r : null;
    }, { timeoutMs: 20_000, what: "three completed runs" });
    await disable(pb.id);
    expect((await runsOf(pb.id)).filter((r) => r.error?.code === "CONCURRENCY_LIMIT")).toEqual([]);
    // Each run's session keeps its workspace record and files, stopped.
    for (const r of runs) {
      const task = await waitTask(t, alice, r.task_id!);
      const ws = await waitFor(async () => {
        const w = (await api(t, "GET", "/v1/workspaces?limit=100", alice.bearer)).body.data.find((x: { session_id: string }) => x.session_id === task.session_id);
        return w?.status === "stopped" ? w : null;
      }, { what: "the run's workspace stopped" });
      expect(ws.status).toBe("stopped");
    }
  });

  test("a schedule saved under a lower min_schedule_interval keeps running, thinned to a raised one (nothing recorded for the slots passed over)", async () => {
    const profile = await createProfile(t, alice, { mock });
    const pb = await playbook(profile, { schedule: "* * * * * *", name: "thinned" });
    // The operator raises alice's floor after the schedule was saved (an override, as PATCH /admin/users/:id sets it).
    await t.app.services.users.adminPatch(alice.id, { policy: { min_schedule_interval: 3 } });
    try {
      const runs = await waitFor(async () => {
        const r = await runsOf(pb.id);
        return r.length >= 4 ? r : null;
      }, { timeoutMs: 25_000, what: "four scheduled runs" });
      await disable(pb.id);
      const slots = runs.map((r) => Date.parse(r.scheduled_for!)).sort();
      // (The first slot may have fired before the override: the gaps after the second are the floor's.)
      for (let i = 2; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBeGreaterThanOrEqual(3000);
      for (let i = 2; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBeLessThan(5000);
      for (const r of runs) if (r.task_id) await waitTask(t, alice, r.task_id);
    } finally {
      await t.app.services.users.adminPatch(alice.id, { policy: { min_schedule_interval: null } });
    }
  });

  test("deleting the playbook stops its schedule at once", async () => {
    const profile = await createProfile(t, alice, { mock });
    const pb = await playbook(profile, { schedule: "* * * * * *" });
    await waitFor(async () => (await runsOf(pb.id)).length > 0, { timeoutMs: 10_000, what: "a run" });
    expect((await api(t, "DELETE", `/v1/playbooks/${pb.id}`, alice.bearer)).status).toBe(204);
    const count = async () => (await sqlGet<{ n: number }>(t, "SELECT count(*) AS n FROM tasks WHERE playbook_id = ?", [pb.id]))!.n;
    const n = await count();
    await Bun.sleep(2200);
    expect(await count()).toBe(n);
  });
});

test("kill -9 mid-run and after 8 s of downtime: no slot runs twice, an interrupted run resumes, the missed slots run once at start", async () => {
  const dataDir = tempDir();
  // The PostgreSQL pass: the CLI works on the database spawnServer's server uses.
  const db = await databaseArgs(dataDir);
  const token = await cliAccount(dataDir, db, "sched@example.com", "t");
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const call = async (url: string, method: string, path: string, body?: unknown) => (await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })).json() as Promise<any>;

  let server = await spawnServer({ dataDir, flags: ["--log-level", "warn"] });
  const profile = await call(server.url, "POST", "/v1/profiles", {
    name: "k9",
    model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url },
    image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest",
    network: "none",
    limits: { max_concurrency: 100, memory_mb: 128, cpus: 0.2, pids: 64 },
  });
  const pb = await call(server.url, "POST", "/v1/playbooks", { name: "k9", profile_id: profile.id, prompt: "Tick.", schedule: "*/2 * * * * *" });
  /** Every slot with what became of it: tasks (with their status) and missed runs. */
  const slots = () =>
    sqlAllIn<{ s: number; kind: string; status: string }>(
      dataDir,
      "SELECT scheduled_for AS s, 'task' AS kind, status FROM tasks WHERE playbook_id = ? UNION ALL SELECT scheduled_for, 'missed', status FROM playbook_missed_runs WHERE playbook_id = ? ORDER BY s",
      [pb.id, pb.id],
      { readonly: true },
    );
  const nextSlotEdge = (offset: number) => Bun.sleep(2000 - (Date.now() % 2000) + offset);
  await waitFor(async () => (await slots()).length >= 2, { timeoutMs: 20_000, what: "runs before the first kill" });

  // 1. Killed 30 ms after a slot, while its claim, container start or model call is in flight; restarted at once.
  await nextSlotEdge(30);
  expect(await server.kill("SIGKILL")).not.toBe(0);
  const atFirstKill = await slots();
  server = await spawnServer({ dataDir, port: server.port, flags: ["--log-level", "warn"] });
  await waitFor(async () => (await slots()).filter((r) => r.kind === "task").every((r) => r.status === "completed"), { timeoutMs: 20_000, what: "the interrupted run completes" });

  // 2. Killed between slots (no run in flight), down for 8 s.
  await waitFor(async () => (await slots()).length >= atFirstKill.length + 2, { timeoutMs: 20_000, what: "runs after the first restart" });
  await nextSlotEdge(1000);
  await waitFor(async () => (await slots()).filter((r) => r.kind === "task").every((r) => r.status === "completed"), { timeoutMs: 10_000, what: "no run in flight" });
  expect(await server.kill("SIGKILL")).not.toBe(0);
  const killedAt = Date.now();
  const beforeDowntime = await slots();
  await Bun.sleep(8_000);
  const restartedAt = Date.now();
  server = await spawnServer({ dataDir, port: server.port, flags: ["--log-level", "warn"] });
  await waitFor(async () => (await slots()).some((r) => r.s > restartedAt), { timeoutMs: 20_000, what: "a regular run after the restart" });
  await call(server.url, "PATCH", `/v1/playbooks/${pb.id}`, { enabled: false });
  await waitFor(async () => (await slots()).filter((r) => r.kind === "task").every((r) => r.status === "completed"), { timeoutMs: 20_000, what: "every run completes" });
  const after = await slots();
  await server.kill("SIGTERM");

  // No slot ran (or was recorded) twice, and nothing claimed before a kill was lost.
  expect(new Set(after.map((r) => r.s)).size).toBe(after.length);
  for (const r of [...atFirstKill, ...beforeDowntime]) expect(after.some((a) => a.s === r.s)).toBe(true);
  // The run interrupted by the first kill resumed and completed; every run completed.
  for (const r of after.filter((x) => x.kind === "task")) expect(r.status).toBe("completed");
  // The ~4 slots missed while down: one run, at start, for the first of them.
  const missed = after.filter((r) => r.s > killedAt && r.s < restartedAt);
  expect(missed).toHaveLength(1);
  expect(missed[0]).toMatchObject({ kind: "task", s: Math.max(...beforeDowntime.map((r) => r.s)) + 2000 });
  // Then the schedule goes on, on its slots.
  const later = after.filter((r) => r.s >= restartedAt);
  expect(later.length).toBeGreaterThan(0);
  for (const r of later) expect(r.s % 2000).toBe(0);

  const [setting] = await sqlAllIn<{ value: string }>(dataDir, "SELECT CAST(value AS TEXT) AS value FROM settings WHERE key = 'workspaces.instance_id'", [], { readonly: true });
  removeInstanceWorkspaces(JSON.parse(setting!.value));
  await dropDatabaseFor(dataDir);
}, 120_000);
