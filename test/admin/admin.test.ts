/**
 * The operator surface as a whole: the admin password opens /admin/* and /metrics and nothing
 * else does (a wrong password, a user's cookie; anonymous and a user's token are in each route's
 * table under test/http/routes/admin-*.test.ts), no password set means 401 saying how to set one,
 * wrong passwords are throttled per IP (an IPv6 client's /64 being one), a changed password takes effect at once, a disabled user
 * is refused everywhere at once, and the password never reaches the log.
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

type Creds = "wrong password" | "user cookie" | "admin";
const creds = (c: Creds): Record<string, string> => {
  const ip = { "x-forwarded-for": nextIp() };
  switch (c) {
    case "wrong password":
      return { ...ip, authorization: "Bearer not the password" };
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
  { name: "GET /admin/workspaces", method: "GET", path: () => "/admin/workspaces" },
  { name: "DELETE /admin/workspaces/:id", method: "DELETE", path: () => `/admin/workspaces/ctr_${"0".repeat(26)}` },
  { name: "GET /admin/notifications", method: "GET", path: () => "/admin/notifications" },
  { name: "GET /admin/audit", method: "GET", path: () => "/admin/audit" },
];

describe("who may call /admin/*", () => {
  const refused = (["wrong password", "user cookie"] as const).flatMap((c) => routes.map((r) => [`${r.name} with ${c}`, c, r] as const));
  test.each(refused)("%s → 401", async (_n, c, r) => {
    const res = await api(t, r.method, r.path(), creds(c), r.body);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("UNAUTHORIZED");
  });

  test("an anonymous caller gets 401 even with a bad body (credentials are checked first)", async () => {
    const r = await api(t, "PATCH", "/admin/config", { "x-forwarded-for": nextIp() }, { rate_limit: { burst: -1 } });
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

  test("refused admin passwords leave admin.sign_in_failed rows (address, path, reason; never the value); no credential leaves none", async () => {
    const ip = nextIp();
    const rowsOf = async () =>
      ((await api(t, "GET", "/admin/audit?action=admin.sign_in_failed&limit=100", creds("admin"))).body.data as { ip: string; actor: string; details: Record<string, string> }[]).filter((r) => r.ip === ip);
    for (let i = 0; i < 5; i++) expect((await api(t, "GET", "/admin/users", { "x-forwarded-for": ip, "user-agent": "probe/1", authorization: `Bearer guess-${i}-secret` })).status).toBe(401);
    expect((await api(t, "GET", "/admin/users", { "x-forwarded-for": ip, authorization: "Bearer guess-5-secret" })).status).toBe(429);
    expect((await api(t, "GET", "/admin/users", { "x-forwarded-for": ip })).status).toBe(401);
    const rows = await rowsOf();
    expect(rows.map((r) => r.details.reason).sort()).toEqual(["throttled", "wrong_password", "wrong_password", "wrong_password", "wrong_password", "wrong_password"]);
    expect(rows.every((r) => r.actor === "anonymous" && r.details.path === "/admin/users")).toBe(true);
    expect(rows.find((r) => r.details.reason === "wrong_password")!.details.user_agent).toBe("probe/1");
    expect(JSON.stringify(rows)).not.toContain("secret");
    clock += 10_000;
  });

  test("an IPv6 client is throttled by its /64: wrong passwords from five of its addresses block a sixth, not the next /64; the audit rows keep each full address", async () => {
    const sprayed = ["2001:db8:6:1::1", "2001:db8:6:1::2", "2001:db8:6:1:1:2:3:4", "2001:0db8:0006:0001:0000:0000:0000:0005", "2001:db8:6:1:ffff::"];
    for (const [i, ip] of sprayed.entries()) expect((await api(t, "GET", "/admin/stats", { "x-forwarded-for": ip, authorization: `Bearer v6 guess ${i}` })).status).toBe(401);
    expect((await api(t, "GET", "/admin/stats", { "x-forwarded-for": "2001:db8:6:1::6", ...A })).status).toBe(429);
    expect((await api(t, "GET", "/admin/stats", { "x-forwarded-for": "2001:db8:6:2::1", ...A })).status).toBe(200);
    const rows = (await api(t, "GET", "/admin/audit?action=admin.sign_in_failed&limit=100", creds("admin"))).body.data as { ip: string; details: Record<string, string> }[];
    const mine = rows.filter((r) => r.ip.startsWith("2001:db8:6:1") || r.ip.startsWith("2001:0db8"));
    expect(mine.map((r) => r.ip).sort()).toEqual([...sprayed, "2001:db8:6:1::6"].sort());
    clock += 2000;
  });

  test("a changed admin password takes effect at once (the verification cache is keyed by the stored hash)", async () => {
    expect((await api(t, "GET", "/admin/config", creds("admin"))).status).toBe(200);
    await t.app.services.adminPassword.set("a brand new operator pw");
    expect((await api(t, "GET", "/admin/config", creds("admin"))).status).toBe(401);
    expect((await api(t, "GET", "/admin/config", { "x-forwarded-for": nextIp(), authorization: "Bearer a brand new operator pw" })).status).toBe(200);
    await t.app.services.adminPassword.set(PASSWORD);
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
    t.app.services.users.onDisabled.push((id) => void seen.push(id));

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
    const rows = t.app.services.sqlite!.query<{ n: number }, [string]>("SELECT count(*) AS n FROM login_sessions WHERE user_id = ?").get(u.id)!;
    expect(rows.n).toBe(0);
    // Disabling twice runs the hooks once.
    await api(t, "PATCH", `/admin/users/${u.id}`, creds("admin"), { disabled: true });
    expect(seen).toEqual([u.id]);

    await api(t, "PATCH", `/admin/users/${u.id}`, creds("admin"), { disabled: false });
    expect((await api(t, "GET", "/v1/api-tokens", u.bearer)).status).toBe(200);
    expect((await api(t, "GET", "/v1/api-tokens", { cookie: signedIn })).status).toBe(401);
  });
});

test("the admin password never reaches the log", () => {
  expect(t.logs.some((l) => l.includes(PASSWORD))).toBe(false);
});
