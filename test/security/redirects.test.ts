/**
 * The redirect after OAuth sign-in goes to a same-origin path only. A `callbackURL` that the URL
 * parser normalises into `//host` (`/.//evil.example/x`), or that a browser, a proxy or a second
 * percent-decoding could read as another host (backslashes, tabs and newlines, `%2F`, `%5C`,
 * double encoding) lands on "/". A table of hostile inputs against `safeRedirectPath`, and real
 * callbacks through the local OAuth provider, whose Location a browser's URL resolution keeps on
 * this origin.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { safeRedirectPath } from "../../src/auth/oauth.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { CookieJar } from "../helpers/cookies.ts";
import { type OAuthProvider, startOAuthProvider } from "../helpers/oauth-provider.ts";
import { api } from "../helpers/users.ts";

const PUBLIC = "https://rc.example";

/** Inputs that must land on "/": each could take the browser (or a decoding hop) to another host. */
const HOSTILE: string[] = [
  "/.//evil.example/x",
  "/./\\evil.example/x",
  "/..//evil.example",
  "/a/..//evil.example",
  "/././/evil.example",
  "/%2e//evil.example",
  "/%2E%2E//evil.example",
  "//evil.example",
  "///evil.example",
  "////evil.example/x",
  "/\\evil.example",
  "\\\\evil.example",
  "\\/evil.example",
  "/\\/evil.example",
  "/\t/evil.example",
  "/\n/evil.example",
  "/\r\n/evil.example",
  "\t//evil.example",
  " //evil.example",
  "/%2F/evil.example",
  "/%2f%2fevil.example",
  "/%5Cevil.example",
  "/%5c%5cevil.example",
  "/%09/evil.example",
  "/%0A/evil.example",
  "/%0d%0a/evil.example",
  "/%252F/evil.example",
  "/%25252F%25252Fevil.example",
  "/%00/x",
  "https://evil.example/x",
  "http://rc.example/x",
  "https://rc.example.evil.example/x",
  "https://rc.example@evil.example/x",
  "//rc.example@evil.example",
  "javascript:alert(1)",
  "data:text/html,<script>alert(1)</script>",
  "/%E0%A4%A",
];

/** Same-origin paths that stay as they are. */
const KEPT: [string, string][] = [
  ["/", "/"],
  ["/sessions/123?tab=log#end", "/sessions/123?tab=log#end"],
  ["dashboard", "/dashboard"],
  ["/a/./b/../c", "/a/c"],
  ["/a%20b", "/a%20b"],
  ["/q?next=//evil.example", "/q?next=//evil.example"],
  ["https://rc.example/profiles?x=1", "/profiles?x=1"],
];

describe("safeRedirectPath", () => {
  test.each(HOSTILE)("%p → /", (input) => {
    expect(safeRedirectPath(input, PUBLIC)).toBe("/");
  });

  test.each(KEPT)("%p → %p", (input, expected) => {
    expect(safeRedirectPath(input, PUBLIC)).toBe(expected);
  });

  test("no result, for any input of the table, leaves this origin once resolved by a browser or decoded", () => {
    for (const input of [...HOSTILE, ...KEPT.map((k) => k[0])]) {
      const out = safeRedirectPath(input, PUBLIC);
      expect(out.startsWith("/")).toBe(true);
      let probe = out;
      for (let i = 0; i < 4; i++) {
        const flat = probe.replace(/[\t\n\r]/g, "").replace(/\\/g, "/");
        expect(flat.startsWith("//"), `${JSON.stringify(input)} → ${out}`).toBe(false);
        expect(new URL(flat, PUBLIC + "/").origin).toBe(PUBLIC);
        try {
          probe = decodeURIComponent(probe);
        } catch {
          break;
        }
      }
    }
  });

  test("not a string, empty or too long → /", () => {
    expect(safeRedirectPath(undefined, PUBLIC)).toBe("/");
    expect(safeRedirectPath(42, PUBLIC)).toBe("/");
    expect(safeRedirectPath("", PUBLIC)).toBe("/");
    expect(safeRedirectPath("/" + "a".repeat(3000), PUBLIC)).toBe("/");
  });
});

describe("the OAuth callback's Location", () => {
  let t: TestApp;
  let github: OAuthProvider;
  const ADMIN = "redirects admin pw";

  beforeAll(async () => {
    github = startOAuthProvider("github", { email: "redirects@example.com" });
    t = await startTestApp({ flags: github.flags(), env: { RUNCELL_ADMIN_PASSWORD: ADMIN } });
    const r = await api(t, "POST", "/admin/users", { authorization: `Bearer ${ADMIN}` }, { email: "redirects@example.com", password: "redirects password 1" });
    expect(r.status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
    github.stop();
  });

  /** Plays the browser: start with callbackURL, follow the provider's authorize redirect, land on our callback. */
  async function signIn(callbackURL: string) {
    const jar = new CookieJar();
    const start = await t.fetch("/api/auth/sign-in/social", {
      method: "POST",
      headers: { "content-type": "application/json", origin: t.url },
      body: JSON.stringify({ provider: "github", callbackURL }),
    });
    expect(start.status).toBe(200);
    jar.absorb(start);
    const { url } = (await start.json()) as { url: string };
    const back = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
    const res = await fetch(back, { redirect: "manual", headers: { cookie: jar.header() } });
    jar.absorb(res);
    return { status: res.status, location: res.headers.get("location"), jar };
  }

  test.each(["/.//evil.example/x", "/./\\evil.example/x", "/%2F/evil.example", "/%5Cevil.example", "/\t/evil.example", "/%252F%252Fevil.example"])(
    "callbackURL %p: signed in, 302 to /",
    async (callbackURL) => {
      const r = await signIn(callbackURL);
      expect(r.status).toBe(302);
      expect(r.location).toBe("/");
      expect(new URL(r.location!, t.url).origin).toBe(new URL(t.url).origin);
      expect(r.jar.get("runcell.session_token")).toBeTruthy();
    },
  );

  test("a same-origin path is kept", async () => {
    const r = await signIn("/sessions/abc?tab=log");
    expect(r.status).toBe(302);
    expect(r.location).toBe("/sessions/abc?tab=log");
  });
});
