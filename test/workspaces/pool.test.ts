/**
 * The warm pool against the real dockerd: members made from the profile (no secret in them),
 * taken by new sessions (ready at once, the member's container), refilled after a take, drained
 * when the profile's container changes, removed with the profile, adopted or removed at restart,
 * outside the owner's concurrency until taken, within the operator's total cap. And the start
 * gate's order (no Docker).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AppError } from "../../src/lib/errors.ts";
import type { ProfileRecord } from "../../src/schema/profile.ts";
import { StartGate } from "../../src/workspaces/gate.ts";
import type { PoolMember } from "../../src/workspaces/pool.ts";
import { LABEL_INSTANCE, LABEL_POOL, LABEL_SESSION, LABEL_WORKSPACE } from "../../src/workspaces/spec.ts";
import { startTestApp, type TestApp, tempDir } from "../helpers/app.ts";
import { sqlAllIn } from "../helpers/db.ts";
import { PG_SERVER } from "../helpers/pg.ts";
import { waitFor } from "../helpers/net.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { docker, sweepInstance } from "./helpers.ts";

const SECRET = "pool-secret-value-7f3a";
const LIMITS = { max_concurrency: 5, memory_mb: 256, cpus: 0.5, pids: 128 };

const errOf = (p: Promise<unknown>) => p.then(() => null, (e) => e as AppError);
const members = (t: TestApp, profileId: string): PoolMember[] =>
  ((t.app.services.workspaces.pool as unknown as { pools: Map<string, { ready: PoolMember[] }> }).pools.get(profileId)?.ready ?? []).slice();
const dockerMembers = async (t: TestApp, profileId: string) =>
  docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABEL_INSTANCE}=${t.app.services.workspaces.instanceId}`, `${LABEL_POOL}=${profileId}`] }) });
const gone = async (dockerId: string) => (await docker.getContainer(dockerId).inspect().then(() => false, (e) => e.statusCode === 404));

async function createProfile(t: TestApp, user: TestUser, body: Record<string, unknown>): Promise<ProfileRecord> {
  const res = await t.fetch("/v1/profiles", { method: "POST", headers: user.bearer, body: JSON.stringify({ image: t.config.workspaceImage, limits: LIMITS, ...body }) });
  expect(res.status).toBe(201);
  return (await res.json()) as ProfileRecord;
}
async function getProfile(t: TestApp, user: TestUser, id: string): Promise<ProfileRecord> {
  return (await (await t.fetch(`/v1/profiles/${id}`, { headers: user.bearer })).json()) as ProfileRecord;
}
async function patchProfile(t: TestApp, user: TestUser, id: string, body: Record<string, unknown>) {
  const res = await t.fetch(`/v1/profiles/${id}`, { method: "PATCH", headers: user.bearer, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as ProfileRecord;
}
const full = (t: TestApp, profileId: string, n: number) => waitFor(() => members(t, profileId).length === n || undefined, { timeoutMs: 30_000, what: `${n} pool members` });

describe("the warm pool", () => {
  let t: TestApp;
  let user: TestUser;

  beforeAll(async () => {
    t = await startTestApp({ flags: ["--max-warm-pool", "3", "--max-warm-pool-total", "5"] });
    user = await createUser(t);
    await t.app.services.secrets.put(user.id, "POOL_TOKEN", SECRET);
  });
  afterAll(async () => {
    await sweepInstance(t.app.services.workspaces.instanceId);
    await t.stop();
  });

  test("is made from the profile, carries no secret, and shows in GET /v1/profiles/:id", async () => {
    const p = await createProfile(t, user, { warm_pool: 2, env: { POOL_TOKEN: { secret: "POOL_TOKEN" }, PLAIN: "plain-value" } });
    expect(p.warm_pool).toBe(2);
    await full(t, p.id, 2);
    expect((await getProfile(t, user, p.id)).pool).toEqual({ size: 2, ready: 2, starting: 0 });
    const listed = await dockerMembers(t, p.id);
    expect(listed.length).toBe(2);
    for (const c of listed) {
      const info = await docker.getContainer(c.Id).inspect();
      expect(info.State.Running).toBe(true);
      expect(info.Name).toMatch(/^\/runcell-pool-ctr_/);
      expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
      expect(info.HostConfig.NetworkMode).toBe("none");
      expect(info.Config.Env ?? []).not.toContainEqual(expect.stringContaining("POOL_TOKEN"));
      const dump = JSON.stringify(info);
      expect(dump).not.toContain(SECRET);
      expect(dump).not.toContain("plain-value");
    }
    await t.app.services.profiles.delete(user.id, p.id);
  });

  test("a new session takes a member: ready at once, the member's container, env per exec; then the pool refills", async () => {
    const p = await createProfile(t, user, { warm_pool: 2, env: { POOL_TOKEN: { secret: "POOL_TOKEN" } } });
    await full(t, p.id, 2);
    const before = members(t, p.id).map((m) => m.dockerId);
    const t0 = performance.now();
    const { session, workspace } = await t.app.services.sessionLifecycle.start(user.id, p.id);
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(500);
    expect(before).toContain(workspace.docker_id!);
    expect(workspace).toMatchObject({ status: "running", session_id: session.id, profile_id: p.id, name: `runcell-${workspace.id}` });
    // The rename is cosmetic and runs behind session.ready.
    const info = await waitFor(async () => {
      const i = await docker.getContainer(workspace.docker_id!).inspect();
      return i.Name === `/runcell-${workspace.id}` ? i : undefined;
    }, { timeoutMs: 10_000, what: "the rename" });
    expect(info.Config.Labels[LABEL_WORKSPACE]).toBe(workspace.id);
    // Docker labels cannot change: the member's stay (docs/workspaces.md); the record holds the session.
    expect(info.Config.Labels).toMatchObject({ [LABEL_SESSION]: "", [LABEL_POOL]: p.id });
    const r = await t.app.services.workspaces.exec(session.id, { cmd: ["/bin/sh", "-c", 'echo "$POOL_TOKEN" > /workspace/t; cat /workspace/t | wc -c'] });
    expect(r.output.trim()).toBe(String(SECRET.length + 1));
    // The pool refills to 2 with a new member; the taken one is no longer in it.
    await waitFor(() => members(t, p.id).length === 2 && !members(t, p.id).some((m) => m.dockerId === workspace.docker_id) || undefined, { timeoutMs: 30_000 });
    const text = await t.app.services.metrics.render();
    expect(text).toMatch(/runcell_warm_pool_takes_total\{outcome="hit"\} [1-9]/);
    expect(text).toMatch(/runcell_warm_pool_refill_seconds_count [1-9]/);
    // Deleting the session removes the taken container like any workspace.
    await t.app.services.sessionLifecycle.delete(user.id, session.id);
    expect(await gone(workspace.docker_id!)).toBe(true);
    await t.app.services.profiles.delete(user.id, p.id);
  });

  test("a member that died in the pool is replaced at the session's first use, on the same volume", async () => {
    const p = await createProfile(t, user, { warm_pool: 1 });
    await full(t, p.id, 1);
    const [member] = members(t, p.id);
    await docker.getContainer(member!.dockerId).kill();
    const { session, workspace } = await t.app.services.sessionLifecycle.start(user.id, p.id);
    expect(workspace.docker_id).toBe(member!.dockerId);
    const r = await t.app.services.workspaces.exec(session.id, { cmd: ["/bin/sh", "-c", "echo alive > /workspace/f; cat /workspace/f"] });
    expect(r.output.trim()).toBe("alive");
    const row = (await t.app.services.workspaces.forSession(session.id))!;
    expect(row.status).toBe("running");
    expect(row.volume).toBe(member!.volume);
    await t.app.services.sessionLifecycle.delete(user.id, session.id);
    await t.app.services.profiles.delete(user.id, p.id);
  });

  test("members do not count against the profile's concurrency until taken", async () => {
    const p = await createProfile(t, user, { warm_pool: 2, limits: { ...LIMITS, max_concurrency: 1 } });
    await full(t, p.id, 2);
    const a = await t.app.services.sessionLifecycle.start(user.id, p.id);
    await waitFor(() => members(t, p.id).length === 2 || undefined, { timeoutMs: 30_000 });
    const held = members(t, p.id).map((m) => m.dockerId).sort();
    const err = await errOf(t.app.services.sessionLifecycle.start(user.id, p.id));
    expect(err?.code).toBe("CONCURRENCY_LIMIT");
    // The refused session's member went back to the pool.
    expect(members(t, p.id).map((m) => m.dockerId).sort()).toEqual(held);
    for (const id of held) expect(await gone(id)).toBe(false);
    await t.app.services.sessionLifecycle.delete(user.id, a.session.id);
    await t.app.services.profiles.delete(user.id, p.id);
  });

  test("a change to the container drains the pool; other changes keep it; deletion removes it", async () => {
    const p = await createProfile(t, user, { warm_pool: 2 });
    await full(t, p.id, 2);
    const first = members(t, p.id).map((m) => m.dockerId);
    await patchProfile(t, user, p.id, { name: "renamed", system_prompt: "another prompt" });
    await Bun.sleep(200);
    expect(members(t, p.id).map((m) => m.dockerId)).toEqual(first);

    await patchProfile(t, user, p.id, { limits: { memory_mb: 320 } });
    await waitFor(async () => ((await Promise.all(first.map(gone))).every(Boolean) ? true : undefined), { timeoutMs: 30_000 });
    await full(t, p.id, 2);
    for (const m of members(t, p.id)) expect((await docker.getContainer(m.dockerId).inspect()).HostConfig.Memory).toBe(320 * 1024 * 1024);

    await patchProfile(t, user, p.id, { warm_pool: 1 });
    await waitFor(async () => ((await dockerMembers(t, p.id)).length === 1 ? true : undefined), { timeoutMs: 30_000 });
    expect((await getProfile(t, user, p.id)).pool).toEqual({ size: 1, ready: 1, starting: 0 });

    const last = members(t, p.id).map((m) => m.dockerId);
    expect((await t.fetch(`/v1/profiles/${p.id}`, { method: "DELETE", headers: user.bearer })).status).toBe(204);
    await waitFor(async () => ((await Promise.all(last.map(gone))).every(Boolean) ? true : undefined), { timeoutMs: 30_000 });
    expect((await dockerMembers(t, p.id)).length).toBe(0);
  });

  test("a disabled user's pools are emptied and held; enabled again, they refill", async () => {
    const owner = await createUser(t);
    const p = await createProfile(t, owner, { warm_pool: 1 });
    await full(t, p.id, 1);
    const before = members(t, p.id).map((m) => m.dockerId);
    await t.app.services.users.adminPatch(owner.id, { disabled: true });
    await waitFor(async () => ((await Promise.all(before.map(gone))).every(Boolean) ? true : undefined), { timeoutMs: 30_000, what: "the member removed" });
    // Held: a refill of every pool (as after room frees up) makes none for them.
    await t.app.services.workspaces.pool.refillAll();
    await Bun.sleep(500);
    expect((await dockerMembers(t, p.id)).length).toBe(0);
    await t.app.services.users.adminPatch(owner.id, { disabled: false });
    await full(t, p.id, 1);
    expect((await t.fetch(`/v1/profiles/${p.id}`, { method: "DELETE", headers: owner.bearer })).status).toBe(204);
  });

  test("the operator's caps: per profile (refused above it) and in total across profiles", async () => {
    const res = await t.fetch("/v1/profiles", { method: "POST", headers: user.bearer, body: JSON.stringify({ image: t.config.workspaceImage, limits: LIMITS, warm_pool: 4 }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: "VALIDATION_FAILED", details: { limit: "max_warm_pool", max: 3 } });
    const a = await createProfile(t, user, { warm_pool: 3 });
    const b = await createProfile(t, user, { warm_pool: 3 });
    await waitFor(() => (t.app.services.workspaces.pool.totals().ready === 5 ? true : undefined), { timeoutMs: 40_000 });
    await Bun.sleep(300);
    expect(t.app.services.workspaces.pool.total).toBe(5);
    // Room freed by one profile goes to the other.
    await t.app.services.profiles.delete(user.id, a.id);
    await full(t, b.id, 3);
    await t.app.services.profiles.delete(user.id, b.id);
  });
});

describe("the warm pool across a restart", () => {
  test("members are adopted when their profile still wants them, removed when its container changed", async () => {
    const dataDir = tempDir();
    let t = await startTestApp({ dataDir, keepDataDir: true });
    const user = await createUser(t);
    const p = await createProfile(t, user, { warm_pool: 2 });
    await full(t, p.id, 2);
    const first = members(t, p.id).map((m) => m.dockerId).sort();
    await t.stop();
    for (const id of first) expect(await gone(id)).toBe(false);

    t = await startTestApp({ dataDir, keepDataDir: true });
    await full(t, p.id, 2);
    expect(members(t, p.id).map((m) => m.dockerId).sort()).toEqual(first);
    expect(t.logs.some((l) => l.includes("warm pool reconciled") && l.includes("adopted"))).toBe(true);
    // A session takes an adopted member.
    const { workspace } = await t.app.services.sessionLifecycle.start(user.id, p.id);
    expect(first).toContain(workspace.docker_id!);
    await full(t, p.id, 2);
    const second = members(t, p.id).map((m) => m.dockerId);
    await t.stop();

    // The profile's memory changed while the server was down: its members no longer fit.
    const [row] = await sqlAllIn<{ limits: string | ProfileRecord["limits"] }>(dataDir, "SELECT limits FROM profiles WHERE id = ?", [p.id]);
    const limits = row!.limits;
    const changed = { ...(typeof limits === "string" ? JSON.parse(limits) : limits), memory_mb: 288 };
    // (PostgreSQL's column is jsonb: the text is cast, as the app's own writes do.)
    await sqlAllIn(dataDir, `UPDATE profiles SET limits = ${PG_SERVER ? "CAST(CAST(? AS text) AS jsonb)" : "?"} WHERE id = ?`, [JSON.stringify(changed), p.id]);
    t = await startTestApp({ dataDir, keepDataDir: true });
    await waitFor(async () => ((await Promise.all(second.map(gone))).every(Boolean) ? true : undefined), { timeoutMs: 30_000 });
    await full(t, p.id, 2);
    for (const m of members(t, p.id)) expect((await docker.getContainer(m.dockerId).inspect()).HostConfig.Memory).toBe(288 * 1024 * 1024);
    // The taken one is a workspace, untouched.
    expect((await docker.getContainer(workspace.docker_id!).inspect()).State.Running).toBe(true);
    await sweepInstance(t.app.services.workspaces.instanceId);
    await t.stop();
  });
});

describe("the start gate", () => {
  test("runs at most `limit` at once, in order, session starts before pool refills, with queue positions", async () => {
    const gate = new StartGate(() => 2);
    const order: string[] = [];
    const positions: [string, number][] = [];
    let inFlight = 0;
    let peak = 0;
    const job = (name: string) => async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await Bun.sleep(20);
      order.push(name);
      inFlight--;
    };
    const all = [
      gate.run("session", job("s1")),
      gate.run("session", job("s2")),
      gate.run("pool", job("p1"), (n) => positions.push(["p1", n])),
      gate.run("session", job("s3"), (n) => positions.push(["s3", n])),
      gate.run("session", job("s4"), (n) => positions.push(["s4", n])),
    ];
    expect(gate.waiting).toBe(3);
    await Promise.all(all);
    expect(peak).toBe(2);
    expect(order.slice(2)).toEqual(["s3", "s4", "p1"]);
    expect(positions).toEqual([["p1", 1], ["s3", 1], ["s4", 2]]);
    expect(gate.running).toBe(0);
  });

  test("refills are held to their own limit (one while the server is busy), sessions to the gate's; they catch up once it grows", async () => {
    let busy = true;
    const gate = new StartGate(() => 4, {}, () => (busy ? 1 : 4));
    const inFlight = { pool: 0, session: 0 };
    const peak = { pool: 0, session: 0, all: 0 };
    const releases: (() => void)[] = [];
    const job = (kind: "pool" | "session") => () =>
      new Promise<void>((resolve) => {
        inFlight[kind]++;
        peak[kind] = Math.max(peak[kind], inFlight[kind]);
        peak.all = Math.max(peak.all, inFlight.pool + inFlight.session);
        releases.push(() => {
          inFlight[kind]--;
          resolve();
        });
      });
    const settle = () => new Promise((r) => setTimeout(r, 5));
    const pool = Array.from({ length: 6 }, () => gate.run("pool", job("pool")));
    await settle();
    expect(inFlight.pool).toBe(1);
    // Session starts still get the gate's whole width beside the refill.
    const sessions = Array.from({ length: 3 }, () => gate.run("session", job("session")));
    await settle();
    expect(inFlight.session).toBe(3);
    releases.shift()!(); // the refill ends: its slot goes to the next refill only within the refills' limit
    await settle();
    expect(inFlight.pool).toBe(0);
    while (inFlight.session > 0) {
      releases.shift()!();
      await settle();
    }
    expect(inFlight.pool).toBe(1);
    // The server is idle again: at the next release, the waiting refills take every free slot.
    busy = false;
    releases.shift()!();
    await settle();
    expect(inFlight.pool).toBe(4);
    while (releases.length) {
      releases.shift()!();
      await settle();
    }
    await Promise.all([...pool, ...sessions]);
    expect(peak.pool).toBe(4);
    expect(peak.all).toBeLessThanOrEqual(4);
    expect(gate.running).toBe(0);
    expect(gate.waiting).toBe(0);
  });
});
