/**
 * Forged API tokens cannot buy bcrypt compares past the rate limit. A forged token that reuses a
 * real token's lookup prefix with a valid checksum reaches a bcrypt compare; the client's address
 * pays for it from its own bucket first, so with burst 3, ten such tokens from one address spend
 * at most three compares (REST and the /v1/stream upgrade alike) and the rest are answered 429
 * uncompared; the same forged token again costs nothing (the refusal is cached); the real token
 * keeps working from another address, and once verified also from the exhausted one. An IPv6
 * client's addresses in one /64 are one address (it holds them all).
 *
 * Compares are counted by wrapping Bun.password.verify in this process (the app runs in it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { nextIp } from "../helpers/cookies.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

const BURST = 3;
let t: TestApp;
let alice: TestUser;
let compares = 0;
const realVerify = Bun.password.verify;

beforeAll(async () => {
  Bun.password.verify = ((...args: Parameters<typeof realVerify>) => {
    compares++;
    return realVerify(...args);
  }) as typeof realVerify;
  // 6 a minute: one token back every 10 s, so a test's burst is not refilled while it runs.
  t = await startTestApp({ flags: ["--rate-limit-burst", String(BURST), "--rate-limit-per-minute", "6", "--trust-proxy"] });
  alice = await createUser(t);
});
afterAll(async () => {
  Bun.password.verify = realVerify;
  await t.stop();
});

/** A token with `real`'s lookup prefix, other random bytes and a correct CRC32: it passes every offline check. */
function forge(real: string): string {
  const body = real.slice(3, 19) + randomBytes(20).toString("hex");
  return `rc_${body}${(Bun.hash.crc32(body) >>> 0).toString(16).padStart(8, "0")}`;
}

const get = (token: string, ip: string, path = "/v1/api-tokens") => t.fetch(path, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": ip } });

describe("forged tokens with a real lookup prefix", () => {
  test("the forgery passes the offline checks and reaches the token's row (one compare, 401)", async () => {
    const before = compares;
    const r = await get(forge(alice.token), nextIp());
    expect(r.status).toBe(401);
    expect(compares - before).toBe(1);
  });

  test(`10 forged tokens at once from one address: at most ${BURST} bcrypt compares, the rest 429 RATE_LIMITED`, async () => {
    const ip = nextIp();
    const forged = Array.from({ length: 10 }, () => forge(alice.token));
    const before = compares;
    const res = await Promise.all(forged.map((f) => get(f, ip)));
    expect(compares - before).toBeLessThanOrEqual(BURST);
    const statuses = res.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(BURST);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10 - BURST);
    const limited = res.find((r) => r.status === 429)!;
    expect(((await limited.json()) as { code: string }).code).toBe("RATE_LIMITED");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    // One at a time, later: still no compare (the bucket is empty).
    const more = compares;
    for (let i = 0; i < 5; i++) expect((await get(forge(alice.token), ip)).status).toBe(429);
    expect(compares).toBe(more);
  });

  test("paths outside the API surfaces (the dashboard) cannot be used to buy compares either", async () => {
    const ip = nextIp();
    const before = compares;
    const res = await Promise.all(Array.from({ length: 8 }, () => get(forge(alice.token), ip, "/")));
    expect(compares - before).toBeLessThanOrEqual(BURST);
    expect(res.filter((r) => r.status === 429)).toHaveLength(8 - BURST);
  });

  test("/healthz never looks at a credential: forged tokens cost no compare and take nothing from the bucket", async () => {
    const ip = nextIp();
    const before = compares;
    const res = await Promise.all(Array.from({ length: 8 }, () => get(forge(alice.token), ip, "/healthz")));
    expect(res.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(compares).toBe(before);
    expect(res.every((r) => r.headers.get("ratelimit-remaining") === String(BURST))).toBe(true);
  });

  test("the same forged token again, from fresh addresses, costs no compare (its refusal is cached) and stays 401", async () => {
    const forged = forge(alice.token);
    expect((await get(forged, nextIp())).status).toBe(401);
    const before = compares;
    for (let i = 0; i < 5; i++) expect((await get(forged, nextIp())).status).toBe(401);
    expect(compares).toBe(before);
  });

  test("the real token keeps working from another address, and once verified from the exhausted one too", async () => {
    const exhausted = nextIp();
    await Promise.all(Array.from({ length: 6 }, () => get(forge(alice.token), exhausted)));
    expect((await get(forge(alice.token), exhausted)).status).toBe(429);

    const bob = await createUser(t);
    const ok = await get(bob.token, nextIp());
    expect(ok.status).toBe(200);
    // A verified-cache hit costs nothing, so the exhausted address is not charged for it.
    const before = compares;
    const again = await get(bob.token, exhausted);
    expect(again.status).toBe(200);
    expect(compares).toBe(before);
  });
});

describe("the /v1/stream upgrade", () => {
  const connect = (token: string, ip: string) =>
    WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${token}`], headers: { "x-forwarded-for": ip } }).then(
      async (c) => ({ status: 101, close: (await c.waitClose()).code }),
      (e: { status?: number; body?: string }) => ({ status: e.status ?? 0, close: 0, body: e.body }),
    );

  test(`8 forged tokens from one address: at most ${BURST} compares (closed 4001), the rest refused 429 at the upgrade`, async () => {
    const ip = nextIp();
    const before = compares;
    const res = await Promise.all(Array.from({ length: 8 }, () => connect(forge(alice.token), ip)));
    expect(compares - before).toBeLessThanOrEqual(BURST);
    expect(res.filter((r) => r.status === 101 && r.close === 4001)).toHaveLength(BURST);
    const refused = res.filter((r) => r.status === 429);
    expect(refused).toHaveLength(8 - BURST);
    expect(JSON.parse((refused[0] as { body: string }).body).code).toBe("RATE_LIMITED");
  });

  test(`an IPv6 client's /64 is one address: 8 forged tokens from 8 of its addresses buy at most ${BURST} compares, and the next /64 still gets its own`, async () => {
    const before = compares;
    const res = await Promise.all(Array.from({ length: 8 }, (_, i) => connect(forge(alice.token), `2001:db8:9:1:${i + 1}::${i + 1}`)));
    expect(compares - before).toBeLessThanOrEqual(BURST);
    expect(res.filter((r) => r.status === 429)).toHaveLength(8 - BURST);
    expect((await connect(forge(alice.token), "2001:db8:9:2::1")).close).toBe(4001);
  });

  test("the real token still opens a stream from another address", async () => {
    const carol = await createUser(t);
    const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${carol.token}`], headers: { "x-forwarded-for": nextIp() } });
    c.send({ type: "session.resume", session_id: "sess_nope" });
    expect((await c.waitFor((f) => f.type === "error")).code).toBe("NOT_FOUND");
    c.close();
  });
});
