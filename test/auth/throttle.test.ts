/**
 * Sign-in throttling: the LoginThrottle itself (backoff, reset, forgetting, memory bound, parallel
 * guesses), and on a real server per account and per IP (an IPv6 client's /64 being one) with a
 * clock the test moves.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { LoginThrottle } from "../../src/auth/throttle.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { nextIp } from "../helpers/cookies.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

describe("LoginThrottle", () => {
  test("5 failures, then blocks of 2 s, 4 s, 8 s … capped at 15 min; a success clears the key", () => {
    let now = 0;
    const th = new LoginThrottle(() => now);
    for (let i = 0; i < 4; i++) th.fail("k");
    expect(th.blockedFor("k")).toBe(0);
    th.fail("k");
    expect(th.blockedFor("k")).toBe(2000);
    now += 2000;
    expect(th.blockedFor("k")).toBe(0);
    th.fail("k");
    expect(th.blockedFor("k")).toBe(4000);
    now += 4000;
    th.fail("k");
    expect(th.blockedFor("k")).toBe(8000);
    for (let i = 0; i < 20; i++) th.fail("k");
    expect(th.blockedFor("k")).toBe(15 * 60_000);
    th.succeed("k");
    expect(th.blockedFor("k")).toBe(0);
    th.fail("k");
    expect(th.blockedFor("k")).toBe(0);
  });

  test("a refund gives back one attempt and the block its charge set; the next failure blocks again", async () => {
    let now = 0;
    const th = new LoginThrottle(() => now);
    for (let i = 0; i < 4; i++) th.fail("ip");
    // The fifth attempt is charged (and blocks) before the check; the check succeeds.
    expect(await th.attempt(["acct", "ip"], async () => ({ ok: true, value: "in" }), "sign-in", ["ip"])).toBe("in");
    expect(th.blockedFor("ip")).toBe(0);
    expect(th.blockedFor("acct")).toBe(0);
    th.fail("ip");
    expect(th.blockedFor("ip")).toBe(2000);
    // The account's key was cleared, not refunded.
    for (let i = 0; i < 4; i++) th.fail("acct");
    expect(th.blockedFor("acct")).toBe(0);
  });

  test("a key without failures for an hour starts from zero; sweep drops it", () => {
    let now = 0;
    const th = new LoginThrottle(() => now);
    for (let i = 0; i < 4; i++) th.fail("k");
    now += 60 * 60_000 + 1;
    th.fail("k");
    expect(th.blockedFor("k")).toBe(0);
    now += 60 * 60_000 + 1;
    th.sweep();
    expect(th.size).toBe(0);
  });

  test("memory is bounded: the least recently failed keys go first", () => {
    const th = new LoginThrottle(() => 0, { maxEntries: 100 });
    for (let i = 0; i < 5; i++) th.fail("attacked");
    for (let i = 0; i < 1000; i++) th.fail(`spray-${i}`);
    expect(th.size).toBe(100);
    for (let i = 0; i < 5; i++) th.fail("recent");
    expect(th.blockedFor("recent")).toBeGreaterThan(0);
  });

  test("parallel guesses are charged before the check, so a burst cannot slip past the threshold", async () => {
    const th = new LoginThrottle(() => 0);
    let checked = 0;
    const slowWrong = () => new Promise<{ ok: boolean; value: boolean }>((r) => setTimeout(() => (checked++, r({ ok: false, value: false })), 20));
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => th.attempt(["k"], slowWrong)));
    expect(checked).toBe(5);
    expect(results.filter((r) => r.status === "rejected").length).toBe(15);
  });
});

describe("sign-in throttling on the server", () => {
  let clock = Date.parse("2026-03-01T00:00:00Z");
  let t: TestApp;
  let user: TestUser;
  beforeAll(async () => {
    t = await startTestApp({ flags: ["--trust-proxy"], now: () => clock });
    user = await createUser(t, { email: "victim@example.com" });
  });
  afterAll(() => t.stop());

  const signIn = (email: string, password: string, ip = nextIp()) => api(t, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": ip }, { email, password });

  test("per account: after 5 failures (from anywhere) even the right password gets 429 with Retry-After, until the backoff ends", async () => {
    for (let i = 0; i < 5; i++) expect((await signIn(user.email, `wrong ${i}`)).status).toBe(401);
    const blocked = await signIn(user.email, user.password);
    expect(blocked.status).toBe(429);
    expect(blocked.body.code).toBe("RATE_LIMITED");
    expect(blocked.headers.get("retry-after")).toBe("2");
    expect(blocked.body.details.retry_after).toBe(2);
    // The next failure after the block doubles it.
    clock += 2000;
    expect((await signIn(user.email, "wrong again")).status).toBe(401);
    const longer = await signIn(user.email, user.password);
    expect(longer.status).toBe(429);
    expect(longer.headers.get("retry-after")).toBe("4");
    clock += 4000;
    // A success resets: the next wrong password is a plain 401 again.
    expect((await signIn(user.email, user.password)).status).toBe(200);
    expect((await signIn(user.email, "wrong after success")).status).toBe(401);
    expect((await signIn(user.email, user.password)).status).toBe(200);
  });

  test("an unknown email is throttled exactly like a known one (no account enumeration)", async () => {
    for (let i = 0; i < 5; i++) expect((await signIn("ghost@example.com", `x${i}`)).status).toBe(401);
    const r = await signIn("ghost@example.com", "x");
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("2");
  });

  test("per IP: 5 failures on different accounts from one address block that address only", async () => {
    const ip = nextIp();
    for (let i = 0; i < 5; i++) expect((await signIn(`spray${i}@example.com`, "guess", ip)).status).toBe(401);
    const blocked = await signIn(user.email, user.password, ip);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await signIn(user.email, user.password, nextIp())).status).toBe(200);
    clock += 2000;
    expect((await signIn(user.email, user.password, ip)).status).toBe(200);
    // The success from that address gave back only its own attempt: its five guesses still count,
    // so the next one is checked and blocks the address again.
    expect((await signIn("spray9@example.com", "guess", ip)).status).toBe(401);
    expect((await signIn("spray10@example.com", "guess", ip)).status).toBe(429);
  });

  test("per IP, guessing at other accounts between the address's own correct sign-ins is still counted (no spraying)", async () => {
    const ip = nextIp();
    const own = await createUser(t, { email: "sprayer@example.com" });
    let guesses = 0;
    let refused = 0;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 4; i++) {
        const r = await signIn(`target${round}-${i}@example.com`, "guess", ip);
        if (r.status === 401) guesses++;
        else if (r.status === 429) refused++;
      }
      await signIn(own.email, own.password, ip);
    }
    // Without the count surviving the successes all 12 would be checked.
    expect(guesses).toBe(5);
    expect(refused).toBe(7);
  });

  test("a known device: wrong passwords from elsewhere block the account for new browsers, not for a browser that signed in before", async () => {
    const owner = await createUser(t, { email: "device-owner@example.com" });
    const signInWith = (password: string, cookie?: string) =>
      api(t, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp(), ...(cookie ? { cookie } : {}) }, { email: owner.email, password });
    const first = await signInWith(owner.password);
    expect(first.status).toBe(200);
    const set = first.headers.getSetCookie().find((c: string) => c.startsWith("runcell.device="))!;
    expect(set).toMatch(/^runcell\.device=[\w-]+\.[0-9a-f]{64}; Path=\/api\/auth; HttpOnly; SameSite=Strict; Max-Age=31536000$/);
    const device = set.split(";")[0]!;

    // Anyone, from anywhere, sends wrong passwords: the account is blocked for browsers it has not seen.
    for (let i = 0; i < 5; i++) expect((await signInWith(`wrong ${i}`)).status).toBe(401);
    expect((await signInWith(owner.password)).status).toBe(429);
    // The owner's browser gets in.
    const known = await signInWith(owner.password, device);
    expect(known.status).toBe(200);
    // Another account's device cookie, a forged one or a mangled one count as none.
    const other = await signIn(user.email, user.password);
    const otherDevice = other.headers.getSetCookie().find((c: string) => c.startsWith("runcell.device="))!.split(";")[0]!;
    expect((await signInWith(owner.password, otherDevice)).status).toBe(429);
    expect((await signInWith(owner.password, `runcell.device=abc.${"0".repeat(64)}`)).status).toBe(429);
    expect((await signInWith(owner.password, device.slice(0, -1) + (device.endsWith("0") ? "1" : "0"))).status).toBe(429);
    // A device has its own count: wrong passwords from it block it (not the account's other devices).
    for (let i = 0; i < 5; i++) expect((await signInWith(`typo ${i}`, device)).status).toBe(401);
    expect((await signInWith(owner.password, device)).status).toBe(429);
    const again = known.headers.getSetCookie().find((c: string) => c.startsWith("runcell.device="))!.split(";")[0]!;
    expect((await signInWith(owner.password, again)).status).toBe(200);
    clock += 16 * 60_000;
  });

  test("per IP, an IPv6 client is its /64: failures from five addresses of one /64 block every address in it, not the next /64", async () => {
    // One client rotating through its /64, in compressed and expanded spellings.
    const sprayed = ["2001:db8:5:1::1", "2001:db8:5:1::2", "2001:db8:5:1:a:b:c:d", "2001:0db8:0005:0001:0000:0000:0000:0004", "2001:db8:5:1:ffff::5"];
    for (const [i, ip] of sprayed.entries()) expect((await signIn(`v6spray${i}@example.com`, "guess", ip)).status).toBe(401);
    const blocked = await signIn(user.email, user.password, "2001:db8:5:1:1234:5678:9abc:def0");
    expect(blocked.status).toBe(429);
    expect(blocked.body.code).toBe("RATE_LIMITED");
    // The neighbouring /64 is another client.
    expect((await signIn(user.email, user.password, "2001:db8:5:2::1")).status).toBe(200);
    clock += 2000;
    // A success from any address of the /64 counts for all of them: it gives back its own attempt.
    expect((await signIn(user.email, user.password, "2001:db8:5:1::99")).status).toBe(200);
    expect((await signIn("v6spray9@example.com", "guess", "2001:db8:5:1::1")).status).toBe(401);
    expect((await signIn("v6spray10@example.com", "guess", "2001:db8:5:1::2")).status).toBe(429);
  });

  test("without --trust-proxy, X-Forwarded-For cannot be used to dodge the per-IP throttle", async () => {
    const plain = await startTestApp({ now: () => clock });
    try {
      for (let i = 0; i < 5; i++) {
        const r = await api(plain, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp() }, { email: `p${i}@example.com`, password: "guess" });
        expect(r.status).toBe(401);
      }
      const r = await api(plain, "POST", "/api/auth/sign-in/email", { "x-forwarded-for": nextIp() }, { email: "other@example.com", password: "guess" });
      expect(r.status).toBe(429);
    } finally {
      await plain.stop();
    }
  });
});
