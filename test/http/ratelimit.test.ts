/**
 * The per-caller token bucket on a real server: burst 10 → of 11 requests at once, 10 pass and 1
 * gets 429 with Retry-After and RateLimit-* headers; callers are independent (an anonymous IPv6
 * caller being its /64); PATCH /admin/config
 * changes the limits live; and the precedence of persisted settings against explicit flags at
 * start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { createApp } from "../../src/app.ts";
import { parseArgs, resolveConfig } from "../../src/config.ts";
import { createLogger } from "../../src/log.ts";
import { startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { nextIp } from "../helpers/cookies.ts";
import { freePort } from "../helpers/net.ts";
import { databaseFor, dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";
import { api, createUser } from "../helpers/users.ts";

const ADMIN = "rate limit admin pw";
const A = { authorization: `Bearer ${ADMIN}` };

describe("token bucket per caller", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ flags: ["--rate-limit-burst", "10", "--rate-limit-per-minute", "60", "--trust-proxy"], env: { RUNCELL_ADMIN_PASSWORD: ADMIN } });
  });
  afterAll(() => t.stop());

  // Cookie sessions: cheap to verify, so all requests reach the limiter within a few ms (a
  // first-time token would spend a bcrypt compare per request while the bucket refills).
  const burst = (n: number, headers: Record<string, string>, path = "/v1/api-tokens") => Promise.all(Array.from({ length: n }, () => t.fetch(path, { headers })));

  test("11 requests at once from one user (cookie): 10 pass, 1 gets 429 RATE_LIMITED with Retry-After and RateLimit-* headers", async () => {
    const u = await createUser(t);
    const res = await burst(11, { cookie: u.cookie });
    const ok = res.filter((r) => r.status === 200);
    const limited = res.filter((r) => r.status === 429);
    expect(ok).toHaveLength(10);
    expect(limited).toHaveLength(1);
    const r = limited[0]!;
    const body = (await r.json()) as { code: string; details: { retry_after: number } };
    expect(body.code).toBe("RATE_LIMITED");
    // 60/min refill: one token a second.
    expect(r.headers.get("retry-after")).toBe("1");
    expect(body.details.retry_after).toBe(1);
    expect(r.headers.get("ratelimit-limit")).toBe("10");
    expect(r.headers.get("ratelimit-remaining")).toBe("0");
    expect(Number(r.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(9);
    for (const o of ok) {
      expect(o.headers.get("ratelimit-limit")).toBe("10");
      expect(Number(o.headers.get("ratelimit-remaining"))).toBeLessThanOrEqual(9);
    }
    const remaining = ok.map((o) => Number(o.headers.get("ratelimit-remaining"))).sort((a, b) => a - b);
    expect(remaining).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test("callers are independent: another user and another address still have their burst; anonymous callers are keyed by IP", async () => {
    const other = await createUser(t);
    const res = await burst(10, { cookie: other.cookie });
    expect(res.every((r) => r.status === 200)).toBe(true);
    const ip = nextIp();
    const anon = await burst(11, { "x-forwarded-for": ip }, "/api/auth/get-session");
    expect(anon.filter((r) => r.status === 200)).toHaveLength(10);
    expect(anon.filter((r) => r.status === 429)).toHaveLength(1);
    const fresh = await t.fetch("/api/auth/get-session", { headers: { "x-forwarded-for": nextIp() } });
    expect(fresh.status).toBe(200);
  });

  test("cross-site refusals are charged like any request: 10 from one user's cookie get 403, the 11th 429 (the Origin is checked after the bucket)", async () => {
    const u = await createUser(t);
    const res = await Promise.all(
      Array.from({ length: 11 }, () => t.fetch("/v1/api-tokens", { method: "POST", headers: { cookie: u.cookie, origin: "https://evil.example", "content-type": "application/json" }, body: '{"name":"x"}' })),
    );
    expect(res.filter((r) => r.status === 403)).toHaveLength(10);
    expect(res.filter((r) => r.status === 429)).toHaveLength(1);
    const remaining = res.filter((r) => r.status === 403).map((r) => Number(r.headers.get("ratelimit-remaining"))).sort((a, b) => a - b);
    expect(remaining).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Sign-in's login-CSRF refusal (no credential: the address's bucket) reports it too.
    const ip = nextIp();
    const login = await t.fetch("/api/auth/sign-in/email", { method: "POST", headers: { "x-forwarded-for": ip, origin: "https://evil.example", "content-type": "application/json" }, body: JSON.stringify({ email: u.email, password: u.password }) });
    expect(login.status).toBe(403);
    expect(login.headers.get("ratelimit-remaining")).toBe("9");
  });

  test("an anonymous IPv6 client is keyed by its /64: eleven addresses of one /64 share one burst, the next /64 has its own", async () => {
    const anon = await Promise.all(
      Array.from({ length: 11 }, (_, i) => t.fetch("/api/auth/get-session", { headers: { "x-forwarded-for": i % 2 ? `2001:db8:7:1::${i + 1}` : `2001:0db8:0007:0001:${i + 1}:0:0:${i + 1}` } })),
    );
    expect(anon.filter((r) => r.status === 200)).toHaveLength(10);
    expect(anon.filter((r) => r.status === 429)).toHaveLength(1);
    const fresh = await t.fetch("/api/auth/get-session", { headers: { "x-forwarded-for": "2001:db8:7:2::1" } });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get("ratelimit-remaining")).toBe("9");
  });

  test("the refill lets a request through again after Retry-After", async () => {
    const u = await createUser(t);
    const res = await burst(11, { cookie: u.cookie });
    const limited = res.find((r) => r.status === 429)!;
    await Bun.sleep(Number(limited.headers.get("retry-after")) * 1000 + 50);
    expect((await t.fetch("/v1/api-tokens", { headers: { cookie: u.cookie } })).status).toBe(200);
  });

  test("PATCH /admin/config changes the limits live", async () => {
    const r = await api(t, "PATCH", "/admin/config", { ...A, "x-forwarded-for": nextIp() }, { rate_limit: { burst: 20, per_minute: 120 } });
    expect(r.status).toBe(200);
    expect(r.body.rate_limit).toEqual({ per_minute: 120, burst: 20 });
    const u = await createUser(t);
    const res = await burst(21, { cookie: u.cookie });
    expect(res.filter((x) => x.status === 200)).toHaveLength(20);
    const limited = res.filter((x) => x.status === 429);
    expect(limited).toHaveLength(1);
    expect(limited[0]!.headers.get("ratelimit-limit")).toBe("20");
    const body = (await limited[0]!.json()) as { error: string };
    expect(body.error).toContain("120 requests per minute");

    await api(t, "PATCH", "/admin/config", { ...A, "x-forwarded-for": nextIp() }, { rate_limit: { burst: 3 } });
    const v = await createUser(t);
    const small = await burst(4, { cookie: v.cookie });
    expect(small.filter((x) => x.status === 200)).toHaveLength(3);
  });

  test("idle buckets are evicted (memory stays bounded)", () => {
    const limiter = t.app.services.limiter;
    expect(limiter.size).toBeGreaterThan(0);
    limiter.configure(1_000_000_000, 1);
    limiter.sweep();
    expect(limiter.size).toBe(0);
  });
});

describe("persisted settings against explicit configuration at start", () => {
  test("saved values win over defaults; an explicit flag or env wins over a saved value, with a warning", async () => {
    const dataDir = tempDir();
    // The PostgreSQL pass: the three starts share one database, as they share the data dir.
    const database = PG_SERVER ? ["--database", await databaseFor(dataDir)] : [];
    const boot = async (flags: string[], env: Record<string, string> = {}) => {
      const logs: string[] = [];
      const config = resolveConfig(parseArgs(["--http", `127.0.0.1:${await freePort()}`, "--data-dir", dataDir, ...database, ...flags]).flags, env);
      const app = await createApp(config, { logger: createLogger({ level: "debug", sink: (l) => logs.push(l) }) });
      return { app, logs };
    };
    try {
      const first = await boot([]);
      expect(first.app.services.runtimeConfig.get()).toMatchObject({ rate_limit: { per_minute: 60, burst: 10 }, default_max_concurrency: 5, signup: "closed" });
      await first.app.services.runtimeConfig.patch({ rate_limit: { per_minute: 30, burst: 4 }, signup: "open", default_max_concurrency: 9 });
      await first.app.stop();

      // Nothing explicit: the saved values apply, to the limiter as well.
      const second = await boot([]);
      expect(second.app.services.runtimeConfig.get()).toMatchObject({ rate_limit: { per_minute: 30, burst: 4 }, default_max_concurrency: 9, signup: "open" });
      expect(second.app.services.limiter.settings).toEqual({ per_minute: 30, burst: 4 });
      expect(second.app.services.config.signup).toBe("open");
      expect(second.logs.some((l) => l.includes("overridden"))).toBe(false);
      await second.app.stop();

      // Explicit flag and env win, each with a warning naming where it came from.
      const third = await boot(["--rate-limit-burst", "50"], { RUNCELL_SIGNUP: "closed" });
      expect(third.app.services.runtimeConfig.get()).toMatchObject({ rate_limit: { per_minute: 30, burst: 50 }, default_max_concurrency: 9, signup: "closed" });
      expect(third.app.services.limiter.settings).toEqual({ per_minute: 30, burst: 50 });
      const warnings = third.logs.filter((l) => l.includes("overridden by explicit configuration")).map((l) => JSON.parse(l));
      expect(warnings.map((w) => [w.setting, w.set_by]).sort()).toEqual([
        ["rate_limit.burst", "--rate-limit-burst"],
        ["signup", "RUNCELL_SIGNUP"],
      ]);
      expect(warnings.every((w) => w.level === "warn")).toBe(true);
      await third.app.stop();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await dropDatabaseFor(dataDir);
    }
  });
});

test("every response carries the RateLimit headers; only the API surfaces take from the bucket", async () => {
  const t = await startTestApp({ flags: ["--rate-limit-per-minute", "60", "--rate-limit-burst", "10"] });
  try {
    for (const path of ["/healthz", "/docs", "/"]) {
      const r = await t.fetch(path);
      expect(r.headers.get("ratelimit-limit")).toBe("10");
      expect(r.headers.get("ratelimit-remaining")).toBe("10");
      expect(r.headers.get("ratelimit-reset")).toBe("0");
    }
    const api = await t.fetch("/v1/api-tokens");
    expect(api.headers.get("ratelimit-remaining")).toBe("9");
    expect((await t.fetch("/healthz")).headers.get("ratelimit-remaining")).toBe("9");
  } finally {
    await t.stop();
  }
});

test("answers made with the pipeline's headers at once (stored JSON: the profile list, /healthz) carry the same headers as any other, per request", async () => {
  const t = await startTestApp({ flags: ["--rate-limit-per-minute", "60", "--rate-limit-burst", "10"] });
  try {
    // /healthz from an address with no bucket: a full one, reported without looking the address up.
    const h = await t.fetch("/healthz");
    expect([h.headers.get("ratelimit-remaining"), h.headers.get("ratelimit-reset"), h.headers.get("x-content-type-options")]).toEqual(["10", "0", "nosniff"]);
    const h2 = await t.fetch("/healthz");
    expect(h2.headers.get("x-request-id")).not.toBe(h.headers.get("x-request-id"));
    const u = await createUser(t);
    const seen = new Set<string>();
    const remaining: string[] = [];
    // The profile list (RequestContext.respond) and the token list (headers set on a made Response), alternating.
    for (const path of ["/v1/profiles", "/v1/api-tokens", "/v1/profiles", "/v1/profiles?limit=5"]) {
      const r = await api(t, "GET", path, u.bearer);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toMatch(/^application\/json; ?charset=utf-8$/);
      expect(r.headers.get("x-content-type-options")).toBe("nosniff");
      expect(r.headers.get("ratelimit-limit")).toBe("10");
      expect(r.headers.get("ratelimit-reset")).toMatch(/^[1-9]\d*$/);
      expect(r.headers.get("x-runcell-replica")).toMatch(/^rep_/);
      seen.add(r.headers.get("x-request-id")!);
      remaining.push(r.headers.get("ratelimit-remaining")!);
    }
    expect(seen.size).toBe(4);
    expect(remaining).toEqual(["9", "8", "7", "6"]);
    // The token's first verification was paid for by this address's bucket: /healthz now reports it.
    expect((await t.fetch("/healthz")).headers.get("ratelimit-remaining")).toBe("9");
    await t.fetch("/v1/me"); // anonymous: 401, taking from it again
    expect((await t.fetch("/healthz")).headers.get("ratelimit-remaining")).toBe("8");
  } finally {
    await t.stop();
  }
});

describe("re-reading saved settings (a replica that missed another's announcement)", () => {
  test("resync applies what another process saved, live (the limiter too); nothing saved anew: no change", async () => {
    const t = await startTestApp();
    try {
      const rc = t.app.services.runtimeConfig;
      expect(await rc.resync()).toBe(false);
      // Another replica's PATCH, saved in the shared settings without this process hearing of it.
      await t.app.services.settings.set("runtime_config", { rate_limit: { per_minute: 42, burst: 7 }, signup: "open" });
      expect(await rc.resync()).toBe(true);
      expect(rc.get()).toMatchObject({ rate_limit: { per_minute: 42, burst: 7 }, signup: "open" });
      expect(t.app.services.limiter.settings).toEqual({ per_minute: 42, burst: 7 });
      expect(await rc.resync()).toBe(false);
    } finally {
      await t.stop();
    }
  });
});
