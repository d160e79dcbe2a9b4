/**
 * /api/auth/* on a real server: sign-up (closed/open, validation, normalisation), sign-in
 * (same 401 for unknown email and wrong password, in about the same time), sign-out,
 * get-session, cookie attributes (also behind https), CSRF refusals and content types.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { desc, eq } from "drizzle-orm";
import { first } from "../../../src/db/client.ts";
import { loginSessions } from "../../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { nextIp, parseSetCookie, setCookies } from "../../helpers/cookies.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";
import { sqlRun } from "../../helpers/db.ts";

let t: TestApp;
let alice: TestUser;

beforeAll(async () => {
  t = await startTestApp({ flags: ["--trust-proxy"] });
  alice = await createUser(t, { email: "alice@example.com", password: "alice password 1" });
});
afterAll(() => t.stop());

/** Every anonymous call from its own address, so sign-in throttling (tested elsewhere) stays out of the way. */
const anon = (extra: Record<string, string> = {}) => ({ "x-forwarded-for": nextIp(), ...extra });
const signUp = (body: unknown, headers: Record<string, string> = {}) => api(t, "POST", "/api/auth/sign-up/email", anon(headers), body);
const signIn = (body: unknown, headers: Record<string, string> = {}) => api(t, "POST", "/api/auth/sign-in/email", anon(headers), body);
const sessionCookieOf = (res: { headers: Headers }) => setCookies(res as unknown as Response).find((c) => c.name === "runcell.session_token");
const setSignup = (mode: "open" | "closed") => t.app.services.runtimeConfig.patch({ signup: mode });

describe("sign-up", () => {
  test("closed (the default) answers 403 FORBIDDEN and creates nothing", async () => {
    expect(t.app.services.runtimeConfig.get().signup).toBe("closed");
    const r = await signUp({ name: "Mallory", email: "mallory@example.com", password: "long enough pw" });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe("FORBIDDEN");
    expect(await t.app.services.users.byEmail("mallory@example.com")).toBeUndefined();
  });

  describe("open", () => {
    beforeAll(() => setSignup("open"));
    afterAll(() => setSignup("closed"));

    test("creates a user (role user), answers {token, user} and sets the session cookie", async () => {
      const r = await signUp({ name: "Bob", email: "  Bob.Smith@Example.COM ", password: "bob password" });
      expect(r.status).toBe(200);
      expect(r.body.user).toMatchObject({ email: "bob.smith@example.com", name: "Bob", role: "user" });
      expect(r.body.user.id).toMatch(/^usr_/);
      expect(r.body.user.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(r.body.user).not.toHaveProperty("password_hash");
      const c = sessionCookieOf(r)!;
      expect(c.value).toBe(r.body.token);
      // ≥ 256 bits of randomness: 32 bytes base64url.
      expect(c.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(c.attrs).toMatchObject({ path: "/", httponly: true, samesite: "Lax", "max-age": "2592000" });
      expect(c.attrs.secure).toBeUndefined();
      const s = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${c.value}` });
      expect(s.body.user.email).toBe("bob.smith@example.com");
      // Only the SHA-256 of the cookie is stored.
      const row = (await first(
        t.app.services.db
          .select({ token_hash: loginSessions.token_hash })
          .from(loginSessions)
          .where(eq(loginSessions.user_id, r.body.user.id))
          .orderBy(desc(loginSessions.created_at)),
      ))!;
      expect(row.token_hash).toBe(new Bun.CryptoHasher("sha256").update(c.value).digest("hex"));
    });

    test("the email is normalised: sign-in works with any case and spacing", async () => {
      const r = await signIn({ email: "BOB.smith@example.com  ", password: "bob password" });
      expect(r.status).toBe(200);
      expect(r.body.user.email).toBe("bob.smith@example.com");
    });

    test.each([
      ["duplicate email (other case)", { email: "ALICE@example.com", password: "long enough pw" }, "email"],
      ["not an email", { email: "alice-at-example", password: "long enough pw" }, "email"],
      ["password of 7 characters", { email: "p7@example.com", password: "1234567" }, "password"],
      ["password of 257 characters", { email: "p257@example.com", password: "x".repeat(257) }, "password"],
      ["missing password", { email: "nopw@example.com" }, "password"],
    ])("%s → 400 VALIDATION_FAILED on details.field", async (_n, body, field) => {
      const r = await signUp(body);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
      expect(r.body.details.field).toBe(field);
    });

    test.each([
      ["a password of 4 emoji (8 UTF-16 units, 4 characters)", { email: "emoji4@example.com", password: "😀😀😀😀" }, "password"],
      ["an email with a zero-width space", { email: "zw\u200b@example.com", password: "long enough pw" }, "email"],
      ["an email with a control character", { email: "c\u0007@example.com", password: "long enough pw" }, "email"],
      ["a name with a control character", { name: "a\u0007b", email: "ctl-name@example.com", password: "long enough pw" }, "name"],
      ["a name with a bidi override (it would read backwards)", { name: "ab\u202ecd", email: "bidi-name@example.com", password: "long enough pw" }, "name"],
      ["a name with a bidi isolate", { name: "ab\u2067cd", email: "iso-name@example.com", password: "long enough pw" }, "name"],
      ["a name with a zero-width space", { name: "ad\u200bmin", email: "zw-name@example.com", password: "long enough pw" }, "name"],
      ...["\u00ad", "\u2028", "\u3164", "\ufff9", "\u034f", "\u{E0001}"].map(
        (c, i) => [`a name with U+${c.codePointAt(0)!.toString(16).toUpperCase()} (invisible)`, { name: `ab${c}cd`, email: `hidden-${i}@example.com`, password: "long enough pw" }, "name"] as const,
      ),
      ["a full-width spelling of a taken email", { email: "ＡＬＩＣＥ@example.com", password: "long enough pw" }, "email"],
    ])("%s → 400 on details.field", async (_n, body, field) => {
      const r = await signUp(body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.details.field).toBe(field);
    });

    test("a name with an emoji sequence (zero-width joiners) or a right-to-left mark is kept as given", async () => {
      for (const [i, name] of ["👩\u200d💻 Dev", "שלום\u200f 1", "مرحبا\u061c 2", "❤\ufe0f fan"].entries()) {
        const r = await signUp({ name, email: `kept-name-${i}@example.com`, password: "long enough pw" });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        expect(r.body.user.name).toBe(name);
      }
    });

    test("a password's length counts characters: 200 emoji are accepted", async () => {
      expect((await signUp({ email: "emoji200@example.com", password: "😀".repeat(200) })).status).toBe(200);
      expect((await signIn({ email: "emoji200@example.com", password: "😀".repeat(200) })).status).toBe(200);
    });

    test("a password typed composed or decomposed (é as one character or e + ◌́) is the same password", async () => {
      const nfc = "café crème brûlée".normalize("NFC");
      const nfd = nfc.normalize("NFD");
      expect(nfd).not.toBe(nfc);
      expect((await signUp({ email: "accents@example.com", password: nfc })).status).toBe(200);
      expect((await signIn({ email: "accents@example.com", password: nfd })).status).toBe(200);
      expect((await signIn({ email: "accents@example.com", password: nfc })).status).toBe(200);
      // A full-width spelling of the email is the same account.
      expect((await signIn({ email: "ＡＣＣＥＮＴＳ@example.com", password: nfc })).status).toBe(200);
    });

    test("passwords of exactly 8 and 256 characters are accepted", async () => {
      expect((await signUp({ email: "p8@example.com", password: "12345678" })).status).toBe(200);
      expect((await signUp({ email: "p256@example.com", password: "y".repeat(256) })).status).toBe(200);
    });
  });
});

describe("sign-in", () => {
  test("answers {redirect:false, token, user}; every sign-in is a new session", async () => {
    const a = await signIn({ email: alice.email, password: alice.password });
    const b = await signIn({ email: alice.email, password: alice.password });
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ redirect: false, user: { id: alice.id, email: alice.email, role: "user" } });
    expect(a.body.token).not.toBe(b.body.token);
    const sa = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${a.body.token}` });
    const sb = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${b.body.token}` });
    expect(sa.body.session.id).not.toBe(sb.body.session.id);
  });

  test("fields better-auth's client adds are let through; a missing or mistyped field is a 400 that names it", async () => {
    const ok = await signIn({ email: alice.email, password: alice.password, callbackURL: "/", fetchOptions: {} });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const missing = await signIn({ password: alice.password });
    expect([missing.status, missing.body.details]).toEqual([400, { field: "email", reason: "required" }]);
    const typed = await signIn({ email: 7, password: alice.password });
    expect([typed.status, typed.body.details]).toEqual([400, { field: "email", reason: "expected string" }]);
  });

  test("rememberMe:false makes a browser-session cookie (no Max-Age) and a session of one day", async () => {
    const r = await signIn({ email: alice.email, password: alice.password, rememberMe: false });
    expect(r.status).toBe(200);
    expect(sessionCookieOf(r)!.attrs["max-age"]).toBeUndefined();
    const s = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${r.body.token}` });
    const left = Date.parse(s.body.session.expires_at) - Date.now();
    expect(left).toBeGreaterThan(23 * 3600_000);
    expect(left).toBeLessThanOrEqual(24 * 3600_000);
    const kept = await signIn({ email: alice.email, password: alice.password });
    const k = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${kept.body.token}` });
    expect(Date.parse(k.body.session.expires_at) - Date.now()).toBeGreaterThan(6 * 24 * 3600_000);
  });

  test("sign-up takes rememberMe too", async () => {
    await setSignup("open");
    try {
      const r = await signUp({ email: "forgetful@example.com", password: "long enough pw", rememberMe: false });
      expect(r.status).toBe(200);
      expect(sessionCookieOf(r)!.attrs["max-age"]).toBeUndefined();
      const s = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${r.body.token}` });
      expect(Date.parse(s.body.session.expires_at) - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    } finally {
      await setSignup("closed");
    }
  });

  test("an unknown email and a wrong password: the same 401 body, in about the same time", async () => {
    const unknown: number[] = [];
    const wrong: number[] = [];
    let unknownBody: unknown;
    let wrongBody: unknown;
    for (let i = 0; i < 7; i++) {
      let t0 = performance.now();
      const u = await signIn({ email: `nobody${i}@example.com`, password: "whatever pw" });
      unknown.push(performance.now() - t0);
      t0 = performance.now();
      const w = await signIn({ email: alice.email, password: `wrong pw ${i}` });
      wrong.push(performance.now() - t0);
      expect(u.status).toBe(401);
      expect(w.status).toBe(401);
      unknownBody = u.body;
      wrongBody = w.body;
      if (i === 3) t.app.services.throttle.succeed(`signin:acct:${alice.email}`);
    }
    expect(unknownBody).toEqual({ error: "Invalid email or password", code: "UNAUTHORIZED" });
    expect(wrongBody).toEqual(unknownBody);
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    // Both run one argon2id verification (a dummy hash for the unknown email); without it the
    // unknown email would answer in well under a tenth of the time.
    const ratio = median(unknown) / median(wrong);
    expect(ratio).toBeGreaterThan(0.4);
    expect(ratio).toBeLessThan(2.5);
    t.app.services.throttle.succeed(`signin:acct:${alice.email}`);
  });

  test.each([
    ["no email", { password: "x" }, "email"],
    ["email not a string", { email: 5, password: "x" }, "email"],
  ])("bad input (%s) → 400", async (_n, body, field) => {
    const r = await signIn(body);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("VALIDATION_FAILED");
    expect(r.body.details.field).toBe(field);
  });
});

describe("get-session and sign-out", () => {
  test("get-session: null (200) without a cookie or with a bad one; the session and user with a good one", async () => {
    const none = await api(t, "GET", "/api/auth/get-session");
    expect(none.status).toBe(200);
    expect(none.body).toBeNull();
    const bad = await api(t, "GET", "/api/auth/get-session", { cookie: "runcell.session_token=forged" });
    expect(bad.status).toBe(200);
    expect(bad.body).toBeNull();
    const ok = await api(t, "GET", "/api/auth/get-session", { cookie: alice.cookie });
    expect(ok.status).toBe(200);
    expect(Object.keys(ok.body.session).sort()).toEqual(["created_at", "expires_at", "id", "user_id"]);
    expect(ok.body.session.user_id).toBe(alice.id);
    expect(Object.keys(ok.body.user).sort()).toEqual(["created_at", "email", "id", "name", "role"]);
  });

  test("sign-out deletes the server-side session and clears the cookie; the old cookie is refused", async () => {
    const s = await signIn({ email: alice.email, password: alice.password });
    const cookie = `runcell.session_token=${s.body.token}`;
    const out = await api(t, "POST", "/api/auth/sign-out", { cookie, origin: t.url });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ success: true });
    const cleared = sessionCookieOf(out)!;
    expect(cleared.value).toBe("");
    expect(cleared.attrs["max-age"]).toBe("0");
    expect((await api(t, "GET", "/api/auth/get-session", { cookie })).body).toBeNull();
    expect((await api(t, "GET", "/v1/api-tokens", { cookie })).status).toBe(401);
  });

  test("sign-out with a bearer token and the cookie (or a bad bearer): the cookie's session is ended too, not only cleared", async () => {
    for (const bearer of [alice.bearer.authorization!, "Bearer rc_not-a-token"]) {
      const s = await signIn({ email: alice.email, password: alice.password });
      const cookie = `runcell.session_token=${s.body.token}`;
      const out = await t.fetch("/api/auth/sign-out", { method: "POST", headers: { cookie, authorization: bearer, origin: t.url } });
      await out.text();
      expect(await api(t, "GET", "/api/auth/get-session", { cookie }).then((r) => r.body)).toBeNull();
    }
  });
});

describe("CSRF and content types", () => {
  const port = () => new URL(t.url).port;
  const post = (headers: Record<string, string>, body = '{"name":"csrf"}') => t.fetch("/v1/api-tokens", { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

  test.each([
    ["cookie + foreign Origin → 403", () => ({ cookie: alice.cookie, origin: "https://evil.example" }), 403],
    ["cookie + Sec-Fetch-Site: cross-site → 403", () => ({ cookie: alice.cookie, "sec-fetch-site": "cross-site" }), 403],
    ["cookie + Origin null → 403", () => ({ cookie: alice.cookie, origin: "null" }), 403],
    ["cookie + our Origin → 201", () => ({ cookie: alice.cookie, origin: t.url }), 201],
    ["cookie + no Origin, a foreign Referer → 403", () => ({ cookie: alice.cookie, referer: "https://evil.example/page" }), 403],
    ["cookie + no Origin, our Referer → 201", () => ({ cookie: alice.cookie, referer: `${t.url}/profiles` }), 201],
    ["cookie + our Host in another port → 403", () => ({ cookie: alice.cookie, origin: t.url.replace(/:(\d+)$/, (_m, p) => `:${Number(p) + 1}`) }), 403],
    // DNS rebinding: the attacker's name resolves to this server, and its page sends that name as
    // both Origin and Host. A name is ours only as the public URL's; an address or localhost is.
    ["cookie + a rebound domain name as Origin and Host → 403", () => ({ cookie: alice.cookie, origin: `http://attacker.example:${port()}`, host: `attacker.example:${port()}` }), 403],
    ["cookie + another IP address as Origin and Host → 201", () => ({ cookie: alice.cookie, origin: `http://192.168.7.9:${port()}`, host: `192.168.7.9:${port()}` }), 201],
    ["cookie + an IPv6 address as Origin and Host → 201", () => ({ cookie: alice.cookie, origin: `http://[::1]:${port()}`, host: `[::1]:${port()}` }), 201],
    ["cookie + localhost as Origin and Host → 201", () => ({ cookie: alice.cookie, origin: `http://localhost:${port()}`, host: `localhost:${port()}` }), 201],
    ["cookie + same-origin fetch metadata → 201", () => ({ cookie: alice.cookie, "sec-fetch-site": "same-origin", origin: t.url }), 201],
    ["bearer token + foreign Origin (not subject to CSRF) → 201", () => ({ authorization: `Bearer ${alice.token}`, origin: "https://evil.example" }), 201],
    ["bearer token + cross-site fetch metadata → 201", () => ({ authorization: `Bearer ${alice.token}`, "sec-fetch-site": "cross-site" }), 201],
  ])("%s", async (_n, headers, status) => {
    const r = await post(headers());
    expect(r.status).toBe(status);
    if (status === 403) expect(((await r.json()) as { code: string }).code).toBe("FORBIDDEN");
    // A refusal reports the caller's bucket like any other answer (API.md: every response).
    for (const h of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(r.headers.get(h), h).toMatch(/^\d+$/);
  });

  test("a safe method with a cookie from a foreign Origin is not refused", async () => {
    const r = await t.fetch("/v1/api-tokens", { headers: { cookie: alice.cookie, origin: "https://evil.example" } });
    expect(r.status).toBe(200);
  });

  test("/api/auth/* state changes from a foreign origin are refused even without a cookie (login CSRF)", async () => {
    const r = await signIn({ email: alice.email, password: alice.password }, { origin: "https://evil.example" });
    expect(r.status).toBe(403);
    // A rebinding page signing in on its own name (the cookie would then be its own) is refused too, and told why.
    const rebound = await signIn({ email: alice.email, password: alice.password }, { origin: `http://attacker.example:${port()}`, host: `attacker.example:${port()}` });
    expect(rebound.status).toBe(403);
    expect(rebound.body.error).toContain("--public-url");
  });

  test.each([
    ["application/x-www-form-urlencoded", "name=x"],
    ["multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx\r\n--x--"],
    ["text/plain", '{"name":"x"}'],
  ])("%s is refused with 400 VALIDATION_FAILED (the interface: VALIDATION_FAILED is 400) (bearer and cookie alike)", async (ct, body) => {
    const creds: Record<string, string>[] = [{ authorization: `Bearer ${alice.token}` }, { cookie: alice.cookie, origin: t.url }];
    for (const h of creds) {
      const r = await t.fetch("/v1/api-tokens", { method: "POST", headers: { ...h, "content-type": ct }, body });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { code: string }).code).toBe("VALIDATION_FAILED");
    }
    const s = await t.fetch("/api/auth/sign-in/email", { method: "POST", headers: { ...anon(), "content-type": ct }, body: "email=a&password=b" });
    expect(s.status).toBe(400);
  });
});

describe("behind https", () => {
  test("the cookie is __Secure-runcell.session_token with Secure", async () => {
    const h = await startTestApp({ flags: ["--public-url", "https://agents.example.com", "--signup", "open"] });
    try {
      const r = await api(h, "POST", "/api/auth/sign-up/email", { origin: "https://agents.example.com" }, { email: "sec@example.com", password: "secure pw 123" });
      expect(r.status).toBe(200);
      const c = parseSetCookie(r.headers.getSetCookie()[0]!);
      expect(c.name).toBe("__Secure-runcell.session_token");
      expect(c.attrs).toMatchObject({ secure: true, httponly: true, samesite: "Lax", path: "/" });
      const s = await api(h, "GET", "/api/auth/get-session", { cookie: `__Secure-runcell.session_token=${c.value}` });
      expect(s.body.user.email).toBe("sec@example.com");
      // The plain name is not accepted behind https.
      expect((await api(h, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${c.value}` })).body).toBeNull();
      // An http Origin for the public host is refused: only https pages of it are ours.
      const cookie = `__Secure-runcell.session_token=${c.value}`;
      const token = (origin: string, host = "agents.example.com") => api(h, "POST", "/v1/api-tokens", { cookie, origin, host }, { name: "t" });
      expect((await token("http://agents.example.com")).status).toBe(403);
      expect((await token("https://agents.example.com")).status).toBe(201);
    } finally {
      await h.stop();
    }
  });
});

describe("emails stored before they were NFKC-normalised", () => {
  test("are normalised at start (sign-in and the duplicate check find them); one whose normal form another account holds is left and logged", async () => {
    await setSignup("open");
    try {
      // Written as an older runcell stored them: trimmed and lower-cased only.
      const ligature = await signUp({ email: "plain-ﬁnance@example.com", password: "long enough pw" });
      expect(ligature.status).toBe(200);
      const taken = await signUp({ email: "taken-ﬁ@example.com", password: "long enough pw" });
      expect(taken.status).toBe(200);
      await sqlRun(t, "UPDATE users SET email = ? WHERE id = ?", ["old-ﬁnance@example.com", ligature.body.user.id]);
      await sqlRun(t, "UPDATE users SET email = ? WHERE id = ?", ["taken-ﬁ@example.com", taken.body.user.id]);
      const other = await signUp({ email: "taken-fi@example.com", password: "long enough pw" });
      expect(other.status).toBe(200);
      expect(await t.app.services.users.normalizeStoredEmails(t.app.services.log)).toBe(1);
      expect((await t.app.services.users.byId(ligature.body.user.id))!.email).toBe("old-finance@example.com");
      expect((await signIn({ email: "old-ﬁnance@example.com", password: "long enough pw" })).status).toBe(200);
      expect((await signUp({ email: "old-finance@example.com", password: "long enough pw" })).status).toBe(400);
      // The one whose normal form another account holds: left as it is, and said.
      expect((await t.app.services.users.byId(taken.body.user.id))!.email).toBe("taken-ﬁ@example.com");
      const logs = t.logs.filter((l) => l.includes("differs from another account's only in its spelling"));
      expect(logs.some((l) => l.includes(taken.body.user.id))).toBe(true);
    } finally {
      await setSignup("closed");
    }
  });
});
