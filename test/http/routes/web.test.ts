/**
 * The built-in dashboard over HTTP: the index page at `/` (and as the single-page app's fallback
 * for app paths), its hashed assets cached for good, the strict CSP on all of them, revalidation
 * of the index (ETag, 304), and a fallback that never shadows the API, operator and machine
 * prefixes. The dashboard working in a browser is test/web/.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import bundle from "../../../web/dist/bundle.json" with { type: "json" };
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";

let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
});
afterAll(() => t.stop());

const ASSETS = Object.keys((bundle as { assets: Record<string, unknown> }).assets);
const JS = ASSETS.find((n) => n.endsWith(".js"))!;
const CSS = ASSETS.find((n) => n.endsWith(".css"))!;

const indexPage = (r: { headers: Headers; body: any }, cache = "no-cache") => {
  expect(r.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(r.headers.get("cache-control")).toBe(cache);
  expect(r.headers.get("etag")).toMatch(/^"[^"]+"$/);
  expect(r.headers.get("content-security-policy")).toContain("default-src 'none'");
  expect(r.body).toContain(`<script type="module" src="/assets/${JS}"></script>`);
  expect(r.body).toContain(`<link rel="stylesheet" href="/assets/${CSS}">`);
  expect(r.body).not.toMatch(/<script>/);
};
const asset = (type: string) => (r: { headers: Headers; body: any }) => {
  expect(r.headers.get("content-type")).toBe(type);
  expect(r.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
  expect(r.headers.get("content-security-policy")).toContain("default-src 'none'");
  expect(String(r.body).length).toBeGreaterThan(100);
};

routeTable("the dashboard", () => a, [
  { route: "GET /", success: 200, check: (r) => indexPage(r) },
  {
    route: "GET /setup",
    success: 200,
    check: (r) => {
      indexPage(r, "no-store");
      expect(r.headers.get("referrer-policy")).toBe("no-referrer");
    },
  },
  { route: `GET /assets/${JS}`, success: 200, check: asset("text/javascript; charset=utf-8") },
  { route: `GET /assets/${CSS}`, success: 200, check: asset("text/css; charset=utf-8") },
]);

describe("the dashboard's files", () => {
  test("the build embeds hashed names and one script and one stylesheet", () => {
    expect(JS).toMatch(/^main-[a-z0-9]+\.js$/);
    expect(CSS).toMatch(/^main-[a-z0-9]+\.css$/);
  });

  test("the CSP: only this origin's script, style and connections; no inline script, no framing, no base or form elsewhere; images from this origin and data: only", async () => {
    const csp = (await t.fetch("/")).headers.get("content-security-policy")!;
    const directives = Object.fromEntries(csp.split(/;\s*/).map((d) => [d.split(" ")[0], d.split(" ").slice(1).join(" ")]));
    expect(directives).toEqual({
      "default-src": "'none'",
      "script-src": "'self'",
      "style-src": "'self'",
      "img-src": "'self' data:",
      "connect-src": "'self'",
      "form-action": "'self'",
      "base-uri": "'none'",
      "frame-ancestors": "'none'",
    });
    for (const path of [`/assets/${JS}`, `/assets/${CSS}`, "/docs", "/setup", "/profiles"]) {
      expect((await t.fetch(path)).headers.get("content-security-policy"), path).toBe(csp);
    }
  });

  test("the index revalidates: its ETag answers 304 with no body; another ETag gets the page again", async () => {
    const first = await t.fetch("/");
    const etag = first.headers.get("etag")!;
    const body = await first.text();
    const again = await t.fetch("/", { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get("etag")).toBe(etag);
    expect(await again.text()).toBe("");
    const stale = await t.fetch("/", { headers: { "if-none-match": '"0.0.0-stale"' } });
    expect(stale.status).toBe(200);
    expect(await stale.text()).toBe(body);
  });

  test("an unknown asset is a 404 in the error shape", async () => {
    const r = await t.fetch("/assets/main-doesnotexist.js");
    expect(r.status).toBe(404);
    expect((await r.json()).code).toBe("NOT_FOUND");
  });
});

describe("the single-page fallback", () => {
  test.each(["/profiles", "/sessions/sess_123", "/playbooks/pb_1", "/workspaces", "/operator", "/a/b/c"])("GET %s → the index page", async (path) => {
    const r = await t.fetch(path, { headers: { accept: "text/html" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await r.text()).toContain('<div id="app">');
  });

  test.each(["/v1/nothing", "/api/nothing", "/admin/nothing", "/hooks/nothing", "/files/nothing", "/metrics/x", "/docs/x", "/assets", "/favicon.ico", "/robots.txt"])(
    "GET %s is never shadowed: a JSON 404 (401 first on the credentialed surfaces)",
    async (path) => {
      const r = await t.fetch(path, { headers: { accept: "text/html" } });
      const credentialed = path.startsWith("/v1/") || path.startsWith("/admin/");
      expect(r.status).toBe(credentialed ? 401 : 404);
      expect(r.headers.get("content-type")).toContain("application/json");
      expect((await r.json()).code).toBe(credentialed ? "UNAUTHORIZED" : "NOT_FOUND");
    },
  );

  test("only GET and HEAD fall back: a POST to an app path is a 404", async () => {
    const r = await t.fetch("/profiles", { method: "POST", headers: { origin: t.url, "content-type": "application/json" }, body: "{}" });
    expect(r.status).toBe(404);
    const head = await t.fetch("/profiles", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });
});
