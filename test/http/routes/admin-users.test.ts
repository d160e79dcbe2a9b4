/**
 * /admin/users: the route scenario table (anonymous and a user's token → 401, a user that does not
 * exist, bad input, the admin password → success), and what the routes do: the list's shape and
 * pages, an account created here signs in, a PATCH changes only what it names. Disabling a user
 * (refused everywhere at once) is in test/admin/admin.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

const TAKEN = "taken@example.com";
let t: TestApp;
let a: Actors;
let taken: TestUser;
let n = 0;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  taken = await createUser(t, { email: TAKEN });
});
afterAll(() => t.stop());

/** A user of their own for each PATCH (the successful one makes it an admin). */
const aUser = async () => (await createUser(t)).id;

routeTable("/admin/users", () => a, [
  {
    route: "GET /admin/users",
    query: "limit=100",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "a cursor over 200 characters", query: `cursor=${"x".repeat(201)}`, field: "cursor" },
    ],
    success: 200,
    check: (r) => {
      const emails = r.body.data.map((u: { email: string }) => u.email);
      expect(emails).toEqual(expect.arrayContaining([a.owner.email, a.other.email, TAKEN]));
      for (const u of r.body.data) expect(Object.keys(u).sort()).toEqual(["created_at", "disabled", "email", "email_verified", "id", "name", "policy", "role", "updated_at"]);
    },
  },
  {
    route: "POST /admin/users",
    body: () => ({ email: `made${++n}@example.com`, password: "long enough pw", name: "Made" }),
    invalid: [
      { name: "a duplicate email (in another case)", body: { email: TAKEN.toUpperCase(), password: "long enough pw" }, field: "email" },
      { name: "a short password", body: { email: "e@example.com", password: "short" }, field: "password" },
      { name: "a password over 256 characters", body: { email: "e@example.com", password: "p".repeat(257) }, field: "password" },
      { name: "a bad role", body: { email: "f@example.com", password: "long enough pw", role: "root" }, field: "role" },
      { name: "an unknown field", body: { email: "g@example.com", password: "long enough pw", admin: true }, field: "admin" },
      { name: "no email", body: { password: "long enough pw" }, field: "email" },
      { name: "an email that is not one", body: { email: "not an email", password: "long enough pw" }, field: "email" },
    ],
    success: 201,
    check: (r) => {
      expect(r.body).toMatchObject({ email: `made${n}@example.com`, name: "Made", role: "user", disabled: false, email_verified: true });
      expect(r.body.id).toMatch(/^usr_/);
    },
  },
  {
    route: "PATCH /admin/users/:id",
    record: aUser,
    body: () => ({ role: "admin" }),
    invalid: [
      { name: "an empty patch", body: {}, field: "body" },
      { name: "a bad role", body: { role: "owner" }, field: "role" },
      { name: "disabled not a boolean", body: { disabled: "yes" }, field: "disabled" },
      { name: "an unknown field", body: { email: "x@example.com" }, field: "email" },
      { name: "an unknown policy field", body: { policy: { max_gpus: 2 } }, field: "policy.max_gpus" },
      { name: "a policy value out of bounds", body: { policy: { max_cpus: 0 } }, field: "policy.max_cpus" },
    ],
    success: 200,
    check: (r, _a, id) => expect(r.body).toMatchObject({ id, role: "admin", disabled: false }),
  },
]);

describe("what the routes do", () => {
  test("PATCH policy merges overrides (null returns a field to the server's setting; null clears all), shows them, audits the change, and GET /v1/me reflects them", async () => {
    const u = a.other;
    const set = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: { max_profiles: 2, max_cpus: 1.5 } });
    expect(set.status).toBe(200);
    expect(set.body.policy).toEqual({ max_profiles: 2, max_cpus: 1.5 });
    const me = await api(t, "GET", "/v1/me", a.headers("other"));
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: u.id, limits: { max_profiles: 2, max_cpus: 1.5, exempt: false }, usage: { profiles: expect.any(Number), running_workspaces: 0, month_spend_usd: 0 } });
    const merged = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: { max_profiles: null, max_turns: 5 } });
    expect(merged.body.policy).toEqual({ max_cpus: 1.5, max_turns: 5 });
    const audit = await api(t, "GET", `/admin/audit?action=user.policy_changed&user_id=${u.id}`, a.headers("admin"));
    expect(audit.body.data[0].details).toEqual({ from: { max_profiles: 2, max_cpus: 1.5 }, to: { max_cpus: 1.5, max_turns: 5 } });
    const cleared = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { policy: null });
    expect(cleared.body.policy).toBeNull();
    expect((await api(t, "GET", "/v1/me", a.headers("other"))).body.limits.max_cpus).toBe(t.app.services.config.policy.maxCpus);
  });

  test("GET lists every account, newest first, in pages", async () => {
    const first = await api(t, "GET", "/admin/users?limit=1", a.headers("admin"));
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(1);
    const second = await api(t, "GET", `/admin/users?limit=1&cursor=${first.body.next_cursor}`, a.headers("admin"));
    expect(second.body.data[0].id < first.body.data[0].id).toBe(true);
    const all = await api(t, "GET", "/admin/users?limit=100", a.headers("admin"));
    const ids = all.body.data.map((u: { id: string }) => u.id);
    expect(ids).toEqual([...ids].sort().reverse());
  });

  test("POST creates an account that can sign in (the email trimmed and lower-cased); role may be admin", async () => {
    const r = await api(t, "POST", "/admin/users", a.headers("admin"), { email: " Carol@Example.com", password: "carol password", name: "Carol" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ email: "carol@example.com", name: "Carol", role: "user", disabled: false });
    const admin = await api(t, "POST", "/admin/users", a.headers("admin"), { email: "dave@example.com", password: "dave password", role: "admin" });
    expect(admin.body.role).toBe("admin");
    const s = await api(t, "POST", "/api/auth/sign-in/email", {}, { email: "carol@example.com", password: "carol password" });
    expect(s.status).toBe(200);
    expect(s.body.user.email).toBe("carol@example.com");
  });

  test("PATCH role changes only the role (a missing field is not defaulted), and the session sees it", async () => {
    const u = await createUser(t);
    const up = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { role: "admin" });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ id: u.id, role: "admin", disabled: false });
    const still = await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { disabled: false });
    expect(still.body.role).toBe("admin");
    const me = await api(t, "GET", "/api/auth/get-session", { cookie: u.cookie });
    expect(me.body.user.role).toBe("admin");
    expect((await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { role: "user" })).body.role).toBe("user");
  });

  test("a bad PATCH changes nothing", async () => {
    const u = await createUser(t);
    expect((await api(t, "PATCH", `/admin/users/${u.id}`, a.headers("admin"), { role: "admin", disabled: "yes" })).status).toBe(400);
    const all = await api(t, "GET", "/admin/users?limit=100", a.headers("admin"));
    expect(all.body.data.find((x: { id: string }) => x.id === u.id)).toMatchObject({ role: "user", disabled: false });
  });

  test("the taken address is still one account", async () => {
    const all = await api(t, "GET", "/admin/users?limit=100", a.headers("admin"));
    expect(all.body.data.filter((u: { email: string }) => u.email === TAKEN).map((u: { id: string }) => u.id)).toEqual([taken.id]);
  });
});
