/**
 * The built-in dashboard's files over HTTP: GET /, /app.js and /app.css are public (the scenario
 * table's success rows) with their content types, a CSP that lets only the page's own script and
 * stylesheet run and talk only to this origin, and revalidation (ETag, 304 on If-None-Match).
 * The dashboard working in a browser is test/web/dashboard.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";

let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
});
afterAll(() => t.stop());

const ASSETS = [
  ["/", "text/html; charset=utf-8"],
  ["/app.js", "text/javascript; charset=utf-8"],
  ["/app.css", "text/css; charset=utf-8"],
] as const;

/** The headers every dashboard file is served with. */
const served = (type: string) => (r: { headers: Headers; body: any }) => {
  expect(r.headers.get("content-type")).toBe(type);
  expect(r.headers.get("cache-control")).toBe("no-cache");
  expect(r.headers.get("etag")).toMatch(/^"[^"]+"$/);
  expect(r.headers.get("content-security-policy")).toContain("default-src 'none'");
  expect(typeof r.body).toBe("string");
  expect(r.body.length).toBeGreaterThan(0);
};

routeTable("the dashboard", () => a, [
  {
    route: "GET /",
    success: 200,
    check: (r) => {
      served("text/html; charset=utf-8")(r);
      expect(r.body).toContain('<script src="/app.js"');
      expect(r.body).toContain('<link rel="stylesheet" href="/app.css">');
    },
  },
  { route: "GET /app.js", success: 200, check: served("text/javascript; charset=utf-8") },
  { route: "GET /app.css", success: 200, check: served("text/css; charset=utf-8") },
]);

describe("the dashboard's files", () => {
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
    for (const [path] of ASSETS.slice(1)) expect((await t.fetch(path)).headers.get("content-security-policy")).toBe(csp);
  });

  test.each(ASSETS)("%s: its ETag answers 304 with no body; another ETag gets the file again", async (path) => {
    const first = await t.fetch(path);
    const etag = first.headers.get("etag")!;
    const body = await first.text();
    const again = await t.fetch(path, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get("etag")).toBe(etag);
    expect(await again.text()).toBe("");
    const stale = await t.fetch(path, { headers: { "if-none-match": '"0.0.0-stale"' } });
    expect(stale.status).toBe(200);
    expect(await stale.text()).toBe(body);
  });

  test("each file has its own ETag", async () => {
    const etags = await Promise.all(ASSETS.map(async ([path]) => (await t.fetch(path)).headers.get("etag")));
    expect(new Set(etags).size).toBe(ASSETS.length);
  });
});
