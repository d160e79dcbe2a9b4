/**
 * /admin/config: the route scenario table (anonymous and a user's token → 401, bad input, the admin
 * password → success), and a PATCH applied live (sign-up opens and closes at once), persisted and
 * partial (the fields it does not name stay).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
});
afterAll(() => t.stop());

const RATE_LIMIT = { per_minute: 1000000, burst: 1000000 };
/** The suite's apps run with the policy opened wide (test/helpers/app.ts OPEN_POLICY). */
const POLICY = {
  max_profiles: 1000000,
  max_running_workspaces: 100000,
  max_memory_mb: 262144,
  max_cpus: 64,
  max_pids: 65536,
  max_concurrency: 1000,
  max_turns: 1000,
  max_budget_usd: 10000,
  allowed_images: ["*"],
  allow_bridge_network: true,
  monthly_spend_usd: 0,
  workspace_disk_mb: 10240,
  min_schedule_interval: 1,
};

routeTable("/admin/config", () => a, [
  {
    route: "GET /admin/config",
    success: 200,
    check: (r) => expect(r.body).toEqual({ rate_limit: RATE_LIMIT, default_max_concurrency: t.app.services.config.defaultMaxConcurrency, signup: "closed", policy: POLICY }),
  },
  {
    route: "PATCH /admin/config",
    body: () => ({ default_max_concurrency: 6 }),
    invalid: [
      { name: "burst 0", body: { rate_limit: { burst: 0 } }, field: "rate_limit.burst" },
      { name: "per_minute not an integer", body: { rate_limit: { per_minute: 1.5 } }, field: "rate_limit.per_minute" },
      { name: "concurrency over 1000", body: { default_max_concurrency: 1001 }, field: "default_max_concurrency" },
      { name: "signup maybe", body: { signup: "maybe" }, field: "signup" },
      { name: "an unknown field in rate_limit", body: { rate_limit: { burst: 5, window: 3 } }, field: "rate_limit.window" },
      { name: "an unknown top-level field", body: { workers: 3 }, field: "workers" },
      { name: "a policy ceiling below its bound", body: { policy: { max_memory_mb: 1 } }, field: "policy.max_memory_mb" },
      { name: "an unknown policy field", body: { policy: { max_gpus: 1 } }, field: "policy.max_gpus" },
      { name: "allowed_images not a list", body: { policy: { allowed_images: "*" } }, field: "policy.allowed_images" },
    ],
    success: 200,
    check: (r) => {
      expect(r.body).toEqual({ rate_limit: RATE_LIMIT, default_max_concurrency: 6, signup: "closed", policy: POLICY });
      expect(t.app.services.config.defaultMaxConcurrency).toBe(6);
    },
  },
]);

test("a refused PATCH changes nothing", async () => {
  const before = (await api(t, "GET", "/admin/config", a.headers("admin"))).body;
  const r = await api(t, "PATCH", "/admin/config", a.headers("admin"), { signup: "open", default_max_concurrency: 1001 });
  expect(r.status).toBe(400);
  expect((await api(t, "GET", "/admin/config", a.headers("admin"))).body).toEqual(before);
});

test("PATCH applies live, persists, and leaves other fields alone", async () => {
  const r = await api(t, "PATCH", "/admin/config", a.headers("admin"), { signup: "open", default_max_concurrency: 7 });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({ rate_limit: RATE_LIMIT, default_max_concurrency: 7, signup: "open", policy: POLICY });
  expect(t.app.services.config.defaultMaxConcurrency).toBe(7);
  const signUp = await api(t, "POST", "/api/auth/sign-up/email", {}, { email: "walkin@example.com", password: "walk in pw" });
  expect(signUp.status).toBe(200);
  expect(await t.app.services.settings.get("runtime_config")).toEqual({ signup: "open", default_max_concurrency: 7 });
  const partial = await api(t, "PATCH", "/admin/config", a.headers("admin"), { rate_limit: { per_minute: 2000000 } });
  expect(partial.body).toEqual({ rate_limit: { per_minute: 2000000, burst: 1000000 }, default_max_concurrency: 7, signup: "open", policy: POLICY });
  const closed = await api(t, "PATCH", "/admin/config", a.headers("admin"), { signup: "closed" });
  expect(closed.body.signup).toBe("closed");
  expect((await api(t, "POST", "/api/auth/sign-up/email", {}, { email: "late@example.com", password: "walk in pw" })).status).toBe(403);
});

test("PATCH policy: fields merge, apply live to every user's next check, and persist", async () => {
  const r = await api(t, "PATCH", "/admin/config", a.headers("admin"), { policy: { max_profiles: 3, monthly_spend_usd: 25 } });
  expect(r.status).toBe(200);
  expect(r.body.policy).toEqual({ ...POLICY, max_profiles: 3, monthly_spend_usd: 25 });
  expect(t.app.services.config.policy.maxProfiles).toBe(3);
  expect((await t.app.services.settings.get<{ policy: unknown }>("runtime_config"))?.policy).toMatchObject({ max_profiles: 3, monthly_spend_usd: 25 });
  const me = await api(t, "GET", "/v1/me", a.headers("owner"));
  expect(me.body.limits).toMatchObject({ max_profiles: 3, monthly_spend_usd: 25, exempt: false });
  const back = await api(t, "PATCH", "/admin/config", a.headers("admin"), { policy: { max_profiles: POLICY.max_profiles, monthly_spend_usd: 0 } });
  expect(back.body.policy).toEqual(POLICY);
});
