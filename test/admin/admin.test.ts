/**
 * The operator surface: /admin/users, /admin/config, /admin/stats and /metrics behind the admin
 * password (user tokens and cookies never open it), throttled per IP, and a disabled user refused
 * everywhere at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { nextIp } from "../helpers/cookies.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const PASSWORD = "operator password 42";
let clock = Date.parse("2026-05-01T00:00:00Z");
let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const A = { authorization: `Bearer ${PASSWORD}` };

beforeAll(async () => {
  t = await startTestApp({ flags: ["--trust-proxy"], env: { RUNCELL_ADMIN_PASSWORD: PASSWORD }, now: () => clock });
  [alice, bob] = await Promise.all([createUser(t, { email: "alice@example.com" }), createUser(t, { email: "bob@example.com" })]);
});
afterAll(() => t.stop());

type Creds = "none" | "wrong password" | "user token" | "user cookie" | "admin";
const creds = (c: Creds): Record<string, string> => {
  const ip = { "x-forwarded-for": nextIp() };
  switch (c) {
    case "none":
      return ip;
    case "wrong password":
      return { ...ip, authorization: "Bearer not the password" };
    case "user token":
      return { ...ip, authorization: `Bearer ${alice.token}` };
    case "user cookie":
      return { ...ip, cookie: alice.cookie, origin: t.url };
    case "admin":
      return { ...ip, ...A };
  }
};

const routes: { name: string; method: string; path: () => string; body?: unknown }[] = [
  { name: "GET /admin/users", method: "GET", path: () => "/admin/users" },
  { name: "POST /admin/users", method: "POST", path: () => "/admin/users", body: { email: "x@example.com", password: "long enough pw" } },
  { name: "PATCH /admin/users/:id", method: "PATCH", path: () => `/admin/users/${bob.id}`, body: { role: "admin" } },
  { name: "GET /admin/config", method: "GET", path: () => "/admin/config" },
  { name: "PATCH /admin/config", method: "PATCH", path: () => "/admin/config", body: { default_max_concurrency: 6 } },
  { name: "GET /admin/stats", method: "GET", path: () => "/admin/stats" },
  { name: "GET /metrics", method: "GET", path: () => "/metrics" },
];

describe("who may call /admin/*", () => {
  const refused = (["none", "wrong password", "user token", "user cookie"] as const).flatMap((c) => routes.map((r) => [`${r.name} with ${c}`, c, r] as const));
  test.each(refused)("%s → 401", async (_n, c, r) => {
    const res = await api(t, r.method, r.path(), creds(c), r.body);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("UNAUTHORIZED");
  });

  test("an anonymous caller gets 401 even with a bad body (credentials are checked first)", async () => {
    const r = await api(t, "PATCH", "/admin/config", creds("none"), { rate_limit: { burst: -1 } });
    expect(r.status).toBe(401);
  });

  test("with no admin password set, every /admin call is 401 and says how to set one", async () => {
    const bare = await startTestApp();
    try {
      for (const r of routes) {
        const res = await api(bare, r.method, r.path(), { authorization: "Bearer anything at all" }, r.body);
        expect(res.status).toBe(401);
        expect(res.body.error).toContain("runcell admin set-password");
      }
    } finally {
      await bare.stop();
    }
  });
});

describe("admin password throttling", () => {
  test("5 wrong passwords from one address → 429 with Retry-After (even for the right one), other addresses unaffected; a success resets", async () => {
    const ip = nextIp();
    for (let i = 0; i < 5; i++) {
      const r = await api(t, "GET", "/admin/stats", { "x-forwarded-for": ip, authorization: `Bearer guess ${i}` });
      expect(r.status).toBe(401);
    }
    const blocked = await api(t, "GET", "/admin/stats", { "x-forwarded-for": ip, ...A });
    expect(blocked.status).toBe(429);
    expect(blocked.body.code).toBe("RATE_LIMITED");
    expect(blocked.headers.get("retry-after")).toBe("2");
    expect((await api(t, "GET", "/admin/stats", creds("admin"))).status).toBe(200);
    clock += 2000;
    expect((await api(t, "GET", "/admin/stats", { "x-forwarded-for": ip, ...A })).status).toBe(200);
    expect((await api(t, "GET", "/admin/stats", { "x-forwarded-for": ip, authorization: "Bearer guess" })).status).toBe(401);
  });

  test("a changed admin password takes effect at once (the verification cache is keyed by the stored hash)", async () => {
    expect((await api(t, "GET", "/admin/config", creds("admin"))).status).toBe(200);
    await t.app.services.adminPassword.set("a brand new operator pw");
    expect((await api(t, "GET", "/admin/config", creds("admin"))).status).toBe(401);
    expect((await api(t, "GET", "/admin/config", { "x-forwarded-for": nextIp(), authorization: "Bearer a brand new operator pw" })).status).toBe(200);
    await t.app.services.adminPassword.set(PASSWORD);
  });
});

describe("/admin/users", () => {
  test("GET lists every account, newest first, paginated, with role and disabled", async () => {
    const first = await api(t, "GET", "/admin/users?limit=1", creds("admin"));
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(1);
    expect(Object.keys(first.body.data[0]).sort()).toEqual(["created_at", "disabled", "email", "email_verified", "id", "name", "role", "updated_at"]);
    const all = await api(t, "GET", "/admin/users?limit=100", creds("admin"));
    const emails = all.body.data.map((u: { email: string }) => u.email);
    expect(emails).toContain("alice@example.com");
    expect(emails).toContain("bob@example.com");
    const second = await api(t, "GET", `/admin/users?limit=1&cursor=${first.body.next_cursor}`, creds("admin"));
    expect(second.body.data[0].id).not.toBe(first.body.data[0].id);
    expect(second.body.data[0].id < first.body.data[0].id).toBe(true);
  });

  test("POST creates an account (201) that can sign in; role defaults to user", async () => {
    const r = await api(t, "POST", "/admin/users", creds("admin"), { email: " Carol@Example.com", password: "carol password", name: "Carol" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ email: "carol@example.com", name: "Carol", role: "user", disabled: false });
    const admin = await api(t, "POST", "/admin/users", creds("admin"), { email: "dave@example.com", password: "dave password", role: "admin" });
    expect(admin.body.role).toBe("admin");
    const s = await api(t, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp() }, { email: "carol@example.com", password: "carol password" });
    expect(s.status).toBe(200);
  });

  test.each([
    ["duplicate email", { email: "ALICE@example.com", password: "long enough pw" }, "email"],
    ["short password", { email: "e@example.com", password: "short" }, "password"],
    ["bad role", { email: "f@example.com", password: "long enough pw", role: "root" }, "role"],
    ["unknown field", { email: "g@example.com", password: "long enough pw", admin: true }, "admin"],
    ["missing email", { password: "long enough pw" }, "email"],
  ])("POST with %s → 400", async (_n, body, field) => {
    const r = await api(t, "POST", "/admin/users", creds("admin"), body);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("VALIDATION_FAILED");
    expect(r.body.details.field).toBe(field);
  });

  test.each([
    ["an empty patch", {}, 400],
    ["a bad role", { role: "owner" }, 400],
    ["disabled not a boolean", { disabled: "yes" }, 400],
    ["an unknown field", { email: "x@example.com" }, 400],
  ])("PATCH with %s → %d", async (_n, body, status) => {
    const r = await api(t, "PATCH", `/admin/users/${bob.id}`, creds("admin"), body);
    expect(r.status).toBe(status);
  });

  test("PATCH an unknown user → 404", async () => {
    const r = await api(t, "PATCH", "/admin/users/usr_01aaaaaaaaaaaaaaaaaaaaaaaa", creds("admin"), { role: "admin" });
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("NOT_FOUND");
  });

  test("PATCH role changes only the role (a missing field is not defaulted)", async () => {
    const up = await api(t, "PATCH", `/admin/users/${bob.id}`, creds("admin"), { role: "admin" });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ id: bob.id, role: "admin", disabled: false });
    const still = await api(t, "PATCH", `/admin/users/${bob.id}`, creds("admin"), { disabled: false });
    expect(still.body.role).toBe("admin");
    const me = await api(t, "GET", "/api/auth/get-session", { cookie: bob.cookie });
    expect(me.body.user.role).toBe("admin");
    await api(t, "PATCH", `/admin/users/${bob.id}`, creds("admin"), { role: "user" });
  });
});

describe("a disabled user", () => {
  test("is refused at once with cookie and token, cannot sign in, and the onDisabled hooks run; enabling restores the tokens", async () => {
    const u = await createUser(t, { email: "eve@example.com", password: "eve password 1" });
    const s = await api(t, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp() }, { email: u.email, password: u.password });
    const signedIn = `runcell.session_token=${s.body.token}`;
    // Warm the token cache, so the refusal does not depend on a cache miss.
    expect((await api(t, "GET", "/v1/api-tokens", u.bearer)).status).toBe(200);
    expect((await api(t, "GET", "/v1/api-tokens", { cookie: signedIn })).status).toBe(200);
    const seen: string[] = [];
    t.app.services.users.onDisabled.push((id) => seen.push(id));

    const r = await api(t, "PATCH", `/admin/users/${u.id}`, creds("admin"), { disabled: true });
    expect(r.status).toBe(200);
    expect(r.body.disabled).toBe(true);
    expect(seen).toEqual([u.id]);

    for (const h of [u.bearer, { cookie: u.cookie }, { cookie: signedIn }]) {
      const res = await api(t, "GET", "/v1/api-tokens", h);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe("UNAUTHORIZED");
    }
    expect((await api(t, "GET", "/api/auth/get-session", { cookie: signedIn })).body).toBeNull();
    const again = await api(t, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp() }, { email: u.email, password: u.password });
    expect(again.status).toBe(403);
    const rows = t.app.services.sqlite.query<{ n: number }, [string]>("SELECT count(*) AS n FROM login_sessions WHERE user_id = ?").get(u.id)!;
    expect(rows.n).toBe(0);
    // Disabling twice runs the hooks once.
    await api(t, "PATCH", `/admin/users/${u.id}`, creds("admin"), { disabled: true });
    expect(seen).toEqual([u.id]);

    await api(t, "PATCH", `/admin/users/${u.id}`, creds("admin"), { disabled: false });
    expect((await api(t, "GET", "/v1/api-tokens", u.bearer)).status).toBe(200);
    expect((await api(t, "GET", "/v1/api-tokens", { cookie: signedIn })).status).toBe(401);
  });
});

describe("/admin/config", () => {
  test("GET shows the settings in effect", async () => {
    const r = await api(t, "GET", "/admin/config", creds("admin"));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ rate_limit: { per_minute: 1000000, burst: 1000000 }, default_max_concurrency: expect.any(Number), signup: "closed" });
  });

  test.each([
    ["burst 0", { rate_limit: { burst: 0 } }, "rate_limit.burst"],
    ["per_minute not an integer", { rate_limit: { per_minute: 1.5 } }, "rate_limit.per_minute"],
    ["concurrency over 1000", { default_max_concurrency: 1001 }, "default_max_concurrency"],
    ["signup maybe", { signup: "maybe" }, "signup"],
    ["unknown field", { rate_limit: { burst: 5, window: 3 } }, "rate_limit.window"],
  ])("PATCH with %s → 400 on %s", async (_n, body, field) => {
    const r = await api(t, "PATCH", "/admin/config", creds("admin"), body);
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe(field);
  });

  test("PATCH applies live, persists, and leaves other fields alone", async () => {
    const r = await api(t, "PATCH", "/admin/config", creds("admin"), { signup: "open", default_max_concurrency: 7 });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ rate_limit: { per_minute: 1000000, burst: 1000000 }, default_max_concurrency: 7, signup: "open" });
    expect(t.app.services.config.defaultMaxConcurrency).toBe(7);
    const signUp = await api(t, "POST", "/api/auth/sign-up/email", { "x-forwarded-for": nextIp() }, { email: "walkin@example.com", password: "walk in pw" });
    expect(signUp.status).toBe(200);
    expect(t.app.services.settings.get("runtime_config")).toEqual({ signup: "open", default_max_concurrency: 7 });
    const partial = await api(t, "PATCH", "/admin/config", creds("admin"), { rate_limit: { per_minute: 2000000 } });
    expect(partial.body).toEqual({ rate_limit: { per_minute: 2000000, burst: 1000000 }, default_max_concurrency: 7, signup: "open" });
    const closed = await api(t, "PATCH", "/admin/config", creds("admin"), { signup: "closed" });
    expect(closed.body.signup).toBe("closed");
    expect((await api(t, "POST", "/api/auth/sign-up/email", { "x-forwarded-for": nextIp() }, { email: "late@example.com", password: "walk in pw" })).status).toBe(403);
  });
});

describe("/admin/stats and /metrics", () => {
  test("stats count users, sessions, tokens and every status", async () => {
    const r = await api(t, "GET", "/admin/stats", creds("admin"));
    expect(r.status).toBe(200);
    const users = t.app.services.users.count();
    expect(r.body.users.total).toBe(users);
    expect(r.body.users.admins).toBeGreaterThanOrEqual(1);
    expect(r.body.api_tokens.total).toBe(t.app.services.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM api_tokens").get()!.n);
    expect(r.body.login_sessions.active).toBeGreaterThanOrEqual(2);
    expect(r.body.tasks).toMatchObject({ total: 0, queued: 0, running: 0, waiting_input: 0, completed: 0, failed: 0, cancelled: 0 });
    expect(r.body.workspaces).toMatchObject({ total: 0, starting: 0, running: 0, stopped: 0, failed: 0 });
    expect(r.body.notifications).toMatchObject({ total: 0, pending: 0, delivered: 0, failed: 0 });
    expect(r.body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(r.body.uptime_seconds).toBeGreaterThanOrEqual(0);
    clock += 90_000;
    const later = await api(t, "GET", "/admin/stats", creds("admin"));
    expect(later.body.uptime_seconds - r.body.uptime_seconds).toBeGreaterThanOrEqual(90);
  });

  test("/metrics speaks the Prometheus text format and counts responses by status class", async () => {
    const read = async () => {
      const res = await t.fetch("/metrics", { headers: creds("admin") });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
      return res.text();
    };
    const sample = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => "\\" + c)} (\\d+)$`, "m").exec(text)?.[1]);
    const before = await read();
    await api(t, "GET", "/v1/api-tokens");
    await api(t, "GET", "/v1/api-tokens", alice.bearer);
    const after = await read();
    expect(sample(after, 'runcell_http_responses_total{code="4xx"}')).toBe(sample(before, 'runcell_http_responses_total{code="4xx"}') + 1);
    expect(sample(after, 'runcell_http_responses_total{code="2xx"}')).toBeGreaterThanOrEqual(sample(before, 'runcell_http_responses_total{code="2xx"}') + 2);
    expect(after).toMatch(/^runcell_build_info\{version="[^"]+",commit="[^"]+",bun="[^"]+"\} 1$/m);
    expect(after).toMatch(/^# TYPE runcell_http_responses_total counter$/m);
    expect(after).toMatch(/^runcell_uptime_seconds \d+$/m);
    expect(sample(after, 'runcell_users{state="disabled"}')).toBe(0);
    expect(after).toMatch(/^runcell_tasks\{status="waiting_input"\} 0$/m);
    expect(after).toMatch(/^runcell_workspaces\{status="running"\} 0$/m);
    expect(after).toMatch(/^runcell_notifications\{status="failed"\} 0$/m);
    // Every line is a comment or `name{labels} value`.
    for (const line of after.trim().split("\n")) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? -?\d+(\.\d+)?)$/);
  });

  test("the admin password never reaches the log", () => {
    expect(t.logs.some((l) => l.includes(PASSWORD))).toBe(false);
  });
});
