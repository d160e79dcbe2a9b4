/**
 * The outbox's claim, one pass over the due rows, against the real database (SQLite's prepared
 * statement; in the PostgreSQL pass the unit with FOR UPDATE SKIP LOCKED): which due rows a pass
 * takes under the fairness rules. Per webhook its oldest due rows up to its cap (1 when failing);
 * first attempts before shared ones; shared ones (a webhook's 2nd+ in flight, any failing
 * webhook's) only while more than `reserved` slots stay free; oldest due first within each.
 * The app's own worker is stopped: each test's Server (an Outbox and the attempts in flight it
 * claimed, as the worker counts them) is a server of its own, so only its own claims count.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import { type Fairness, Outbox } from "../../src/notifications/outbox.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { transact } from "../../src/db/unit.ts";
import { sqlRun } from "../helpers/db.ts";
import { api, createUser } from "../helpers/users.ts";

let t: TestApp;
const webhooks: Record<string, { userId: string; integrationId: string }> = {};
beforeAll(async () => {
  t = await startTestApp();
  await t.app.services.notifications.worker.stop();
  for (const name of ["A", "B", "C", "D"]) {
    const u = await createUser(t);
    // Never contacted: nothing is sent here.
    const res = await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: `http://127.0.0.1:9/${name}` } });
    expect(res.status).toBe(201);
    webhooks[name] = { userId: u.id, integrationId: res.body.id as string };
  }
});
afterAll(() => t?.stop());
// Each test starts with an empty outbox.
beforeEach(() => sqlRun(t, "UPDATE notification_log SET status = 'failed', lease_id = NULL, lease_expires_at = NULL WHERE status = 'pending'"));

const NOW = 1_900_000_000_000;
const names = new Map<string, string>();

/** Queues one notification to webhook `w` ("A"…"D"), due at NOW − 1000 + `due`; answers its label, e.g. "A3". */
async function row(w: string, due: number): Promise<string> {
  const q = await t.app.services.notifications.enqueue({ userId: webhooks[w]!.userId, source: "agent", message: `${w}${due}` });
  await sqlRun(t, "UPDATE notification_log SET next_attempt_at = ? WHERE id = ?", [NOW - 1000 + due, q!.id]);
  names.set(q!.id, `${w}${due}`);
  return `${w}${due}`;
}

/** A server's outbox and its attempts in flight per integration (what the worker counts; nothing here ends one). */
type Server = { outbox: Outbox; busy: Map<string, number> };
const newServer = (): Server => ({ outbox: new Outbox(t.app.services.db, t.app.services.sqlite, [1000]), busy: new Map() });

function fair(server: Server, opts: { failing?: string[]; reserved?: number } = {}): Fairness {
  return { perIntegration: 4, failing: (opts.failing ?? []).map((w) => webhooks[w]!.integrationId), reserved: opts.reserved ?? 8, busy: server.busy };
}

/** One claim by `server` with `limit` free slots; what it takes is in flight on it from then on. */
async function claim(server: Server, limit: number, opts: { failing?: string[]; reserved?: number } = {}): Promise<string[]> {
  const claimed = await server.outbox.step([], NOW, limit, 60_000, fair(server, opts));
  for (const c of claimed) if (c.integration_id) server.busy.set(c.integration_id, (server.busy.get(c.integration_id) ?? 0) + 1);
  return claimed.map((c) => names.get(c.id)!).sort();
}

test("per webhook its oldest due rows up to the cap; another webhook's rows are not held up by that backlog; the cap counts this server's attempts in flight", async () => {
  for (let i = 1; i <= 6; i++) await row("A", i);
  await row("B", 10);
  await row("B", 11);
  const server = newServer();
  expect(await claim(server, 32)).toEqual(["A1", "A2", "A3", "A4", "B10", "B11"]);
  // A has 4 in flight: its two other due rows wait; B takes two more.
  await row("B", 12);
  await row("B", 13);
  expect(await claim(server, 26)).toEqual(["B12", "B13"]);
  expect(await claim(server, 24)).toEqual([]);
  // Another server does not count these attempts: it takes A's remaining two.
  expect(await claim(newServer(), 32)).toEqual(["A5", "A6"]);
});

test("a claim takes at most the free slots: first attempts (one per webhook) before further ones, each oldest due first", async () => {
  await row("A", 1);
  await row("B", 2);
  await row("A", 3);
  await row("C", 4);
  await row("D", 5);
  const server = newServer();
  // 3 free (none reserved here): the oldest three first attempts; A3, older than C4 and D5, is A's second.
  expect(await claim(server, 3, { reserved: 0 })).toEqual(["A1", "B2", "C4"]);
  expect(await claim(server, 5, { reserved: 0 })).toEqual(["A3", "D5"]);
});

test("a failing webhook gets one attempt in flight; the others keep their cap", async () => {
  for (let i = 1; i <= 3; i++) await row("C", i);
  for (let i = 4; i <= 6; i++) await row("A", i);
  const server = newServer();
  expect(await claim(server, 32, { failing: ["C"] })).toEqual(["A4", "A5", "A6", "C1"]);
  expect(await claim(server, 28, { failing: ["C"] })).toEqual([]);
});

test("reserved slots: with few free, only first attempts of webhooks that are not failing are taken", async () => {
  for (let i = 1; i <= 4; i++) await row("A", i);
  await row("B", 5);
  await row("B", 6);
  await row("C", 7); // failing
  await row("D", 8);
  // 10 free, 8 reserved, 3 first attempts (A1, B5, D8): no room left for shared ones.
  expect(await claim(newServer(), 10, { failing: ["C"] })).toEqual(["A1", "B5", "D8"]);
});

test("reserved slots: shared attempts fill what the firsts leave above the reserve, oldest due first", async () => {
  for (let i = 1; i <= 4; i++) await row("A", i);
  await row("B", 5);
  await row("B", 6);
  await row("C", 7); // failing
  // 13 free: firsts A1 and B5, then 13 − 8 − 2 = 3 shared: A2, A3, A4 (older than B6 and C7).
  const server = newServer();
  expect(await claim(server, 13, { failing: ["C"] })).toEqual(["A1", "A2", "A3", "A4", "B5"]);
  // Now 8 free: the reserve only; B6 and C7 wait, and no timer is set for them.
  expect(await claim(server, 8, { failing: ["C"] })).toEqual([]);
  expect(await server.outbox.nextDueAt(fair(server, { failing: ["C"] }), 8)).toBeNull();
  // A first attempt of another webhook still gets a slot, and is due at its time.
  await row("D", 900);
  expect(await server.outbox.nextDueAt(fair(server, { failing: ["C"] }), 8)).toBe(NOW - 100);
  expect(await claim(server, 8, { failing: ["C"] })).toEqual(["D900"]);
  // With a slot above the reserve, the oldest shared row goes.
  expect(await server.outbox.nextDueAt(fair(server, { failing: ["C"] }), 9)).toBe(NOW - 1000 + 6);
  expect(await claim(server, 9, { failing: ["C"] })).toEqual(["B6"]);
});

// SQLite's prepared claim (the single-server hot path), and the PostgreSQL unit: there the claim
// took 3–5 ms with ~30 due rows and 22–29 ms with ~5,000 until the walk's closing NULL row stopped
// scanning every due row and the picked ids were looked up as one array (now 3–4 and 5 ms; the
// backlog is inserted just before, so the planner has no statistics of it yet).
test("a claim's cost does not grow with one webhook's backlog: it reads each webhook's oldest few due rows, never ranks them all", async () => {
  const s = t.app.services;
  /** The fastest of 5 claims (A's cap: 4 rows), each by an Outbox of its own (earlier claims' rows are leased, so not due). */
  const fastest = async () => {
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const server = newServer();
      expect((await server.outbox.step([], NOW, 32, 60_000, fair(server))).length).toBe(4);
      best = Math.min(best, performance.now() - t0);
    }
    return best;
  };
  for (let i = 1; i <= 30; i++) await row("A", i);
  const small = await fastest();
  // 5,000 more due rows of A (one transaction), then the same claims again.
  await transact(s.db, function* (tx) {
    for (let i = 0; i < 5000; i++) yield* s.notifications.enqueue({ userId: webhooks.A!.userId, source: "agent", message: `backlog ${i}` }, tx);
  });
  await sqlRun(t, "UPDATE notification_log SET next_attempt_at = ? WHERE status = 'pending' AND lease_id IS NULL AND next_attempt_at > ?", [NOW - 500, NOW - 500]);
  const big = await fastest();
  console.log(`claim of 4 with ~30 due rows: ${small.toFixed(2)} ms; with ~5,000: ${big.toFixed(2)} ms`);
  // Ranking every due row took ~1.5 ms per 1,000 rows on SQLite (~8 ms here).
  expect(big).toBeLessThan(small * 3 + 4);
}, 60_000);
