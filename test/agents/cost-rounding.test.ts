/**
 * Costs are shown rounded to 1e-9 USD everywhere (docs/providers.md), like the cost of a model
 * request itself: a task, its session, a playbook run, GET /v1/usage and the monthly spend agree,
 * so the sum of a session's task costs is the session's cost and the usage report's. Three tasks
 * of $0.00000045 each used to show $0 each while their session showed $0.000001.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { sessions, tasks } from "../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { seedFinishedTask } from "../helpers/db.ts";
import { api, createUser } from "../helpers/users.ts";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.stop());

describe("cost rounding", () => {
  test("three tasks of $4.5e-7 in one session: each task, the session, /v1/usage and the month's spend agree", async () => {
    const u = await createUser(t);
    const auth = { authorization: `Bearer ${u.token}` };
    const p = await api(t, "POST", "/v1/profiles", auth, { name: "cheap", model: { provider: "anthropic" } });
    const { db } = t.app.services;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await seedFinishedTask(t, { userId: u.id, profileId: p.body.id, costUsd: 4.5e-7, serverPaid: true, inputTokens: 1, outputTokens: 1 }));
    // The three in the first one's session, whose totals are theirs (as the loop adds them up).
    const [first] = await db.select({ session_id: tasks.session_id }).from(tasks).where(eq(tasks.id, ids[0]!));
    const sessionId = first!.session_id;
    await db.update(tasks).set({ session_id: sessionId }).where(sql`${tasks.id} in (${ids[1]}, ${ids[2]})`);
    await db.update(sessions).set({ cost_usd: 4.5e-7 + 4.5e-7 + 4.5e-7, input_tokens: 3, output_tokens: 3 }).where(eq(sessions.id, sessionId));

    const costs: number[] = [];
    for (const id of ids) {
      const r = await api(t, "GET", `/v1/tasks/${id}`, auth);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      costs.push(r.body.cost_usd);
    }
    expect(costs).toEqual([4.5e-7, 4.5e-7, 4.5e-7]);
    const session = await api(t, "GET", `/v1/sessions/${sessionId}`, auth);
    expect(session.body.cost_usd).toBe(1.35e-6);
    const usage = await api(t, "GET", "/v1/usage?group_by=profile", auth);
    expect(usage.body.totals.cost_usd).toBe(1.35e-6);
    expect(usage.body.data[0].cost_usd).toBe(1.35e-6);
    const day = await api(t, "GET", "/v1/usage", auth);
    expect(day.body.totals.cost_usd).toBe(1.35e-6);
    expect((await api(t, "GET", "/v1/me", auth)).body.usage.month_spend_usd).toBe(1.35e-6);
  });
});
