/**
 * Deleting a session removes its tasks, not what they spent: their usage is kept in
 * `deleted_task_usage` (written in the deletion's transaction), so the monthly spend cap
 * (monthly_spend_usd), GET /v1/me's month_spend_usd and GET /v1/usage (per day, per profile, any
 * range) read the same figures after DELETE /v1/sessions/:id as before it, and the cap keeps
 * refusing. Runs on SQLite, and on PostgreSQL in the PostgreSQL pass.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { tasks } from "../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { seedFinishedTask } from "../helpers/db.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
const HOUR = 3_600_000;

// A profile is paid by the server only when the server has the provider's key (vault/secrets.ts paidByServer).
const savedKey = process.env.ANTHROPIC_API_KEY;
beforeAll(async () => {
  process.env.ANTHROPIC_API_KEY = "sk-ant-server-key-for-the-test";
  t = await startTestApp({ policy: "defaults", flags: ["--monthly-spend-usd", "0.01"] });
});
afterAll(async () => {
  await t.stop();
  if (savedKey === undefined) delete process.env.ANTHROPIC_API_KEY;
  else process.env.ANTHROPIC_API_KEY = savedKey;
});

const auth = (u: TestUser) => ({ authorization: `Bearer ${u.token}` });

/** A finished task in a session of its own (seedFinishedTask makes both); its id and its session's. */
async function seedIn(u: TestUser, profileId: string, costUsd: number, at: number, serverPaid = true) {
  const id = await seedFinishedTask(t, { userId: u.id, profileId, costUsd, serverPaid, at, inputTokens: 1000, outputTokens: 20, turns: 1 });
  const row = (await t.app.services.db.select({ session_id: tasks.session_id }).from(tasks).where(eq(tasks.id, id)))[0]!;
  return { taskId: id, sessionId: row.session_id };
}

/** Everything the user can read about their spend: /v1/me, and /v1/usage per day and per profile over several ranges. */
async function figures(u: TestUser, ranges: string[]) {
  const me = await api(t, "GET", "/v1/me", auth(u));
  expect(me.status).toBe(200);
  const reports: unknown[] = [];
  for (const q of ranges) {
    for (const group of ["day", "profile"]) {
      const r = await api(t, "GET", `/v1/usage?${q}&group_by=${group}`, auth(u));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      reports.push({ q, group, data: r.body.data, totals: r.body.totals });
    }
  }
  return { spend: me.body.usage.month_spend_usd as number, reports };
}

describe("a deleted session's tasks keep counting", () => {
  test("spend, /v1/me and /v1/usage are unchanged by DELETE /v1/sessions/:id; the cap still refuses", async () => {
    const u = await createUser(t);
    const p = await api(t, "POST", "/v1/profiles", auth(u), { name: "paid", model: { provider: "anthropic" } });
    expect(p.status, JSON.stringify(p.body)).toBe(201);
    const profileId = p.body.id as string;
    const now = Date.now();
    // Two sessions with server-paid tasks at different hours, one with a task on the user's own key.
    const first = await seedIn(u, profileId, 0.006, now - 2 * HOUR);
    const second = await seedIn(u, profileId, 0.005, now - HOUR);
    await seedIn(u, profileId, 0.25, now - HOUR, false);
    const day = new Date(now).toISOString().slice(0, 10);
    const ranges = [
      "", // the default range (the last 30 days)
      `from=${day}&to=${new Date(now + 86_400_000).toISOString().slice(0, 10)}`,
      // A range that starts between the two tasks: only the second one is in it.
      `from=${new Date(now - 90 * 60_000).toISOString()}&to=${new Date(now + 60_000).toISOString()}`,
    ];
    const before = await figures(u, ranges);
    expect(before.spend).toBe(0.011);

    const refused = await api(t, "POST", "/v1/tasks", auth(u), { profile_id: profileId, prompt: "hi" });
    expect(refused.status).toBe(402);
    expect(refused.body.code).toBe("BUDGET_EXCEEDED");

    for (const s of [first.sessionId, second.sessionId]) {
      const del = await api(t, "DELETE", `/v1/sessions/${s}`, auth(u));
      expect(del.status, JSON.stringify(del.body)).toBe(204);
    }
    expect(await t.app.services.db.select().from(tasks).where(eq(tasks.id, first.taskId))).toEqual([]);

    const after = await figures(u, ranges);
    expect(after).toEqual(before);
    expect(await t.app.services.policy.monthSpend(u.id)).toBe(0.011);
    const still = await api(t, "POST", "/v1/tasks", auth(u), { profile_id: profileId, prompt: "hi" });
    expect(still.status).toBe(402);
    expect(still.body.details).toEqual({ limit: "monthly_spend_usd", max: 0.01, spent: 0.011 });
  });

  test("another user's deleted sessions never count; last month's deleted spend is not this month's", async () => {
    const u = await createUser(t);
    const other = await createUser(t);
    const p = await api(t, "POST", "/v1/profiles", auth(u), { name: "paid", model: { provider: "anthropic" } });
    const o = await api(t, "POST", "/v1/profiles", auth(other), { name: "paid", model: { provider: "anthropic" } });
    const monthStart = new Date();
    monthStart.setUTCDate(1);
    monthStart.setUTCHours(0, 0, 0, 0);
    const old = await seedIn(u, p.body.id, 5, monthStart.getTime() - HOUR);
    const theirs = await seedIn(other, o.body.id, 7, Date.now());
    expect((await api(t, "DELETE", `/v1/sessions/${old.sessionId}`, auth(u))).status).toBe(204);
    expect((await api(t, "DELETE", `/v1/sessions/${theirs.sessionId}`, auth(other))).status).toBe(204);
    expect((await api(t, "GET", "/v1/me", auth(u))).body.usage.month_spend_usd).toBe(0);
    expect((await api(t, "GET", "/v1/me", auth(other))).body.usage.month_spend_usd).toBe(7);
    // Still in the user's usage report, on its day.
    const q = `from=${new Date(monthStart.getTime() - 86_400_000).toISOString().slice(0, 10)}&to=${monthStart.toISOString().slice(0, 10)}`;
    const mine = await api(t, "GET", `/v1/usage?${q}`, auth(u));
    expect(mine.body.data.map((b: { tasks: number; cost_usd: number }) => [b.tasks, b.cost_usd])).toEqual([[1, 5]]);
  });

  test("a day or a profile with live tasks and deleted ones sums both; a profile with only deleted tasks keeps its name while it exists", async () => {
    const u = await createUser(t);
    const profile = async (name: string) => (await api(t, "POST", "/v1/profiles", auth(u), { name, model: { provider: "demo" } })).body.id as string;
    const [alpha, beta, gone] = [await profile("alpha"), await profile("beta"), await profile("gone")];
    const DAY = 86_400_000;
    const d1 = Math.floor(Date.now() / DAY) * DAY - 2 * DAY;
    const seed = (profileId: string, at: number, costUsd: number, tokens: number) =>
      seedFinishedTask(t, { userId: u.id, profileId, costUsd, at, inputTokens: tokens, outputTokens: tokens / 10, turns: 1 });
    await seed(alpha, d1 + HOUR, 0.002, 100);
    const deleted = [await seedIn(u, alpha, 0.003, d1 + 2 * HOUR), await seedIn(u, beta, 0.004, d1 + DAY + HOUR), await seedIn(u, gone, 0.0005, d1 + DAY + 2 * HOUR)];
    for (const d of deleted) expect((await api(t, "DELETE", `/v1/sessions/${d.sessionId}`, auth(u))).status).toBe(204);
    expect((await api(t, "DELETE", `/v1/profiles/${gone}`, auth(u))).status).toBe(204);
    const q = `from=${new Date(d1).toISOString().slice(0, 10)}&to=${new Date(d1 + 2 * DAY).toISOString().slice(0, 10)}`;
    const day = (await api(t, "GET", `/v1/usage?${q}`, auth(u))).body;
    expect(day.data).toEqual([
      { key: new Date(d1).toISOString().slice(0, 10), profile_name: null, tasks: 2, input_tokens: 1100, output_tokens: 30, cost_usd: 0.005 },
      { key: new Date(d1 + DAY).toISOString().slice(0, 10), profile_name: null, tasks: 2, input_tokens: 2000, output_tokens: 40, cost_usd: 0.0045 },
    ]);
    expect(day.totals).toEqual({ tasks: 4, input_tokens: 3100, output_tokens: 70, cost_usd: 0.0095 });
    const byProfile = (await api(t, "GET", `/v1/usage?${q}&group_by=profile`, auth(u))).body;
    expect(byProfile.data).toEqual([
      { key: alpha, profile_name: "alpha", tasks: 2, input_tokens: 1100, output_tokens: 30, cost_usd: 0.005 },
      { key: beta, profile_name: "beta", tasks: 1, input_tokens: 1000, output_tokens: 20, cost_usd: 0.004 },
      { key: gone, profile_name: null, tasks: 1, input_tokens: 1000, output_tokens: 20, cost_usd: 0.0005 },
    ]);
    expect(byProfile.totals).toEqual(day.totals);
  });
});
