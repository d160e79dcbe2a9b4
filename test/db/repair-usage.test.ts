/**
 * Migration 0008_repair_usage (SQLite) / 0003_repair_usage (PostgreSQL): usage figures a model
 * server's bad token counts left before the providers checked them (a fraction, a count past 2^53,
 * a cost of Infinity or NaN) made GET /v1/tasks, /v1/sessions and /v1/usage answer 500 for good,
 * deleted sessions included (deleted_task_usage). A database holding them is repaired by the
 * migration (that it is applied at start is migrate.test.ts's). Runs on SQLite, and on PostgreSQL in the PostgreSQL pass (which can hold only
 * some of them: its bigint columns rounded fractions and refused counts past 2^63).
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { startTestApp, type TestApp, tempDir } from "../helpers/app.ts";
import { seedFinishedTask, sqlAll, sqlAllIn, sqlRun } from "../helpers/db.ts";
import { dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";
import { api, createUser } from "../helpers/users.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { PG_MIGRATIONS } from "../../src/db/pg/migrations.ts";

const REPAIR = PG_SERVER ? "0003_repair_usage" : "0008_repair_usage";
const dataDir = tempDir();
let t: TestApp | null = null;

afterAll(async () => {
  await t?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  await dropDatabaseFor(dataDir);
});

// Each dialect's bad values as literals (SQLite: 9e999 is Infinity; PostgreSQL spells it).
const BAD = PG_SERVER
  ? { fraction: "1000", huge: "1000000000000000000", inf: "'Infinity'", nan: "'NaN'", past53: "9007199254740992" }
  : { fraction: "10.7", huge: "1e20", inf: "9e999", nan: "9e999", past53: "9007199254740992" };

test("bad stored usage is repaired at start: the listings answer 200 again, with the figures that can be kept", async () => {
  t = await startTestApp({ dataDir, keepDataDir: true });
  const u = await createUser(t);
  const auth = { authorization: `Bearer ${u.token}` };
  const p = await api(t, "POST", "/v1/profiles", auth, { name: "p", model: { provider: "anthropic" } });
  expect(p.status, JSON.stringify(p.body)).toBe(201);
  const profileId = p.body.id as string;
  const seed = () => seedFinishedTask(t!, { userId: u.id, profileId, costUsd: 0.5, inputTokens: 100, outputTokens: 20, turns: 1 });
  const good = await seed();
  const [fraction, huge, infinite, deleted] = [await seed(), await seed(), await seed(), await seed()];
  await sqlRun(t, `UPDATE tasks SET input_tokens = ${BAD.fraction} WHERE id = ?`, [fraction]);
  await sqlRun(t, `UPDATE tasks SET input_tokens = ${BAD.huge}, cost_usd = 300000000000000 WHERE id = ?`, [huge]);
  await sqlRun(t, `UPDATE tasks SET cost_usd = ${BAD.inf} WHERE id = ?`, [infinite]);
  // Each session was charged what its task was.
  await sqlRun(t, "UPDATE sessions SET input_tokens = (SELECT input_tokens FROM tasks WHERE session_id = sessions.id), output_tokens = 20, cost_usd = (SELECT cost_usd FROM tasks WHERE session_id = sessions.id)");
  const deletedSession = (await sqlAll<{ session_id: string }>(t, "SELECT session_id FROM tasks WHERE id = ?", [deleted]))[0]!.session_id;
  expect((await api(t, "DELETE", `/v1/sessions/${deletedSession}`, auth)).status).toBe(204);
  await sqlRun(t, `UPDATE deleted_task_usage SET input_tokens = ${BAD.fraction}, output_tokens = ${BAD.past53}, cost_usd = ${BAD.nan} WHERE task_id = ?`, [deleted]);

  // The defect: the rows break every listing that shows them.
  expect((await api(t, "GET", `/v1/tasks/${infinite}`, auth)).status).toBe(500);
  expect((await api(t, "GET", "/v1/tasks", auth)).status).toBe(500);
  expect((await api(t, "GET", "/v1/sessions", auth)).status).toBe(500);
  expect((await api(t, "GET", "/v1/usage", auth)).status).toBe(500);
  await t.stop();
  t = null;

  // The repair, as `migrate` applies it at start to a database from before it (later migrations
  // make it no longer the last one, so it is run here rather than un-recorded and left to start).
  const repair = (PG_SERVER ? PG_MIGRATIONS : MIGRATIONS).find((m) => m.tag === REPAIR)!;
  for (const statement of repair.sql.split("--> statement-breakpoint")) if (statement.trim()) await sqlAllIn(dataDir, statement);
  t = await startTestApp({ dataDir, keepDataDir: true });
  const figures = async (id: string) => {
    const r = await api(t!, "GET", `/v1/tasks/${id}`, auth);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const s = await api(t!, "GET", `/v1/sessions/${r.body.session_id}`, auth);
    expect(s.status, JSON.stringify(s.body)).toBe(200);
    // A session's figures are its tasks' sums.
    expect([s.body.input_tokens, s.body.output_tokens, s.body.cost_usd]).toEqual([r.body.input_tokens, r.body.output_tokens, r.body.cost_usd]);
    return [r.body.input_tokens, r.body.output_tokens, r.body.cost_usd];
  };
  expect(await figures(good)).toEqual([100, 20, 0.5]);
  // A fraction is rounded (PostgreSQL's bigint had rounded it already).
  expect(await figures(fraction)).toEqual([PG_SERVER ? 1000 : 11, 20, 0.5]);
  // A count past 2^53 is garbage, and so is the cost it was priced into.
  expect(await figures(huge)).toEqual([0, 20, 0]);
  expect(await figures(infinite)).toEqual([100, 20, 0]);
  for (const path of ["/v1/tasks", "/v1/sessions", "/v1/usage", "/v1/usage?group_by=profile"]) {
    const r = await api(t, "GET", path, auth);
    expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(200);
  }
  const usage = await api(t, "GET", "/v1/usage", auth);
  expect(usage.body.totals).toEqual({ tasks: 5, input_tokens: 100 + (PG_SERVER ? 1000 : 11) + 0 + 100 + (PG_SERVER ? 1000 : 11), output_tokens: 20 * 4, cost_usd: 1 });
});
