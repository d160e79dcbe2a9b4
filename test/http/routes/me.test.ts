/**
 * GET /v1/me: the route table (anonymous → 401, the admin password is not a user credential → 401,
 * the owner's token → 200 in the shape of src/schema/me.ts), and what it reports: the operator's
 * policy (the shipped defaults here) with the user's overrides and live changes, exempt for
 * admin-role users, and the user's own use — profiles, running workspaces, this month's spend on
 * the server's keys — never another user's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { policyOf } from "../../../src/admin/policy.ts";
import { Me } from "../../../src/schema/me.ts";
import { POLICY_FIELDS } from "../../../src/schema/policy.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { seedFinishedTask } from "../../helpers/db.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp({ policy: "defaults" });
  a = await actors(t);
});
afterAll(() => t.stop());

const auth = (u: TestUser) => ({ authorization: `Bearer ${u.token}` });
const me = async (u: TestUser) => {
  const r = await api(t, "GET", "/v1/me", auth(u));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};
const serverPolicy = () => policyOf(t.app.services.config.policy);

/** A finished task of `u` costing `usd`, paid by the server's key or not, at `at`. */
const seedTask = (u: TestUser, profileId: string, usd: number, serverPaid: boolean, at = Date.now()) =>
  seedFinishedTask(t, { userId: u.id, profileId, costUsd: usd, serverPaid, at });

routeTable("/v1/me", () => a, [
  {
    route: "GET /v1/me",
    success: 200,
    check: (r, actors) => {
      // Exactly the schema's fields, at every level.
      expect(Object.keys(r.body).sort()).toEqual(Object.keys(Me.properties).sort());
      expect(Object.keys(r.body.limits).sort()).toEqual([...Object.keys(POLICY_FIELDS), "exempt"].sort());
      expect(Object.keys(r.body.usage).sort()).toEqual(["month_spend_usd", "profiles", "running_workspaces"]);
      const o = actors.owner;
      expect(r.body).toMatchObject({ id: o.id, email: o.email, name: o.email.split("@")[0], role: "user" });
      expect(new Date(r.body.created_at).toISOString()).toBe(r.body.created_at);
      expect(r.body.limits).toEqual({ ...serverPolicy(), exempt: false });
      expect(r.body.usage).toEqual({ profiles: 0, running_workspaces: 0, month_spend_usd: 0 });
    },
  },
]);

describe("what it reports", () => {
  test("the shipped defaults, the same through the session cookie", async () => {
    const u = await createUser(t);
    const body = await me(u);
    expect(body.limits).toEqual({
      max_profiles: 50,
      max_running_workspaces: 10,
      max_memory_mb: 4096,
      max_cpus: 2,
      max_pids: 4096,
      max_concurrency: 10,
      max_turns: 200,
      max_budget_usd: 20,
      allowed_images: [],
      allow_bridge_network: false,
      monthly_spend_usd: 0,
      workspace_disk_mb: 10_240,
      min_schedule_interval: 60,
      exempt: false,
    });
    const viaCookie = await api(t, "GET", "/v1/me", { cookie: u.cookie, origin: t.url });
    expect(viaCookie.status).toBe(200);
    expect(viaCookie.body).toEqual(body);
  });

  test("an admin-role user is shown exempt", async () => {
    const adm = await createUser(t, { role: "admin" });
    const body = await me(adm);
    expect(body.role).toBe("admin");
    expect(body.limits).toEqual({ ...serverPolicy(), exempt: true });
  });

  test("overrides replace exactly the fields they name; null returns them to the server's setting", async () => {
    const u = await createUser(t);
    const set = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: { max_profiles: 3, allowed_images: ["alpine:*"], monthly_spend_usd: 7.5, allow_bridge_network: true } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect((await me(u)).limits).toEqual({ ...serverPolicy(), max_profiles: 3, allowed_images: ["alpine:*"], monthly_spend_usd: 7.5, allow_bridge_network: true, exempt: false });
    // Someone else keeps the server's settings.
    expect((await me(a.other)).limits).toEqual({ ...serverPolicy(), exempt: false });
    await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: { max_profiles: null } });
    expect((await me(u)).limits).toMatchObject({ max_profiles: 50, monthly_spend_usd: 7.5 });
    await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: null });
    expect((await me(u)).limits).toEqual({ ...serverPolicy(), exempt: false });
  });

  test("a live PATCH /admin/config shows at once; a user's override still wins over it", async () => {
    const plain = await createUser(t);
    const pinned = await createUser(t);
    await api(t, "PATCH", `/admin/users/${pinned.id}`, a.headers("admin"), { policy: { max_turns: 5 } });
    try {
      const r = await api(t, "PATCH", "/admin/config", a.headers("admin"), { policy: { max_turns: 42, workspace_disk_mb: 99 } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((await me(plain)).limits).toMatchObject({ max_turns: 42, workspace_disk_mb: 99 });
      expect((await me(pinned)).limits).toMatchObject({ max_turns: 5, workspace_disk_mb: 99 });
    } finally {
      await api(t, "PATCH", "/admin/config", a.headers("admin"), { policy: { max_turns: 200, workspace_disk_mb: 10_240 } });
    }
    expect((await me(plain)).limits.max_turns).toBe(200);
  });

  test("usage: the user's profiles, running workspaces and this month's server-paid spend, nobody else's", async () => {
    const u = await createUser(t);
    const other = await createUser(t);
    const mk = async (who: TestUser, name: string) => {
      const r = await api(t, "POST", "/v1/profiles", auth(who), { name, model: { provider: "demo" } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as string;
    };
    const p1 = await mk(u, "one");
    await mk(u, "two");
    await mk(other, "theirs");
    expect((await me(u)).usage).toEqual({ profiles: 2, running_workspaces: 0, month_spend_usd: 0 });

    const monthStart = new Date();
    monthStart.setUTCDate(1);
    monthStart.setUTCHours(0, 0, 0, 0);
    await seedTask(u, p1, 0.75, true);
    await seedTask(u, p1, 0.5, true, monthStart.getTime());
    await seedTask(u, p1, 3, true, monthStart.getTime() - 1); // last month
    await seedTask(u, p1, 9, false); // the user's own key
    await seedTask(other, p1, 4, true);

    const s = await api(t, "POST", "/v1/sessions", auth(u), { profile_id: p1 });
    expect(s.status, JSON.stringify(s.body)).toBe(201);
    expect((await me(u)).usage).toEqual({ profiles: 2, running_workspaces: 1, month_spend_usd: 1.25 });
    expect((await me(other)).usage).toEqual({ profiles: 1, running_workspaces: 0, month_spend_usd: 4 });

    const del = await api(t, "DELETE", `/v1/sessions/${s.body.id}`, auth(u));
    expect(del.status).toBe(204);
    expect((await me(u)).usage.running_workspaces).toBe(0);
  });
});
