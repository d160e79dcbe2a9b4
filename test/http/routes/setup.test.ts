/**
 * First-run setup: the one-time link (30 minutes, single use, replaced at each issue, only its
 * hash stored), POST /api/auth/setup creating the first admin and signing it in, and the page.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { parseSetCookie } from "../../helpers/cookies.ts";
import { api } from "../../helpers/users.ts";

let clock = Date.parse("2026-07-01T00:00:00Z");
let t: TestApp;

beforeEach(async () => {
  t = await startTestApp({ now: () => clock });
});
afterEach(() => t.stop());

const complete = (body: Record<string, unknown>, headers: Record<string, string> = {}) => api(t, "POST", "/api/auth/setup", headers, body);
const tokenOf = (url: string) => url.slice(url.indexOf("#") + 1);
const admin = { email: "Owner@Example.com", password: "owner password 1", name: "Owner" };

describe("setup link", () => {
  test("issue → the page → POST creates the first account with the admin role, sets the cookie and answers 201 {token, user}", async () => {
    expect((await api(t, "GET", "/api/auth/setup")).body).toEqual({ setup_required: true });
    const link = (await t.app.services.setup.issue())!;
    expect(link.url).toStartWith(`${t.url}/setup#`);
    expect(tokenOf(link.url)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(link.expires_at) - clock).toBe(30 * 60_000);
    // Only the hash is stored.
    const stored = JSON.stringify(await t.app.services.settings.get("setup_token"));
    expect(stored).not.toContain(link.token);
    expect(stored).toContain(new Bun.CryptoHasher("sha256").update(link.token).digest("hex"));

    const page = await t.fetch("/setup");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    // The dashboard's setup view: the app's own script only, never cached, no Referer sent.
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    const html = await page.text();
    expect(html).toMatch(/<script type="module" src="\/assets\/main-[a-z0-9]+\.js"><\/script>/);

    const r = await complete({ token: link.token, ...admin }, { origin: t.url });
    expect(r.status).toBe(201);
    expect(r.body.user).toMatchObject({ email: "owner@example.com", name: "Owner", role: "admin" });
    const cookie = parseSetCookie(r.headers.getSetCookie()[0]!);
    expect(cookie.name).toBe("runcell.session_token");
    expect(cookie.attrs).toMatchObject({ httponly: true, samesite: "Lax", path: "/" });
    const me = await api(t, "GET", "/api/auth/get-session", { cookie: `runcell.session_token=${cookie.value}` });
    expect(me.body.user.role).toBe("admin");
    expect((await api(t, "GET", "/api/auth/setup")).body).toEqual({ setup_required: false });
    expect(await t.app.services.settings.get("setup_token")).toBeUndefined();
  });

  test("single use: the same link again → 403 (the server is set up), no second account", async () => {
    const link = (await t.app.services.setup.issue())!;
    expect((await complete({ token: link.token, ...admin })).status).toBe(201);
    const again = await complete({ token: link.token, email: "second@example.com", password: "second password" });
    expect(again.status).toBe(403);
    expect(again.body.code).toBe("FORBIDDEN");
    expect(await t.app.services.users.count()).toBe(1);
    expect(await t.app.services.setup.issue()).toBeNull();
  });

  test("two requests racing with one link: exactly one account", async () => {
    const link = (await t.app.services.setup.issue())!;
    const results = await Promise.all([
      complete({ token: link.token, email: "a@example.com", password: "password a 1" }),
      complete({ token: link.token, email: "b@example.com", password: "password b 1" }),
      complete({ token: link.token, email: "c@example.com", password: "password c 1" }),
    ]);
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status !== 201).every((r) => r.status === 401 || r.status === 403)).toBe(true);
    expect(await t.app.services.users.count()).toBe(1);
  });

  test("expires after 30 minutes (401)", async () => {
    const link = (await t.app.services.setup.issue())!;
    clock += 30 * 60_000;
    const r = await complete({ token: link.token, ...admin });
    expect(r.status).toBe(401);
    expect(r.body.error).toContain("expired");
    expect(await t.app.services.users.count()).toBe(0);
  });

  test("each issue (each start) replaces the previous link", async () => {
    const old = (await t.app.services.setup.issue())!;
    const fresh = (await t.app.services.setup.issue())!;
    expect((await complete({ token: old.token, ...admin })).status).toBe(401);
    expect((await complete({ token: fresh.token, ...admin })).status).toBe(201);
  });

  test.each([
    ["a wrong token", { token: "x".repeat(43) }, 401, undefined],
    ["no token", { token: undefined }, 400, "token"],
    ["a short password", { password: "short" }, 400, "password"],
    ["a bad email", { email: "not-an-email" }, 400, "email"],
    ["an unknown field", { role: "admin" }, 400, "role"],
  ])("%s → %d, and the link stays usable", async (_n, override, status, field) => {
    const link = (await t.app.services.setup.issue())!;
    const r = await complete({ token: link.token, ...admin, ...override });
    expect(r.status).toBe(status);
    if (field) expect(r.body.details.field).toBe(field);
    expect((await complete({ token: link.token, ...admin })).status).toBe(201);
  });

  test("a foreign Origin is refused (403); without any link, setup is impossible", async () => {
    const link = (await t.app.services.setup.issue())!;
    expect((await complete({ token: link.token, ...admin }, { origin: "https://evil.example" })).status).toBe(403);
    await t.app.services.settings.delete("setup_token");
    expect((await complete({ token: link.token, ...admin })).status).toBe(401);
  });

  test("once an account exists (e.g. made by the CLI), no link is issued and setup answers 403", async () => {
    const link = (await t.app.services.setup.issue())!;
    await t.app.services.users.create({ email: "cli@example.com", password: "cli password 1", role: "admin" });
    expect((await complete({ token: link.token, ...admin })).status).toBe(403);
    expect(await t.app.services.setup.issue()).toBeNull();
  });

  test("the setup token never reaches the log", async () => {
    const link = (await t.app.services.setup.issue())!;
    t.app.services.log.info("an operator pasted it", { url: link.url });
    await complete({ token: link.token, ...admin });
    expect(t.logs.some((l) => l.includes(link.token))).toBe(false);
  });
});
