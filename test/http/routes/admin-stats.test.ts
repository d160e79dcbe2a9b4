/**
 * GET /admin/stats and GET /metrics: the route scenario table (anonymous and a user's token → 401,
 * the admin password → success), the counts (every status present, uptime on the app's clock), and
 * the Prometheus text format with requests counted by route template and status (the metrics
 * themselves: test/admin/metrics.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { count } from "drizzle-orm";
import { newId } from "../../../src/db/ids.ts";
import { apiTokens, sessions, tasks } from "../../../src/db/tables.ts";
import { VERSION } from "../../../src/version.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser } from "../../helpers/users.ts";

const PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8";
let clock = Date.parse("2026-05-01T00:00:00Z");
let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp({ now: () => clock });
  a = await actors(t);
  await createUser(t, { role: "admin" });
  // One finished task of the owner's (rows only).
  const session = newId("session");
  await t.app.services.db.insert(sessions).values({ id: session, user_id: a.owner.id, profile_id: "prof_x", created_at: clock, updated_at: clock });
  await t.app.services.db.insert(tasks).values({ id: newId("task"), user_id: a.owner.id, session_id: session, profile_id: "prof_x", prompt: "p", status: "completed", max_turns: 5, max_budget_usd: 1, created_at: clock, finished_at: clock });
});
afterAll(() => t.stop());


routeTable("/admin/stats and /metrics", () => a, [
  {
    route: "GET /admin/stats",
    success: 200,
    check: (r) => {
      expect(r.body.version).toBe(VERSION);
      expect(r.body.users).toEqual({ total: 3, admins: 1, disabled: 0 });
      expect(r.body.tasks).toEqual({ total: 1, queued: 0, running: 0, waiting_input: 0, completed: 1, failed: 0, cancelled: 0 });
    },
  },
  {
    route: "GET /metrics",
    success: 200,
    check: (r) => {
      expect(r.headers.get("content-type")).toBe(PROMETHEUS);
      expect(r.body).toMatch(/^runcell_users\{state="enabled"\} 3$/m);
      expect(r.body).toMatch(/^runcell_admin_users 1$/m);
    },
  },
]);

describe("the counts", () => {
  test("stats count users, sessions, tokens and every status; uptime follows the clock", async () => {
    const r = await api(t, "GET", "/admin/stats", a.headers("admin"));
    expect(r.status).toBe(200);
    expect(r.body.users.total).toBe(await t.app.services.users.count());
    expect(r.body.api_tokens.total).toBe((await t.app.services.db.select({ n: count() }).from(apiTokens))[0]!.n);
    expect(r.body.login_sessions.active).toBe(3);
    expect(r.body.sessions.total).toBe(1);
    expect(r.body.profiles.total).toBe(0);
    expect(r.body.workspaces).toEqual({ total: 0, starting: 0, running: 0, stopped: 0, failed: 0, unavailable: 0 });
    expect(r.body.notifications).toEqual({ total: 0, pending: 0, delivered: 0, failed: 0 });
    expect(r.body.started_at).toBe(new Date(t.app.services.stats.startedAt).toISOString());
    clock += 90_000;
    const later = await api(t, "GET", "/admin/stats", a.headers("admin"));
    expect(later.body.uptime_seconds - r.body.uptime_seconds).toBe(90);
  });

  test("a disabled user is counted at once", async () => {
    const u = await createUser(t);
    expect((await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { disabled: true })).status).toBe(200);
    const r = await api(t, "GET", "/admin/stats", a.headers("admin"));
    expect(r.body.users).toMatchObject({ total: 4, disabled: 1 });
    const m = await t.fetch("/metrics", { headers: a.headers("admin") });
    expect(await m.text()).toMatch(/^runcell_users\{state="disabled"\} 1$/m);
  });
});

test("/metrics speaks the Prometheus text format and counts requests by route template and status", async () => {
  const read = async () => {
    const res = await t.fetch("/metrics", { headers: a.headers("admin") });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(PROMETHEUS);
    return res.text();
  };
  const sample = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => "\\" + c)} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
  const series = (status: number) => `runcell_http_requests_total{method="GET",route="/v1/api-tokens",status="${status}"}`;
  const before = await read();
  await api(t, "GET", "/v1/api-tokens");
  await api(t, "GET", "/v1/api-tokens", a.headers("owner"));
  await api(t, "GET", "/v1/api-tokens", a.headers("owner"));
  const after = await read();
  expect(sample(after, series(401))).toBe(sample(before, series(401)) + 1);
  expect(sample(after, series(200))).toBe(sample(before, series(200)) + 2);
  expect(after).toMatch(/^runcell_build_info\{version="[^"]+",commit="[^"]+",bun="[^"]+"\} 1$/m);
  expect(after).toMatch(/^# TYPE runcell_http_requests_total counter$/m);
  expect(after).toMatch(/^# TYPE runcell_http_request_duration_seconds histogram$/m);
  expect(after).toMatch(/^runcell_uptime_seconds \d+$/m);
  expect(after).toMatch(/^runcell_tasks\{status="completed"\} 1$/m);
  expect(after).toMatch(/^runcell_tasks\{status="waiting_input"\} 0$/m);
  expect(after).toMatch(/^runcell_workspaces\{status="running"\} 0$/m);
  expect(after).toMatch(/^runcell_notifications\{status="failed"\} 0$/m);
  // Every line is a comment, blank, or `name{labels} value` (test/admin/metrics.test.ts parses it strictly).
  for (const line of after.trim().split("\n")) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? (-?\d+(\.\d+)?(e[-+]?\d+)?|Nan|[+-]Inf)|)$/);
});
