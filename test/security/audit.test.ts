/**
 * The audit log, end to end on a real app: one row per audited action, each made through the real
 * API from its own client address (X-Forwarded-For, --trust-proxy), and the row it leaves read
 * back through GET /admin/audit — action, actor, user, target, client IP, details — with none of
 * the credentials involved (passwords tried or set, API tokens, session tokens, secret values,
 * webhook secrets and URL paths, OAuth codes and client secrets, trigger URL secrets, the setup
 * token, the admin password) in it; at the end, in no row of the whole table either.
 * Then retention: the service's purge with old rows, and the hourly worker at start with a moved
 * clock and --audit-retention.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { newId } from "../../src/db/ids.ts";
import { auditLog } from "../../src/db/tables.ts";
import type { AuditAction, AuditActor } from "../../src/schema/audit.ts";
import { startTestApp, type TestApp, tempDir } from "../helpers/app.ts";
import { CookieJar, nextIp } from "../helpers/cookies.ts";
import { waitFor } from "../helpers/net.ts";
import { dropDatabaseFor } from "../helpers/pg.ts";
import { type OAuthProvider, startOAuthProvider } from "../helpers/oauth-provider.ts";
import { api } from "../helpers/users.ts";

const ADMIN = "the audit test's admin password";
const UA = "audit-test/1.0";
const ua = { user_agent: UA };
let t: TestApp;
let github: OAuthProvider;
/** Every credential the cases used: no audit row may hold any of them. */
const credentials: string[] = [ADMIN];

beforeAll(async () => {
  github = startOAuthProvider("github");
  t = await startTestApp({ flags: ["--trust-proxy", "--signup", "open", ...github.flags()], env: { RUNCELL_ADMIN_PASSWORD: ADMIN } });
  credentials.push(github.clientSecret);
});
afterAll(async () => {
  await t.stop();
  github.stop();
});

const admin = { authorization: `Bearer ${ADMIN}` };
/** A request from `ip` with a known user agent. */
const from = (ip: string, headers: Record<string, string> = {}) => ({ "x-forwarded-for": ip, "user-agent": UA, ...headers });
const cookieOf = (token: string) => ({ cookie: `${t.app.services.authenticator.cookie.name}=${token}`, origin: t.url });

/** The newest row of `action`, read through the API. */
async function latest(action: string) {
  const r = await api(t, "GET", `/admin/audit?action=${action}&limit=1`, admin);
  expect(r.status).toBe(200);
  return r.body.data[0];
}

/** What the cases share: the accounts and credentials made along the way. */
const st = {
  aliceId: "",
  aliceEmail: "alice@example.com",
  alicePassword: "alice's long passphrase",
  aliceSession: "",
  aliceToken: "",
  bobId: "",
  bobEmail: "bob@example.com",
  integrationId: "",
};

interface Expected {
  action: AuditAction;
  actor: AuditActor;
  user_id: string | null;
  target_id: string | null;
  details: Record<string, unknown>;
  /** Default: the address the request came from. */
  ip?: string | null;
  /** Credentials of this case, checked absent from its row (and from the whole table at the end). */
  credentials?: string[];
}

/** Plays the browser through a GitHub sign-in from `ip`; returns the callback's answer and the code/state it carried. */
async function githubSignIn(ip: string) {
  const jar = new CookieJar();
  const start = await t.fetch("/api/auth/sign-in/social", { method: "POST", headers: from(ip, { "content-type": "application/json" }), body: JSON.stringify({ provider: "github" }) });
  jar.absorb(start);
  const { url } = (await start.json()) as { url: string };
  const back = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
  const callback = new URL(back);
  const res = await fetch(back, { redirect: "manual", headers: from(ip, { cookie: jar.header() }) });
  jar.absorb(res);
  await res.arrayBuffer();
  const flow = [callback.searchParams.get("code"), callback.searchParams.get("state")].filter((v): v is string => !!v);
  return { status: res.status, jar, flow };
}

const CASES: { name: string; run(ip: string): Promise<Expected> }[] = [
  {
    name: "admin.password_changed at start from RUNCELL_ADMIN_PASSWORD: actor system, the source, never the password",
    async run() {
      return { action: "admin.password_changed", actor: "system", user_id: null, target_id: null, ip: null, details: { source: "RUNCELL_ADMIN_PASSWORD" } };
    },
  },
  {
    name: "auth.setup: the first account from the setup link",
    async run(ip) {
      const link = (await t.app.services.setup.issue())!;
      const password = "the first admin's passphrase";
      const r = await api(t, "POST", "/api/auth/setup", from(ip), { token: link.token, email: "root@example.com", password });
      expect(r.status).toBe(201);
      return {
        action: "auth.setup",
        actor: "user",
        user_id: r.body.user.id,
        target_id: r.body.user.id,
        details: { email: "root@example.com", role: "admin", ...ua },
        credentials: [link.token, password, r.body.token],
      };
    },
  },
  {
    name: "auth.sign_up: email and password (sign-up open)",
    async run(ip) {
      const r = await api(t, "POST", "/api/auth/sign-up/email", from(ip), { email: st.aliceEmail, password: st.alicePassword, name: "Alice" });
      expect(r.status).toBe(200);
      st.aliceId = r.body.user.id;
      st.aliceSession = r.body.token;
      return { action: "auth.sign_up", actor: "user", user_id: st.aliceId, target_id: st.aliceId, details: { method: "password", email: st.aliceEmail, ...ua }, credentials: [st.alicePassword, r.body.token] };
    },
  },
  {
    name: "auth.sign_in: email and password; the target is the new login session",
    async run(ip) {
      const r = await api(t, "POST", "/api/auth/sign-in/email", from(ip), { email: "ALICE@example.com", password: st.alicePassword });
      expect(r.status).toBe(200);
      const session = await api(t, "GET", "/api/auth/get-session", cookieOf(r.body.token));
      return { action: "auth.sign_in", actor: "user", user_id: st.aliceId, target_id: session.body.session.id, details: { method: "password", ...ua }, credentials: [st.alicePassword, r.body.token] };
    },
  },
  {
    name: "auth.sign_in_failed: a wrong password names the account and the email tried, never the password",
    async run(ip) {
      const wrong = "not alice's passphrase at all";
      const r = await api(t, "POST", "/api/auth/sign-in/email", from(ip), { email: st.aliceEmail, password: wrong });
      expect(r.status).toBe(401);
      return {
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: st.aliceId,
        target_id: null,
        details: { method: "password", email: st.aliceEmail, reason: "wrong_password", ...ua },
        credentials: [wrong],
      };
    },
  },
  {
    name: "auth.sign_in_failed: an unknown email (no user)",
    async run(ip) {
      const tried = "a guess at a password";
      const r = await api(t, "POST", "/api/auth/sign-in/email", from(ip), { email: "Nobody@Example.com", password: tried });
      expect(r.status).toBe(401);
      return {
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: null,
        target_id: null,
        details: { method: "password", email: "nobody@example.com", reason: "unknown_account", ...ua },
        credentials: [tried],
      };
    },
  },
  {
    name: "auth.sign_in_failed: throttled (the attempt after five failures is refused before any check)",
    async run(ip) {
      const accountKey = `signin:acct:${st.aliceEmail}`;
      t.app.services.throttle.succeed(accountKey); // the earlier wrong password counted too
      const guesses = Array.from({ length: 6 }, (_, i) => `guess number ${i} for alice`);
      const statuses: number[] = [];
      for (const password of guesses) statuses.push((await api(t, "POST", "/api/auth/sign-in/email", from(ip), { email: st.aliceEmail, password })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
      t.app.services.throttle.succeed(accountKey); // alice signs in again below
      return {
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: st.aliceId,
        target_id: null,
        details: { method: "password", email: st.aliceEmail, reason: "throttled", ...ua },
        credentials: guesses,
      };
    },
  },
  {
    name: "token.created: the token's name, never the token (by the user's cookie session)",
    async run(ip) {
      const r = await api(t, "POST", "/v1/api-tokens", from(ip, cookieOf(st.aliceSession)), { name: "laptop" });
      expect(r.status).toBe(201);
      st.aliceToken = r.body.token;
      return { action: "token.created", actor: "user", user_id: st.aliceId, target_id: r.body.id, details: { name: "laptop" }, credentials: [r.body.token, st.aliceSession] };
    },
  },
  {
    name: "token.deleted",
    async run(ip) {
      const made = await api(t, "POST", "/v1/api-tokens", from(ip, { authorization: `Bearer ${st.aliceToken}` }), { name: "ci" });
      const r = await api(t, "DELETE", `/v1/api-tokens/${made.body.id}`, from(ip, { authorization: `Bearer ${st.aliceToken}` }));
      expect(r.status).toBe(204);
      return { action: "token.deleted", actor: "user", user_id: st.aliceId, target_id: made.body.id, details: { name: "ci" }, credentials: [made.body.token, st.aliceToken] };
    },
  },
  {
    name: "user.created by the operator (POST /admin/users): actor admin, the account acted on, never its password",
    async run(ip) {
      const password = "bob's initial passphrase";
      const r = await api(t, "POST", "/admin/users", from(ip, admin), { email: st.bobEmail, password, name: "Bob" });
      expect(r.status).toBe(201);
      st.bobId = r.body.id;
      return { action: "user.created", actor: "admin", user_id: st.bobId, target_id: st.bobId, details: { email: st.bobEmail, role: "user" }, credentials: [password] };
    },
  },
  {
    name: "user.role_changed: from and to",
    async run(ip) {
      const r = await api(t, "PATCH", `/admin/users/${st.bobId}`, from(ip, admin), { role: "admin" });
      expect(r.status).toBe(200);
      return { action: "user.role_changed", actor: "admin", user_id: st.bobId, target_id: st.bobId, details: { from: "user", to: "admin" } };
    },
  },
  {
    name: "user.disabled",
    async run(ip) {
      const r = await api(t, "PATCH", `/admin/users/${st.bobId}`, from(ip, admin), { disabled: true });
      expect(r.status).toBe(200);
      return { action: "user.disabled", actor: "admin", user_id: st.bobId, target_id: st.bobId, details: {} };
    },
  },
  {
    name: "auth.sign_in_failed: a disabled account, with the right password",
    async run(ip) {
      const r = await api(t, "POST", "/api/auth/sign-in/email", from(ip), { email: st.bobEmail, password: "bob's initial passphrase" });
      expect(r.status).toBe(403);
      return { action: "auth.sign_in_failed", actor: "anonymous", user_id: st.bobId, target_id: null, details: { method: "password", email: st.bobEmail, reason: "disabled", ...ua } };
    },
  },
  {
    name: "user.enabled",
    async run(ip) {
      const r = await api(t, "PATCH", `/admin/users/${st.bobId}`, from(ip, admin), { disabled: false, role: "admin" });
      expect(r.status).toBe(200);
      // The role did not change: only the enabling is recorded.
      expect((await latest("user.role_changed")).details).toEqual({ from: "user", to: "admin" });
      return { action: "user.enabled", actor: "admin", user_id: st.bobId, target_id: st.bobId, details: {} };
    },
  },
  {
    name: "user.password_changed (no API route changes a user's password yet: the service, as a route would call it)",
    async run(ip) {
      const password = "bob's second passphrase";
      await t.app.services.users.setPassword(st.bobId, password, { actor: "admin", ip });
      return { action: "user.password_changed", actor: "admin", user_id: st.bobId, target_id: st.bobId, details: {}, credentials: [password] };
    },
  },
  {
    name: "secret.set: a new secret, by name only",
    async run(ip) {
      const value = "sk-live-the-secret-value-1";
      const r = await api(t, "PUT", "/v1/secrets/DEPLOY_KEY", from(ip, { authorization: `Bearer ${st.aliceToken}` }), { value });
      expect(r.status).toBe(204);
      return { action: "secret.set", actor: "user", user_id: st.aliceId, target_id: "DEPLOY_KEY", details: { name: "DEPLOY_KEY", created: true }, credentials: [value] };
    },
  },
  {
    name: "secret.set: a replaced secret",
    async run(ip) {
      const value = "sk-live-the-secret-value-2";
      const r = await api(t, "PUT", "/v1/secrets/DEPLOY_KEY", from(ip, { authorization: `Bearer ${st.aliceToken}` }), { value });
      expect(r.status).toBe(204);
      return { action: "secret.set", actor: "user", user_id: st.aliceId, target_id: "DEPLOY_KEY", details: { name: "DEPLOY_KEY", created: false }, credentials: [value] };
    },
  },
  {
    name: "secret.deleted",
    async run(ip) {
      const r = await api(t, "DELETE", "/v1/secrets/DEPLOY_KEY", from(ip, { authorization: `Bearer ${st.aliceToken}` }));
      expect(r.status).toBe(204);
      return { action: "secret.deleted", actor: "user", user_id: st.aliceId, target_id: "DEPLOY_KEY", details: { name: "DEPLOY_KEY" } };
    },
  },
  {
    name: "integration.changed: the webhook URL's origin only (its path and query are often the secret), never the signing secret",
    async run(ip) {
      const pathSecret = "T0001/B0002/pathsecretXYZ";
      const querySecret = "querysecret123";
      const secret = "whsec_the_signing_secret";
      const r = await api(t, "POST", "/v1/integrations", from(ip, { authorization: `Bearer ${st.aliceToken}` }), {
        type: "webhook",
        config: { url: `https://hooks.example.com/services/${pathSecret}?token=${querySecret}`, secret },
      });
      expect(r.status).toBe(201);
      st.integrationId = r.body.id;
      return {
        action: "integration.changed",
        actor: "user",
        user_id: st.aliceId,
        target_id: st.integrationId,
        details: { type: "webhook", created: true, url_origin: "https://hooks.example.com", has_secret: true },
        credentials: [pathSecret, querySecret, secret],
      };
    },
  },
  {
    name: "integration.deleted",
    async run(ip) {
      const r = await api(t, "DELETE", `/v1/integrations/${st.integrationId}`, from(ip, { authorization: `Bearer ${st.aliceToken}` }));
      expect(r.status).toBe(204);
      return { action: "integration.deleted", actor: "user", user_id: st.aliceId, target_id: st.integrationId, details: { failed_deliveries: 0 } };
    },
  },
  {
    name: "auth.sign_up through GitHub (a new account while sign-up is open); never the code or state",
    async run(ip) {
      github.account = { id: "1001", name: "Carol", email: "carol@example.com", verified: true };
      const r = await githubSignIn(ip);
      expect(r.status).toBe(302);
      const carol = (await t.app.services.users.byEmail("carol@example.com"))!;
      return { action: "auth.sign_up", actor: "user", user_id: carol.id, target_id: carol.id, details: { method: "github", email: "carol@example.com", ...ua }, credentials: r.flow };
    },
  },
  {
    name: "auth.oauth_linked: GitHub linked to an existing account by its verified email",
    async run(ip) {
      github.account = { id: "1002", name: "Bob", email: st.bobEmail, verified: true };
      const r = await githubSignIn(ip);
      expect(r.status).toBe(302);
      return { action: "auth.oauth_linked", actor: "user", user_id: st.bobId, target_id: expect.stringMatching(/^oac_/) as unknown as string, details: { provider: "github", email: st.bobEmail, ...ua }, credentials: r.flow };
    },
  },
  {
    name: "auth.sign_in through GitHub (the linked account again)",
    async run(ip) {
      const r = await githubSignIn(ip);
      expect(r.status).toBe(302);
      const session = await api(t, "GET", "/api/auth/get-session", { cookie: r.jar.header() });
      return { action: "auth.sign_in", actor: "user", user_id: st.bobId, target_id: session.body.session.id, details: { method: "github", ...ua }, credentials: r.flow };
    },
  },
  {
    name: "playbook.trigger_rotated: neither the old nor the new trigger secret",
    async run(ip) {
      const bearer = from(ip, { authorization: `Bearer ${st.aliceToken}` });
      const profile = await api(t, "POST", "/v1/profiles", bearer, { name: "demo", model: { provider: "demo", name: "demo" } });
      expect(profile.status, JSON.stringify(profile.body)).toBe(201);
      const pb = await api(t, "POST", "/v1/playbooks", bearer, { name: "nightly", profile_id: profile.body.id, prompt: "Check the build." });
      expect(pb.status, JSON.stringify(pb.body)).toBe(201);
      const r = await api(t, "POST", `/v1/playbooks/${pb.body.id}/rotate-trigger`, bearer);
      expect(r.status).toBe(200);
      const secretOf = (url: string) => url.split("/").pop()!;
      expect(secretOf(r.body.trigger_url)).not.toBe(secretOf(pb.body.trigger_url));
      return {
        action: "playbook.trigger_rotated",
        actor: "user",
        user_id: st.aliceId,
        target_id: pb.body.id,
        details: { name: "nightly" },
        credentials: [secretOf(pb.body.trigger_url), secretOf(r.body.trigger_url)],
      };
    },
  },
  {
    name: "admin.config_changed: each field sent, from and to",
    async run(ip) {
      const before = (await api(t, "GET", "/admin/config", admin)).body;
      const r = await api(t, "PATCH", "/admin/config", from(ip, admin), { signup: "closed", default_max_concurrency: before.default_max_concurrency + 2, rate_limit: { burst: 999_999 } });
      expect(r.status).toBe(200);
      return {
        action: "admin.config_changed",
        actor: "admin",
        user_id: null,
        target_id: null,
        details: {
          changes: {
            signup: { from: "open", to: "closed" },
            default_max_concurrency: { from: before.default_max_concurrency, to: before.default_max_concurrency + 2 },
            "rate_limit.burst": { from: before.rate_limit.burst, to: 999_999 },
          },
        },
      };
    },
  },
  {
    name: "auth.sign_in_failed through GitHub: refused (sign-up closed, no account), with the provider's email",
    async run(ip) {
      github.account = { id: "1003", name: "Stranger", email: "stranger@example.com", verified: true };
      const r = await githubSignIn(ip);
      expect(r.status).toBe(403);
      return {
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: null,
        target_id: null,
        details: { method: "github", email: "stranger@example.com", reason: "FORBIDDEN", error: expect.stringContaining("Sign-up is closed") as unknown as string, ...ua },
        credentials: r.flow,
      };
    },
  },
  {
    name: "auth.sign_in_failed through GitHub: the user declined at the provider (no email known)",
    async run(ip) {
      github.denyWith = "access_denied";
      try {
        const r = await githubSignIn(ip);
        expect(r.status).toBe(401);
      } finally {
        github.denyWith = null;
      }
      return {
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: null,
        target_id: null,
        details: { method: "github", reason: "UNAUTHORIZED", error: expect.stringContaining("access_denied") as unknown as string, ...ua },
      };
    },
  },
];

describe("each audited action leaves one row: actor, user, target, client IP, details without credentials", () => {
  for (const c of CASES) {
    test(c.name, async () => {
      const ip = nextIp();
      const want = await c.run(ip);
      credentials.push(...(want.credentials ?? []));
      const row = await latest(want.action);
      expect(row).toEqual({
        id: expect.stringMatching(/^aud_[0-9a-z]{26}$/),
        at: expect.any(String),
        actor: want.actor,
        user_id: want.user_id,
        action: want.action,
        target_id: want.target_id,
        ip: want.ip === undefined ? ip : want.ip,
        details: want.details,
      });
      const text = JSON.stringify(row);
      for (const secret of [ADMIN, ...(want.credentials ?? [])]) expect(text).not.toContain(secret);
    });
  }

  test("no row of the whole table (the database itself, not only the API) holds any credential used above", async () => {
    const rows = await t.app.services.db.select().from(auditLog);
    expect(rows.length).toBeGreaterThanOrEqual(CASES.length);
    const text = JSON.stringify(rows);
    expect(credentials.length).toBeGreaterThan(20);
    for (const secret of credentials) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/rc_[0-9a-f]{16}/);
  });
});

test("a PATCH /admin/config that changes nothing writes no row; one that changes a field records only that field", async () => {
  const count = async () => (await api(t, "GET", "/admin/audit?action=admin.config_changed&limit=100", admin)).body.data.length as number;
  const now = (await api(t, "GET", "/admin/config", admin)).body;
  const rows = await count();
  for (const body of [{}, { rate_limit: {} }, { policy: {} }, { signup: now.signup }, { rate_limit: { burst: now.rate_limit.burst } }]) {
    expect((await api(t, "PATCH", "/admin/config", admin, body)).status).toBe(200);
  }
  expect(await count()).toBe(rows);
  const other = now.signup === "open" ? "closed" : "open";
  expect((await api(t, "PATCH", "/admin/config", admin, { signup: other, rate_limit: { burst: now.rate_limit.burst } })).status).toBe(200);
  expect(await count()).toBe(rows + 1);
  expect((await latest("admin.config_changed")).details).toEqual({ changes: { signup: { from: now.signup, to: other } } });
  await api(t, "PATCH", "/admin/config", admin, { signup: now.signup });
});

describe("retention", () => {
  test("the default is 90 days", () => {
    expect(t.config.auditRetentionMs).toBe(90 * 86_400_000);
  });

  test("purge(before) deletes the rows recorded before the cutoff and keeps the others", async () => {
    const { db, audit, now } = t.app.services;
    const day = 86_400_000;
    const old = [newId("audit"), newId("audit")];
    for (const [i, id] of old.entries()) {
      await db.insert(auditLog).values({ id, at: now() - (91 + i) * day, actor: "user", action: "auth.sign_in", user_id: "usr_retention" });
    }
    const kept = newId("audit");
    await db.insert(auditLog).values({ id: kept, at: now() - 89 * day, actor: "user", action: "auth.sign_in", user_id: "usr_retention" });
    expect(await audit.purge(now() - t.config.auditRetentionMs)).toBe(2);
    expect((await audit.list({ user_id: "usr_retention", limit: 10 })).data.map((r) => r.id)).toEqual([kept]);
    expect(await audit.purge(now() - t.config.auditRetentionMs)).toBe(0);
  });

  test("the worker purges at start by --audit-retention, on the app's clock", async () => {
    const dir = tempDir();
    const hour = 3_600_000;
    let clock = Date.UTC(2030, 0, 1);
    try {
      const first = await startTestApp({ dataDir: dir, keepDataDir: true, now: () => clock, flags: ["--audit-retention", "2h"] });
      await first.app.services.audit.record({ action: "secret.deleted", actor: "user", user_id: "usr_clock", target_id: "OLD" });
      clock += 2 * hour;
      await first.app.services.audit.record({ action: "secret.deleted", actor: "user", user_id: "usr_clock", target_id: "NEWER" });
      expect((await first.app.services.audit.list({ user_id: "usr_clock", limit: 10 })).data.map((r) => r.target_id)).toEqual(["NEWER", "OLD"]);
      await first.stop();

      clock += hour; // OLD is 3 h old, NEWER 1 h
      const second = await startTestApp({ dataDir: dir, keepDataDir: true, now: () => clock, flags: ["--audit-retention", "2h"] });
      try {
        const left = await waitFor(async () => {
          const rows = (await second.app.services.audit.list({ user_id: "usr_clock", limit: 10 })).data;
          return rows.length === 1 ? rows : null;
        }, { what: "the purge at start" });
        expect(left.map((r) => r.target_id)).toEqual(["NEWER"]);
        expect(second.logs.some((l) => l.includes("old audit log rows purged"))).toBe(true);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await dropDatabaseFor(dir);
    }
  });
});
