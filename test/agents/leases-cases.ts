/**
 * The task leases' cases (src/agents/leases.ts), run on SQLite by test/agents/leases.test.ts and on
 * PostgreSQL by test/pg/leases.test.ts: two replicas ("rep_a", "rep_b") on one database with a
 * clock the test moves, taking, contending for, renewing, losing and releasing task leases.
 */
import { expect, test } from "bun:test";
import type { DB } from "../../src/db/client.ts";
import { sessions, users } from "../../src/db/tables.ts";
import { TaskLeases } from "../../src/agents/leases.ts";
import { Tasks, type TaskRow } from "../../src/agents/tasks.ts";

const LEASE = 10_000;

export function leaseCases(getDb: () => DB) {
  let clock = 1_000_000;
  const now = () => clock;
  let n = 0;

  /** A user, and a session with one task per status given (oldest first). */
  async function session(...statuses: TaskRow["status"][]): Promise<{ sid: string; ids: string[] }> {
    const db = getDb();
    const k = ++n;
    const sid = `sess_${k}`;
    await db.insert(users).values({ id: `usr_${k}`, email: `u${k}@example.com`, name: "u", role: "user", disabled: false, email_verified: false, created_at: 0, updated_at: 0 } as never);
    await db.insert(sessions).values({ id: sid, user_id: `usr_${k}`, profile_id: "prof_1", created_at: 0, updated_at: 0 } as never);
    const tasks = new Tasks(db, now);
    const ids: string[] = [];
    for (const status of statuses) {
      const t = await tasks.create({ userId: `usr_${k}`, sessionId: sid, profileId: "prof_1", prompt: "p", maxTurns: 5, maxBudgetUsd: 1 });
      if (status !== "queued") await tasks.update(t.id, { status });
      ids.push(t.id);
    }
    return { sid, ids };
  }

  const replica = (id: string, shared = true) => new TaskLeases(getDb(), now, id, LEASE, shared);
  const row = async (id: string) => (await new Tasks(getDb(), now).byId(id))!;

  test("a queued task is claimed with the lease in one statement; another replica cannot take it while it holds", async () => {
    const { ids } = await session("queued");
    const [a, b] = [replica("rep_a"), replica("rep_b")];
    const tasks = new Tasks(getDb(), now);
    const claimed = await tasks.claim(ids[0]!, clock, a.terms());
    expect(claimed).toMatchObject({ status: "running", started_at: clock, lease_owner: "rep_a", lease_expires_at: clock + LEASE });
    // Claimed once: a second claim (any replica) finds it no longer queued.
    expect(await tasks.claim(ids[0]!, clock, b.terms())).toBeUndefined();
    clock += LEASE - 1;
    expect(await b.acquire(ids[0]!)).toBeUndefined();
    expect(b.heldElsewhere(await row(ids[0]!))).toBe(true);
    expect(a.heldElsewhere(await row(ids[0]!))).toBe(false);
    // Its own lease: taken again (a second pump of the same replica).
    expect(await a.acquire(ids[0]!)).toMatchObject({ lease_owner: "rep_a", lease_expires_at: clock + LEASE });
  });

  test("renewals keep it; once it expires another replica takes it over and the first one's renewal fails", async () => {
    const { ids } = await session("running");
    const [a, b] = [replica("rep_a"), replica("rep_b")];
    expect(await a.acquire(ids[0]!)).toMatchObject({ lease_owner: "rep_a" });
    clock += LEASE - 1;
    expect(await a.renew(ids[0]!)).toBe(true);
    expect((await row(ids[0]!)).lease_expires_at).toBe(clock + LEASE);
    // Renewed: still held after the first lease would have run out.
    clock += 2;
    expect(await b.acquire(ids[0]!)).toBeUndefined();
    // A stalls past its lease: B takes over.
    clock += LEASE;
    expect(b.heldElsewhere(await row(ids[0]!))).toBe(false);
    expect(await b.acquire(ids[0]!)).toMatchObject({ status: "running", lease_owner: "rep_b", lease_expires_at: clock + LEASE });
    expect(await a.renew(ids[0]!)).toBe(false);
    expect(await a.acquire(ids[0]!)).toBeUndefined();
    expect(await b.renew(ids[0]!)).toBe(true);
  });

  test("renewal fails once the task ended elsewhere; ended tasks cannot be leased", async () => {
    const { ids } = await session("running");
    const a = replica("rep_a");
    await a.acquire(ids[0]!);
    // Going to waiting_input does not lose it (the loop is returning).
    await new Tasks(getDb(), now).update(ids[0]!, { status: "waiting_input" });
    expect(await a.renew(ids[0]!)).toBe(true);
    await new Tasks(getDb(), now).update(ids[0]!, { status: "cancelled" });
    expect(await a.renew(ids[0]!)).toBe(false);
    expect(await a.acquire(ids[0]!)).toBeUndefined();
  });

  test("hold renews on a timer and reports the lease lost once another replica has it", async () => {
    const { ids } = await session("running");
    const a = new TaskLeases(getDb(), Date.now, "rep_a", 1000, true);
    expect(a.renewMs).toBe(333);
    await a.acquire(ids[0]!);
    const first = (await row(ids[0]!)).lease_expires_at!;
    let lost = 0;
    const errors: unknown[] = [];
    const stop = a.hold(ids[0]!, () => lost++, (e) => errors.push(e));
    try {
      await Bun.sleep(800);
      expect((await row(ids[0]!)).lease_expires_at!).toBeGreaterThan(first);
      expect(lost).toBe(0);
      await new Tasks(getDb(), now).update(ids[0]!, { lease_owner: "rep_b" });
      await Bun.sleep(800);
      expect(lost).toBe(1);
      expect(errors).toEqual([]);
      // Reported once: renewals stopped, the other replica's lease untouched.
      expect((await row(ids[0]!)).lease_owner).toBe("rep_b");
    } finally {
      stop();
    }
  });

  test("hold: renewals that keep failing (the database unreachable) give the task up before the lease could run out", async () => {
    const { ids } = await session("running");
    const a = new TaskLeases(getDb(), Date.now, "rep_a", 1200, true);
    await a.acquire(ids[0]!);
    const acquiredAt = Date.now();
    const expires = (await row(ids[0]!)).lease_expires_at!;
    a.renew = async () => {
      throw new Error("database unreachable");
    };
    let lostAt = 0;
    const errors: unknown[] = [];
    const stop = a.hold(ids[0]!, () => (lostAt = Date.now()), (e) => errors.push(e));
    try {
      await Bun.sleep(1500);
      expect(errors.length).toBeGreaterThan(0);
      // Given up after the lease minus one renewal period, before another replica could take it.
      expect(lostAt).toBeGreaterThanOrEqual(acquiredAt + 1200 - 400 - 50);
      expect(lostAt).toBeLessThan(expires);
    } finally {
      stop();
    }
  });

  test("release lets another replica take it at once; a replica cannot release a lease it does not hold", async () => {
    const { ids } = await session("running");
    const [a, b] = [replica("rep_a"), replica("rep_b")];
    await a.acquire(ids[0]!);
    await b.release(ids[0]!);
    expect((await row(ids[0]!)).lease_owner).toBe("rep_a");
    await a.release(ids[0]!);
    expect(await row(ids[0]!)).toMatchObject({ lease_owner: null, lease_expires_at: null });
    expect(await b.acquire(ids[0]!)).toMatchObject({ lease_owner: "rep_b" });
  });

  test("orphaned: sessions whose work no live lease holds", async () => {
    const [a, b] = [replica("rep_a"), replica("rep_b")];
    const live = await session("running", "queued");
    await a.acquire(live.ids[0]!);
    const expired = await session("running");
    await a.acquire(expired.ids[0]!);
    clock += LEASE + 1;
    await a.renew(live.ids[0]!);
    const unleased = await session("running");
    const queued = await session("queued");
    const waiting = await session("waiting_input", "queued");
    const done = await session("completed", "failed");
    const found = new Set(await b.orphaned());
    const ours = [live, expired, unleased, queued, waiting, done].map((s) => s.sid);
    expect(ours.filter((s) => found.has(s))).toEqual([expired.sid, unleased.sid, queued.sid]);
  });

  test("a replica restarted with its id (same data dir) finds its own leases at start, and no one else's", async () => {
    const mine = await session("running", "queued");
    const other = await session("running");
    await replica("rep_r").acquire(mine.ids[0]!);
    await replica("rep_b").acquire(other.ids[0]!);
    // The same id after a crash: its live lease is its own.
    const restarted = replica("rep_r");
    expect(restarted.heldElsewhere(await row(mine.ids[0]!))).toBe(false);
    expect(restarted.heldElsewhere(await row(other.ids[0]!))).toBe(true);
    const atStart = await restarted.orphaned({ ours: true });
    expect(atStart).toContain(mine.sid);
    expect(atStart).not.toContain(other.sid);
    // Later (its tasks run in this process), the takeover round leaves its own sessions alone.
    expect(await restarted.orphaned()).not.toContain(mine.sid);
    expect(await restarted.acquire(mine.ids[0]!)).toMatchObject({ lease_owner: "rep_r" });
    expect(await restarted.acquire(other.ids[0]!)).toBeUndefined();
  });

  test("a new session's first task, stored under the opening lease: its replica's while the workspace is created, renewed while queued; taken over only once it runs out", async () => {
    const [a, b] = [replica("rep_a"), replica("rep_b")];
    const tasks = new Tasks(getDb(), now);
    const opened = async () => {
      const { sid } = await session();
      const lease = a.opening();
      expect(lease).toEqual({ lease_owner: "rep_a", lease_expires_at: clock + LEASE });
      const task = await tasks.create({ userId: sid.replace("sess_", "usr_"), sessionId: sid, profileId: "prof_1", prompt: "p", maxTurns: 5, maxBudgetUsd: 1, lease });
      expect(task).toMatchObject({ status: "queued", lease_owner: "rep_a" });
      return { sid, id: task.id };
    };
    // Opened, then pumped by its replica: no other replica finds it or can claim it; its own claim takes it.
    const pumped = await opened();
    expect(await b.orphaned()).not.toContain(pumped.sid);
    expect(await tasks.claim(pumped.id, clock, b.terms())).toBeUndefined();
    expect(await tasks.claim(pumped.id, clock, a.terms())).toMatchObject({ status: "running", lease_owner: "rep_a" });
    // A slow open: renewed while queued, it stays its replica's past the first lease.
    const slow = await opened();
    clock += LEASE - 1;
    expect(await a.renew(slow.id)).toBe(true);
    clock += LEASE - 1;
    expect(await b.orphaned()).not.toContain(slow.sid);
    expect(await tasks.claim(slow.id, clock, b.terms())).toBeUndefined();
    // Its replica died while it opened: once the lease runs out, another replica finds it and takes it.
    clock += 2;
    expect(await b.orphaned()).toContain(slow.sid);
    expect(await tasks.claim(slow.id, clock, b.terms())).toMatchObject({ status: "running", lease_owner: "rep_b" });
    // One server: stored without a lease.
    expect(replica("rep_a", false).opening()).toBeUndefined();
  });

  test("one server (not shared): every take wins, nothing is held elsewhere, nothing renewed on a timer", async () => {
    const { ids } = await session("running");
    const [a, b] = [replica("rep_a", false), replica("rep_b", false)];
    await a.acquire(ids[0]!);
    // A restarted server (a new id) resumes at once, lease or not.
    expect(await b.acquire(ids[0]!)).toMatchObject({ lease_owner: "rep_b" });
    expect(a.heldElsewhere(await row(ids[0]!))).toBe(false);
    const quick = new TaskLeases(getDb(), now, "rep_b", 1000, false);
    const before = (await row(ids[0]!)).lease_expires_at;
    let lost = 0;
    const stop = quick.hold(ids[0]!, () => lost++, () => {});
    await new Tasks(getDb(), now).update(ids[0]!, { lease_owner: "rep_c" });
    await Bun.sleep(600);
    stop();
    expect(lost).toBe(0);
    expect((await row(ids[0]!)).lease_expires_at).toBe(before);
  });
}
