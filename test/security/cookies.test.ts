/**
 * A session cookie that is not valid percent-encoding (`%E0%A4%A`, a truncated UTF-8 sequence) is
 * a bad credential like any other: 401 on the REST API, close 4001 on /v1/stream — never a 500 or
 * Bun's generic error page. The same holds for the OAuth flow cookies (400, not 500).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readCookie } from "../../src/auth/sessions.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { CookieJar } from "../helpers/cookies.ts";
import { type OAuthProvider, startOAuthProvider } from "../helpers/oauth-provider.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

const SESSION = "runcell.session_token";
const MALFORMED = ["%E0%A4%A", "%", "%zz", "abc%E0", "%C0%80%"];

let t: TestApp;
let github: OAuthProvider;
let alice: TestUser;

beforeAll(async () => {
  github = startOAuthProvider("github");
  t = await startTestApp({ flags: github.flags() });
  alice = await createUser(t);
});
afterAll(async () => {
  await t.stop();
  github.stop();
});

describe("readCookie", () => {
  test.each(MALFORMED)("%p is returned as sent, not thrown", (value) => {
    expect(readCookie(`a=1; ${SESSION}=${value}; b=2`, SESSION)).toBe(value);
  });
  test("well-formed percent-encoding is still decoded; absent is null", () => {
    expect(readCookie(`${SESSION}=a%20b`, SESSION)).toBe("a b");
    expect(readCookie("other=1", SESSION)).toBeNull();
  });
});

describe("REST", () => {
  test.each(MALFORMED)("cookie %p on /v1/sessions → 401 UNAUTHORIZED (invalid credential)", async (value) => {
    const r = await api(t, "GET", "/v1/sessions", { cookie: `${SESSION}=${value}` });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("UNAUTHORIZED");
    expect(r.body.error).toBe("Invalid or expired credentials");
  });

  test("next to other cookies, on a state-changing request, and on the cookie-session surface", async () => {
    const cookie = `theme=dark; ${SESSION}=%E0%A4%A; lang=en`;
    expect((await api(t, "POST", "/v1/tasks", { cookie, origin: t.url }, { prompt: "x" })).status).toBe(401);
    const s = await api(t, "GET", "/api/auth/get-session", { cookie });
    expect(s.status).toBe(200);
    expect(s.body).toBeNull();
    // A bearer still wins over a broken cookie.
    expect((await api(t, "GET", "/v1/sessions", { ...alice.bearer, cookie })).status).toBe(200);
    expect(t.logs.filter((l) => l.includes("unhandled error"))).toEqual([]);
  });

  test("a malformed OAuth state cookie on the callback is a 400 on state, not a 500", async () => {
    const jar = new CookieJar();
    const start = await t.fetch("/api/auth/sign-in/social", {
      method: "POST",
      headers: { "content-type": "application/json", origin: t.url },
      body: JSON.stringify({ provider: "github" }),
    });
    expect(start.status).toBe(200);
    jar.absorb(start);
    const { url } = (await start.json()) as { url: string };
    const back = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
    const res = await fetch(back, { redirect: "manual", headers: { cookie: "runcell.oauth_state=%E0%A4%A; runcell.oauth_verifier=%" } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { details: { field: string } }).details.field).toBe("state");
  });
});

describe("/v1/stream", () => {
  test.each(MALFORMED)("cookie %p → upgraded, then closed 4001 before any frame", async (value) => {
    const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { headers: { cookie: `${SESSION}=${value}` } });
    const closed = await c.waitClose();
    expect(closed.code).toBe(4001);
    expect(closed.reason).toContain("invalid credential");
    expect(c.frames).toEqual([]);
  });
});
