/**
 * The router's checks that hold for every route, on the real app: each operation that takes no
 * body (a cancel, a delete, a rotate, sign-out) refuses a body with fields — 400 naming the first,
 * documented in the OpenAPI document — and accepts none, an empty one, {} and null.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { expectDocumented } from "../helpers/openapi.ts";
import { type Actors, actors } from "../helpers/scenarios.ts";
import { api } from "../helpers/users.ts";

let t: TestApp;
let a: Actors;
let bodyless: { method: string; path: string }[];

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  const spec = await (await t.fetch("/v1/openapi.json")).json();
  bodyless = Object.entries(spec.paths as Record<string, Record<string, { requestBody?: unknown }>>).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([method, op]) => !["get", "head", "options"].includes(method) && !op.requestBody)
      // A record no one has: the answer is the route's own 404 once the body passed.
      .map(([method]) => ({ method: method.toUpperCase(), path: path.replace(/\{[^}]+\}/g, "nothing_here") })),
  );
});
afterAll(() => t.stop());

/** The credential each surface takes (a cookie on the sign-in surface). */
const headersFor = (path: string) => (path.startsWith("/admin") ? a.headers("admin") : path.startsWith("/api/auth/") ? a.headers("owner-cookie") : a.headers("owner"));

test("every operation without a body refuses one with fields: 400 VALIDATION_FAILED on the first unknown field, documented", async () => {
  expect(bodyless.map((o) => `${o.method} ${o.path}`)).toEqual(
    expect.arrayContaining(["POST /v1/tasks/nothing_here/cancel", "POST /v1/integrations/nothing_here/test", "DELETE /v1/integrations/nothing_here", "POST /api/auth/sign-out"]),
  );
  for (const { method, path } of bodyless) {
    const r = await api(t, method, path, headersFor(path), { zzz: 1, message: "custom" });
    expect([method, path, r.status, r.body]).toEqual([method, path, 400, { error: 'Unknown field "zzz"', code: "VALIDATION_FAILED", details: { field: "zzz", reason: "unknown field" } }]);
    await expectDocumented(t, method, path, r);
  }
});

test("…and takes no body, an empty one, {} or JSON null as no body", async () => {
  for (const { method, path } of bodyless.filter((o) => o.path !== "/api/auth/sign-out")) {
    for (const body of [undefined, "", "{}", "null"]) {
      const r = await api(t, method, path, headersFor(path), body);
      expect([method, path, body, r.status]).toEqual([method, path, body, 404]);
    }
  }
  // (sign-out last: it ends the cookie's session)
  expect((await api(t, "POST", "/api/auth/sign-out", a.headers("owner-cookie"), {})).status).toBe(200);
});
