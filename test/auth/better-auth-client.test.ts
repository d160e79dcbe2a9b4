/**
 * better-auth's own client (`createAuthClient` from the installed better-auth package) against a
 * live runcell: sign-up, get-session, sign-out, sign-in, and its error shape for a wrong password
 * and for closed sign-up. Bun's fetch keeps no cookies, so the cookie is captured and replayed
 * through the client's fetch options (onResponse / onRequest), as a browser would.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createAuthClient } from "better-auth/client";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { CookieJar } from "../helpers/cookies.ts";
import { type OAuthProvider, startOAuthProvider } from "../helpers/oauth-provider.ts";

let t: TestApp;
let github: OAuthProvider;
const jar = new CookieJar();
let client: ReturnType<typeof makeClient>;

function makeClient(baseURL: string) {
  return createAuthClient({
    baseURL,
    fetchOptions: {
      onRequest(ctx) {
        const cookie = jar.header();
        if (cookie) ctx.headers.set("cookie", cookie);
        // A browser sends its Origin on every POST; the CSRF check wants it to be ours.
        ctx.headers.set("origin", t.url);
        return ctx;
      },
      onResponse(ctx) {
        jar.absorb(ctx.response);
      },
    },
  });
}

beforeAll(async () => {
  github = startOAuthProvider("github", { email: "social@example.com" });
  t = await startTestApp({ flags: ["--signup", "open", ...github.flags()] });
  client = makeClient(t.url);
});
afterAll(async () => {
  await t.stop();
  github.stop();
});

test("sign-up → get-session → sign-out → get-session (null) → sign-in → get-session", async () => {
  const up = await client.signUp.email({ email: "Client@Example.com", password: "client password", name: "Client" });
  expect(up.error).toBeNull();
  expect(up.data?.user.email).toBe("client@example.com");
  expect(up.data?.token).toBeString();
  expect(jar.get("runcell.session_token")).toBe(up.data!.token!);

  const s1 = await client.getSession();
  expect(s1.error).toBeNull();
  expect(s1.data?.user.email).toBe("client@example.com");
  expect(s1.data?.session.id).toBeString();

  const out = await client.signOut();
  expect(out.error).toBeNull();
  expect(out.data as unknown).toEqual({ success: true });
  expect(jar.get("runcell.session_token")).toBeUndefined();

  const s2 = await client.getSession();
  expect(s2.error).toBeNull();
  expect(s2.data).toBeNull();

  const inn = await client.signIn.email({ email: "client@example.com", password: "client password" });
  expect(inn.error).toBeNull();
  expect(inn.data?.user.email).toBe("client@example.com");
  expect(inn.data?.redirect).toBe(false);

  const s3 = await client.getSession();
  expect(s3.data?.user.name).toBe("Client");
  expect(s3.data?.session.id).not.toBe(s1.data?.session.id);
});

test("errors reach the client in its error shape: wrong password 401, closed sign-up 403", async () => {
  const bad = await client.signIn.email({ email: "client@example.com", password: "not the password" });
  expect(bad.data).toBeNull();
  expect(bad.error?.status).toBe(401);
  // runcell's one error shape, {error, code}, arrives as the client's error object plus status.
  expect(bad.error).toMatchObject({ status: 401, code: "UNAUTHORIZED", error: "Invalid email or password" });

  await t.app.services.runtimeConfig.patch({ signup: "closed" });
  const closed = await client.signUp.email({ email: "late@example.com", password: "late password", name: "Late" });
  expect(closed.error).toMatchObject({ status: 403, code: "FORBIDDEN" });
});

test("signIn.social: the client gets {url, redirect:true}; after the provider round trip getSession shows the user", async () => {
  await t.app.services.runtimeConfig.patch({ signup: "open" });
  const out = await client.signOut();
  expect(out.error).toBeNull();
  const start = await client.signIn.social({ provider: "github", callbackURL: "/welcome" });
  expect(start.error).toBeNull();
  expect(start.data).toMatchObject({ redirect: true });
  const url = (start.data as { url: string }).url;
  // What the browser does next: the provider's authorize page redirects back to our callback.
  const back = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
  const landed = await fetch(back, { redirect: "manual", headers: { cookie: jar.header() } });
  jar.absorb(landed);
  expect(landed.status).toBe(302);
  expect(landed.headers.get("location")).toBe("/welcome");
  const s = await client.getSession();
  expect(s.data?.user.email).toBe("social@example.com");
});
