/**
 * Headers every API answer carries, on the real app: JSON answers are never stored by a cache
 * (they hold new tokens, private records), and a 401 names the scheme that would be accepted.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let user: TestUser;
beforeAll(async () => {
  t = await startTestApp();
  user = await createUser(t);
});
afterAll(() => t.stop());

test("JSON answers say Cache-Control: no-store — a new token's 201, a record, an error, a list, /healthz", async () => {
  const created = await api(t, "POST", "/v1/api-tokens", user.bearer, { name: "ci" });
  expect(created.status).toBe(201);
  expect(created.body.token).toMatch(/^rc_/);
  const answers = [
    created,
    await api(t, "GET", "/v1/me", user.bearer),
    await api(t, "GET", "/v1/api-tokens", user.bearer),
    await api(t, "GET", "/v1/profiles/prof_nope", user.bearer),
    await api(t, "POST", "/v1/api-tokens", user.bearer, { name: "" }),
    await api(t, "GET", "/healthz"),
    await api(t, "GET", "/api/auth/get-session", user.bearer),
  ];
  for (const r of answers) expect([r.status, r.headers.get("cache-control")]).toEqual([r.status, "no-store"]);
});

test("pages and assets keep their own caching", async () => {
  const page = await t.fetch("/");
  expect(page.headers.get("cache-control")).toBe("no-cache");
});

test("a 401 names the Bearer scheme (RFC 9110), on /v1, /admin and the stream's HTTP answer", async () => {
  for (const path of ["/v1/me", "/admin/users", "/v1/stream"]) {
    const r = await t.fetch(path, { headers: { authorization: "Bearer rc_wrong" } });
    expect([path, r.status, r.headers.get("www-authenticate")]).toEqual([path, 401, 'Bearer realm="runcell"']);
  }
  // Other statuses do not.
  expect((await api(t, "GET", "/v1/me", user.bearer)).headers.get("www-authenticate")).toBeNull();
});
