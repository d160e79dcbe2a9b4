/**
 * OAuth sign-in against local GitHub- and Google-dialect providers that speak the real protocol:
 * the round trip (link by verified email, create when sign-up is open), redirects, the flow
 * cookies, and every refusal: missing / foreign / reused state, wrong PKCE verifier, unverified
 * email, closed sign-up, provider errors (502), unconfigured providers (404).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { first } from "../../../src/db/client.ts";
import { oauthAccounts } from "../../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { CookieJar } from "../../helpers/cookies.ts";
import { type OAuthProvider, startOAuthProvider } from "../../helpers/oauth-provider.ts";
import { api } from "../../helpers/users.ts";

const ADMIN = "oauth test admin pw";
let t: TestApp;
let github: OAuthProvider;
let google: OAuthProvider;

beforeAll(async () => {
  github = startOAuthProvider("github");
  google = startOAuthProvider("google");
  t = await startTestApp({ flags: [...github.flags(), ...google.flags()], env: { RUNCELL_ADMIN_PASSWORD: ADMIN } });
  // Made by the operator (POST /admin/users): its address counts as verified.
  const r = await api(t, "POST", "/admin/users", { authorization: `Bearer ${ADMIN}` }, { email: "octo@example.com", password: "octo password 1" });
  expect(r.status).toBe(201);
});
afterAll(async () => {
  await t.stop();
  github.stop();
  google.stop();
});

const STATE = "runcell.oauth_state";
const VERIFIER = "runcell.oauth_verifier";
const SESSION = "runcell.session_token";

/** Plays the browser: POST sign-in/social, follow the provider's authorize redirect, land on our callback. */
async function begin(provider: string, jar: CookieJar, callbackURL?: string) {
  const res = await t.fetch("/api/auth/sign-in/social", {
    method: "POST",
    headers: { "content-type": "application/json", origin: t.url },
    body: JSON.stringify(callbackURL === undefined ? { provider } : { provider, callbackURL }),
  });
  const cookies = jar.absorb(res);
  return { status: res.status, body: (await res.json()) as { url: string; redirect: boolean; code?: string }, cookies };
}
async function authorize(url: string): Promise<string> {
  const res = await fetch(url, { redirect: "manual" });
  expect(res.status).toBe(302);
  return res.headers.get("location")!;
}
async function land(location: string, jar: CookieJar) {
  const res = await fetch(location, { redirect: "manual", headers: jar.header() ? { cookie: jar.header() } : {} });
  const cookies = jar.absorb(res);
  const text = await res.text();
  return { status: res.status, location: res.headers.get("location"), body: text ? JSON.parse(text) : null, cookies };
}
async function roundTrip(provider: OAuthProvider, callbackURL?: string) {
  const jar = new CookieJar();
  const start = await begin(provider.dialect, jar, callbackURL);
  expect(start.status).toBe(200);
  const back = await authorize(start.body.url);
  return { jar, back, ...(await land(back, jar)) };
}
const whoAmI = async (jar: CookieJar) => (await api(t, "GET", "/api/auth/get-session", { cookie: jar.header() })).body;

describe("discovery and starting", () => {
  test("GET /api/auth/providers lists the configured providers and whether sign-up is open", async () => {
    const r = await api(t, "GET", "/api/auth/providers");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ providers: ["github", "google"], signup: "closed" });
  });

  test("sign-in/social answers {url, redirect:true} with state + PKCE S256, and two short-lived Lax HttpOnly cookies", async () => {
    const jar = new CookieJar();
    const r = await begin("github", jar, "/after");
    expect(r.status).toBe(200);
    expect(r.body.redirect).toBe(true);
    const url = new URL(r.body.url);
    expect(url.origin + url.pathname).toBe(`${github.url}/login/oauth/authorize`);
    expect(url.searchParams.get("client_id")).toBe(github.clientId);
    expect(url.searchParams.get("redirect_uri")).toBe(`${t.url}/api/auth/callback/github`);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    // The state cookie carries the state, then the signed flow (src/auth/oauth.ts).
    expect(url.searchParams.get("state")).toBe(jar.get(STATE)!.split(".")[0]!);
    const challenge = new Bun.CryptoHasher("sha256").update(jar.get(VERIFIER)!).digest("base64url");
    expect(url.searchParams.get("code_challenge")).toBe(challenge);
    expect(url.searchParams.get("scope")).toBe("read:user user:email");
    for (const c of r.cookies) {
      expect(c.attrs).toMatchObject({ httponly: true, samesite: "Lax", "max-age": "600", path: "/api/auth/callback" });
    }
    expect(r.cookies.map((c) => c.name).sort()).toEqual([STATE, VERIFIER]);
  });

  test.each([
    ["an unknown provider", { provider: "twitter" }, 400, "provider"],
    ["an unknown field", { provider: "github", cookie: "x" }, 400, "cookie"],
    ["an ID token (not supported)", { provider: "github", idToken: { token: "x" } }, 400, "idToken"],
    ["no provider", {}, 400, "provider"],
  ])("%s → 400", async (_n, body, status, field) => {
    const r = await api(t, "POST", "/api/auth/sign-in/social", { origin: t.url }, body);
    expect(r.status).toBe(status);
    expect(r.body.details.field).toBe(field);
    // Said in words a user reads, never the validator's internals.
    expect(r.body.error).not.toMatch(/kind|UnionEnum/);
    if (field === "provider" && "provider" in body) expect(r.body.error).toBe("provider must be one of github, google");
  });

  test("better-auth's other signIn.social options are taken: disableRedirect, loginHint; scopes and requestSignUp are ignored", async () => {
    const r = await api(t, "POST", "/api/auth/sign-in/social", { origin: t.url }, {
      provider: "google",
      callbackURL: "/",
      newUserCallbackURL: "/welcome",
      errorCallbackURL: "/oops",
      disableRedirect: true,
      loginHint: "someone@example.com",
      scopes: ["https://www.googleapis.com/auth/drive"],
      requestSignUp: true,
      additionalData: { a: 1 },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.redirect).toBe(false);
    const url = new URL(r.body.url);
    expect(url.searchParams.get("login_hint")).toBe("someone@example.com");
    expect(url.searchParams.get("scope")).toBe("openid email profile");
    const gh = await api(t, "POST", "/api/auth/sign-in/social", { origin: t.url }, { provider: "github", loginHint: "octo" });
    expect(new URL(gh.body.url).searchParams.get("login")).toBe("octo");
    expect(gh.body.redirect).toBe(true);
  });

  test("a cross-site start is refused (403)", async () => {
    const r = await api(t, "POST", "/api/auth/sign-in/social", { origin: "https://evil.example" }, { provider: "github" });
    expect(r.status).toBe(403);
  });
});

describe("round trips", () => {
  test("GitHub: links the existing account by its verified primary email, sets the cookie, 302 to callbackURL", async () => {
    const r = await roundTrip(github, "/sessions/123?tab=log#end");
    expect(r.status).toBe(302);
    expect(r.location).toBe("/sessions/123?tab=log#end");
    const session = r.cookies.find((c) => c.name === SESSION)!;
    expect(session.attrs).toMatchObject({ httponly: true, samesite: "Lax", path: "/" });
    // The flow cookies are cleared.
    expect(r.cookies.filter((c) => c.name === STATE || c.name === VERIFIER).every((c) => c.attrs["max-age"] === "0")).toBe(true);
    const me = await whoAmI(r.jar);
    expect(me.user.email).toBe("octo@example.com");
    const link = (await first(t.app.services.db.select().from(oauthAccounts).where(eq(oauthAccounts.provider, "github"))))!;
    expect(link.provider_account_id).toBe(github.account.id);
    expect(link.user_id).toBe(me.user.id);
    expect(github.exchanges.at(-1)).toBe("ok");
  });

  test("a linked provider account keeps signing in even after its email changes at the provider", async () => {
    github.account = { ...github.account, email: "renamed@example.com" };
    const r = await roundTrip(github);
    expect(r.status).toBe(302);
    expect(r.location).toBe("/");
    expect((await whoAmI(r.jar)).user.email).toBe("octo@example.com");
    github.account = { ...github.account, email: "octo@example.com" };
  });

  test("Google with sign-up closed: an email without an account is refused (403), nothing is created", async () => {
    google.account = { id: "g-new-1", name: "Gee", email: "newcomer@example.com", verified: true };
    const r = await roundTrip(google);
    expect(r.status).toBe(403);
    expect(r.body.code).toBe("FORBIDDEN");
    expect(r.body.error).toContain("Sign-up is closed");
    expect(r.cookies.some((c) => c.name === SESSION)).toBe(false);
    expect(await t.app.services.users.byEmail("newcomer@example.com")).toBeUndefined();
  });

  test("Google with sign-up open: creates the account (role user, email verified, no password)", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    try {
      const r = await roundTrip(google);
      expect(r.status).toBe(302);
      const me = await whoAmI(r.jar);
      expect(me.user).toMatchObject({ email: "newcomer@example.com", name: "Gee", role: "user" });
      const row = (await t.app.services.users.byEmail("newcomer@example.com"))!;
      expect(row.email_verified).toBe(true);
      expect(row.password_hash).toBeNull();
      // A password sign-in cannot be used for it.
      expect((await api(t, "POST", "/api/auth/sign-in/email", {}, { email: "newcomer@example.com", password: "" })).status).toBe(401);
      // The same verified address from the other provider joins the same account.
      github.account = { id: "4242", name: "Gee on GitHub", email: "newcomer@example.com", verified: true };
      const viaGithub = await roundTrip(github);
      expect(viaGithub.status).toBe(302);
      expect((await whoAmI(viaGithub.jar)).user.id).toBe(me.user.id);
      github.account = { id: "583231", name: "Octo Cat", email: "octo@example.com", verified: true };
    } finally {
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
    }
  });

  test("an unverified email is refused (403) even while sign-up is open", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    try {
      github.account = { id: "999", name: "Unverified", email: "unverified@example.com", verified: false };
      const r = await roundTrip(github);
      expect(r.status).toBe(403);
      expect(r.body.error).toContain("verified");
      expect(await t.app.services.users.byEmail("unverified@example.com")).toBeUndefined();
      // Even when an account with that address exists, an unverified claim does not link to it.
      github.account = { id: "998", name: "Claimer", email: "octo@example.com", verified: false };
      expect((await roundTrip(github)).status).toBe(403);
    } finally {
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
      github.account = { id: "583231", name: "Octo Cat", email: "octo@example.com", verified: true };
    }
  });

  test("a self-registered account that never verified its address is not linked (pre-hijacking), even with a verified provider email", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    try {
      // Someone registers the victim's address with a password of their choosing…
      const squat = await api(t, "POST", "/api/auth/sign-up/email", { origin: t.url }, { email: "victim@example.com", password: "squatter pw 1" });
      expect(squat.status).toBe(200);
      // …then the real owner signs in with Google, which verified the address.
      google.account = { id: "g-victim", name: "Victim", email: "victim@example.com", verified: true };
      const r = await roundTrip(google);
      expect(r.status).toBe(403);
      expect(r.body.error).toContain("never verified");
      expect(r.cookies.some((c) => c.name === SESSION)).toBe(false);
      expect(await first(t.app.services.db.select().from(oauthAccounts).where(eq(oauthAccounts.provider_account_id, "g-victim")))).toBeUndefined();
    } finally {
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
    }
  });

  test.each([
    ["https://evil.example/steal", "/"],
    ["//evil.example/steal", "/"],
    ["/\\evil.example", "/"],
    ["javascript:alert(1)", "/"],
    ["dashboard", "/dashboard"],
  ])("callbackURL %p lands on %p", async (callbackURL, expected) => {
    const r = await roundTrip(github, callbackURL);
    expect(r.status).toBe(302);
    expect(r.location).toBe(expected);
  });

  test("newUserCallbackURL is where a sign-in that made the account lands; errorCallbackURL gets a refusal as ?error=", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    try {
      const start = async (body: Record<string, unknown>) => {
        const jar = new CookieJar();
        const res = await t.fetch("/api/auth/sign-in/social", { method: "POST", headers: { "content-type": "application/json", origin: t.url }, body: JSON.stringify(body) });
        jar.absorb(res);
        return land(await authorize(((await res.json()) as { url: string }).url), jar);
      };
      google.account = { id: "g-fresh", name: "Fresh", email: "fresh@example.com", verified: true };
      const made = await start({ provider: "google", callbackURL: "/home", newUserCallbackURL: "https://evil.example/x" });
      expect(made.location).toBe("/"); // reduced like callbackURL
      google.account = { id: "g-fresh2", name: "Fresh2", email: "fresh2@example.com", verified: true };
      expect((await start({ provider: "google", callbackURL: "/home", newUserCallbackURL: "/welcome" })).location).toBe("/welcome");
      // Known now: callbackURL.
      expect((await start({ provider: "google", callbackURL: "/home", newUserCallbackURL: "/welcome" })).location).toBe("/home");
      google.account = { id: "g-unverified", name: "U", email: "unverified@example.com", verified: false };
      const refused = await start({ provider: "google", errorCallbackURL: "/signin?from=google" });
      expect(refused.status).toBe(302);
      const to = new URL(refused.location!, t.url);
      expect(to.pathname).toBe("/signin");
      expect(to.searchParams.get("from")).toBe("google");
      expect(to.searchParams.get("error")).toBe("forbidden");
      expect(to.searchParams.get("error_description")).toContain("verified");
      expect(refused.cookies.some((c) => c.name === SESSION && c.value)).toBe(false);
    } finally {
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
    }
  });

  test("a provider's name over 200 characters or with control characters makes an account with the name cut (and bidi overrides dropped); none falls back to the email's local part", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    try {
      google.account = { id: "g-long", name: `N\u0007\u202e${"n".repeat(250)}`, email: "longname@example.com", verified: true };
      const r = await roundTrip(google);
      expect(r.status, JSON.stringify(r.body)).toBe(302);
      const me = await whoAmI(r.jar);
      expect(me.user.name).toBe(`N${"n".repeat(199)}`);
      google.account = { id: "g-noname", name: "  ", email: "local.part@example.com", verified: true };
      const r2 = await roundTrip(google);
      expect((await whoAmI(r2.jar)).user.name).toBe("local.part");
    } finally {
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
    }
  });

  test("an account made by a concurrent sign-up between the lookup and the create is held to the same rule (not linked unless verified)", async () => {
    await t.app.services.runtimeConfig.patch({ signup: "open" });
    const users = t.app.services.users;
    const create = users.create;
    try {
      // The squatter's sign-up lands just before the callback's own create.
      users.create = async function (this: typeof users, input: Parameters<typeof create>[0]) {
        users.create = create;
        if (input.password === null) await create.call(this, { email: input.email, name: "squatter", password: "squatter pw 1", role: "user" });
        return create.call(this, input);
      } as typeof create;
      google.account = { id: "g-race", name: "Race", email: "race@example.com", verified: true };
      const r = await roundTrip(google);
      expect(r.status).toBe(403);
      expect(r.body.error).toContain("never verified");
      expect(await first(t.app.services.db.select().from(oauthAccounts).where(eq(oauthAccounts.provider_account_id, "g-race")))).toBeUndefined();
    } finally {
      users.create = create;
      await t.app.services.runtimeConfig.patch({ signup: "closed" });
    }
  });

  test("a same-origin absolute callbackURL is reduced to its path", async () => {
    const r = await roundTrip(github, `${t.url}/profiles?x=1`);
    expect(r.location).toBe("/profiles?x=1");
  });
});

describe("refusals", () => {
  const noSession = (r: { cookies: { name: string }[] }) => expect(r.cookies.some((c) => c.name === SESSION)).toBe(false);

  test("missing state in the callback → 400 on details.field state, no session", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const back = new URL(await authorize(start.body.url));
    back.searchParams.delete("state");
    const r = await land(back.toString(), jar);
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe("state");
    noSession(r);
  });

  test("missing state cookie (another browser) → 400, and the code is never exchanged", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const back = await authorize(start.body.url);
    const before = github.exchanges.length;
    const r = await land(back, new CookieJar());
    expect(r.status).toBe(400);
    expect(r.body.error).toContain("state");
    expect(github.exchanges.length).toBe(before);
    noSession(r);
  });

  test("a foreign state (issued to another browser's flow) → 400", async () => {
    const victim = new CookieJar();
    const attacker = new CookieJar();
    await begin("github", victim);
    const attackerStart = await begin("github", attacker);
    const attackerBack = await authorize(attackerStart.body.url);
    // The attacker's callback URL, opened in the victim's browser (login CSRF).
    const r = await land(attackerBack, victim);
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe("state");
    noSession(r);
  });

  test("a reused state is refused even with the original cookies replayed", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const saved = jar.header();
    const back = await authorize(start.body.url);
    const first = await land(back, jar);
    expect(first.status).toBe(302);
    const replay = await fetch(back, { redirect: "manual", headers: { cookie: saved } });
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: string }).error).toContain("already used");
  });

  test("the server keeps nothing per started sign-in: a flood of started sign-ins cannot push out another's", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const back = await authorize(start.body.url);
    // 12,000 sign-ins started meanwhile (more than any in-memory table of pending ones would hold).
    for (let i = 0; i < 12_000; i++) t.app.services.oauth.start("google");
    const r = await land(back, jar);
    expect(r.status).toBe(302);
    expect(jar.get(SESSION)).toBeTruthy();
  });

  test("a state cookie whose flow was altered (another provider, a later expiry, another callbackURL) is refused", async () => {
    for (const alter of [
      (f: any) => ({ ...f, provider: "google" }),
      (f: any) => ({ ...f, expires: f.expires + 3_600_000 }),
      (f: any) => ({ ...f, redirectTo: "/elsewhere" }),
    ]) {
      const jar = new CookieJar();
      const start = await begin("github", jar, "/dashboard");
      const back = await authorize(start.body.url);
      const [state, payload, sig] = jar.get(STATE)!.split(".");
      const flow = JSON.parse(Buffer.from(payload!, "base64url").toString());
      expect(flow).toMatchObject({ provider: "github", redirectTo: "/dashboard" });
      const forged = `${state}.${Buffer.from(JSON.stringify(alter(flow))).toString("base64url")}.${sig}`;
      const r = await fetch(back, { redirect: "manual", headers: { cookie: `${STATE}=${forged}; ${VERIFIER}=${jar.get(VERIFIER)}` } });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { details: { field: string } }).details.field).toBe("state");
    }
  });

  test("callback URLs too long for the flow cookie together are refused at the start, naming the field", async () => {
    const long = "/" + "a".repeat(2000);
    const r = await t.fetch("/api/auth/sign-in/social", {
      method: "POST",
      headers: { "content-type": "application/json", origin: t.url },
      body: JSON.stringify({ provider: "github", callbackURL: long, newUserCallbackURL: long }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { details: { field: string } }).details.field).toBe("callbackURL");
  });

  test("a state started for GitHub is not accepted on the Google callback", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const back = new URL(await authorize(start.body.url));
    back.pathname = "/api/auth/callback/google";
    const r = await land(back.toString(), jar);
    expect(r.status).toBe(400);
  });

  test("a wrong PKCE verifier: the provider refuses the exchange → 502 BAD_GATEWAY, no session", async () => {
    const jar = new CookieJar();
    const start = await begin("google", jar);
    const back = await authorize(start.body.url);
    jar.cookies.set(VERIFIER, "A".repeat(43));
    const r = await land(back, jar);
    expect(r.status).toBe(502);
    expect(r.body.code).toBe("BAD_GATEWAY");
    expect(r.body.details).toEqual({ provider: "google", reason: "invalid_grant" });
    expect(google.exchanges.at(-1)).toBe("invalid_grant: PKCE verifier mismatch");
    noSession(r);
  });

  test("GitHub's 200-with-error answer to a bad verifier is a 502 too", async () => {
    const jar = new CookieJar();
    const start = await begin("github", jar);
    const back = await authorize(start.body.url);
    jar.cookies.set(VERIFIER, "B".repeat(43));
    const r = await land(back, jar);
    expect(r.status).toBe(502);
    expect(r.body.details.reason).toBe("invalid_grant");
  });

  test.each([
    ["the token endpoint fails", "failToken", 500],
    ["the user API fails", "failUser", 503],
  ] as const)("%s → 502 BAD_GATEWAY", async (_n, knob, status) => {
    github[knob] = status;
    try {
      const r = await roundTrip(github);
      expect(r.status).toBe(502);
      expect(r.body.code).toBe("BAD_GATEWAY");
      expect(r.body.details.provider).toBe("github");
      noSession(r);
    } finally {
      github[knob] = null;
    }
  });

  test("the user declines at the provider (error=access_denied) → 401", async () => {
    github.denyWith = "access_denied";
    try {
      const r = await roundTrip(github);
      expect(r.status).toBe(401);
      expect(r.body.error).toContain("access_denied");
      noSession(r);
    } finally {
      github.denyWith = null;
    }
  });

  test("a disabled user cannot sign in through OAuth (403)", async () => {
    const user = (await t.app.services.users.byEmail("octo@example.com"))!;
    await t.app.services.users.adminPatch(user.id, { disabled: true });
    try {
      const r = await roundTrip(github);
      expect(r.status).toBe(403);
      noSession(r);
    } finally {
      await t.app.services.users.adminPatch(user.id, { disabled: false });
    }
  });

  test("an OAuth sign-in refused because the account is disabled links nothing to it", async () => {
    const made = await api(t, "POST", "/admin/users", { authorization: `Bearer ${ADMIN}` }, { email: "held@example.com", password: "held password 1" });
    expect(made.status).toBe(201);
    await t.app.services.users.adminPatch(made.body.id, { disabled: true });
    const before = google.account;
    google.account = { id: "g-held", name: "Held", email: "held@example.com", verified: true };
    try {
      const r = await roundTrip(google);
      expect(r.status).toBe(403);
      noSession(r);
      expect(await t.app.services.db.select().from(oauthAccounts).where(eq(oauthAccounts.user_id, made.body.id))).toEqual([]);
    } finally {
      google.account = before;
    }
  });

  test("nothing secret reaches the log (codes, verifiers, access tokens, client secret)", () => {
    const all = t.logs.join("\n");
    expect(all).not.toContain(github.clientSecret);
    expect(all).not.toContain(google.clientSecret);
    expect(all).not.toMatch(/gho_[0-9a-f]{10}|ya29\.[0-9a-f]{10}/);
    expect(all).not.toMatch(/[?&]code=[0-9a-f]{10}/);
  });
});

describe("an unconfigured provider", () => {
  test("answers 404 on its paths and is not listed", async () => {
    const bare = await startTestApp({ flags: github.flags() });
    try {
      expect((await api(bare, "GET", "/api/auth/providers")).body).toEqual({ providers: ["github"], signup: "closed" });
      const start = await api(bare, "POST", "/api/auth/sign-in/social", { origin: bare.url }, { provider: "google" });
      expect(start.status).toBe(404);
      expect(start.body.code).toBe("NOT_FOUND");
      const cb = await api(bare, "GET", "/api/auth/callback/google?code=x&state=y");
      expect(cb.status).toBe(404);
      expect((await api(bare, "GET", "/api/auth/callback/facebook?code=x&state=y")).status).toBe(404);
    } finally {
      await bare.stop();
    }
  });
});
