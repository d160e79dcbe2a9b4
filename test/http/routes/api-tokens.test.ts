/**
 * /v1/api-tokens: the route scenario table (no credential, bad credential, someone else's record,
 * bad input, success) and the token lifecycle (create → use → delete → 401 on the very next
 * request, also past the verification cache).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { isWellFormedToken, mintTokenString } from "../../../src/auth/tokens.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
});
afterAll(() => t.stop());

type Creds = "none" | "malformed token" | "unknown token" | "bad cookie" | "token" | "cookie";
const headersFor = (c: Creds, u: TestUser): Record<string, string> => {
  switch (c) {
    case "none":
      return {};
    case "malformed token":
      return { authorization: `Bearer rc_${"0".repeat(64)}` };
    case "unknown token":
      return { authorization: `Bearer ${mintTokenString()}` };
    case "bad cookie":
      return { cookie: "runcell.session_token=not-a-session", origin: t.url };
    case "token":
      return { authorization: `Bearer ${u.token}` };
    case "cookie":
      return { cookie: u.cookie, origin: t.url };
  }
};

interface Scenario {
  name: string;
  method: string;
  path: () => string;
  creds: Creds;
  body?: unknown;
  status: number;
  code?: string;
  field?: string;
}

const scenarios: Scenario[] = [];
for (const creds of ["none", "malformed token", "unknown token", "bad cookie"] as const) {
  scenarios.push(
    { name: `POST with ${creds}`, method: "POST", path: () => "/v1/api-tokens", creds, body: { name: "x" }, status: 401, code: "UNAUTHORIZED" },
    { name: `GET with ${creds}`, method: "GET", path: () => "/v1/api-tokens", creds, status: 401, code: "UNAUTHORIZED" },
    { name: `DELETE with ${creds}`, method: "DELETE", path: () => `/v1/api-tokens/${alice.tokenId}`, creds, status: 401, code: "UNAUTHORIZED" },
  );
}
scenarios.push(
  { name: "anonymous POST with a bad body is still 401 (credentials first)", method: "POST", path: () => "/v1/api-tokens", creds: "none", body: { nope: 1 }, status: 401, code: "UNAUTHORIZED" },
  { name: "DELETE someone else's token", method: "DELETE", path: () => `/v1/api-tokens/${bob.tokenId}`, creds: "token", status: 404, code: "NOT_FOUND" },
  { name: "DELETE a token that never existed", method: "DELETE", path: () => "/v1/api-tokens/tok_01aaaaaaaaaaaaaaaaaaaaaaaa", creds: "cookie", status: 404, code: "NOT_FOUND" },
  { name: "POST without name", method: "POST", path: () => "/v1/api-tokens", creds: "token", body: {}, status: 400, code: "VALIDATION_FAILED", field: "name" },
  { name: "POST with an empty name", method: "POST", path: () => "/v1/api-tokens", creds: "token", body: { name: "" }, status: 400, code: "VALIDATION_FAILED", field: "name" },
  { name: "POST with a 101-character name", method: "POST", path: () => "/v1/api-tokens", creds: "cookie", body: { name: "n".repeat(101) }, status: 400, code: "VALIDATION_FAILED", field: "name" },
  { name: "POST with an unknown field", method: "POST", path: () => "/v1/api-tokens", creds: "token", body: { name: "x", scope: "all" }, status: 400, code: "VALIDATION_FAILED", field: "scope" },
  { name: "GET with limit=0", method: "GET", path: () => "/v1/api-tokens?limit=0", creds: "token", status: 400, code: "VALIDATION_FAILED", field: "limit" },
  { name: "POST with a token", method: "POST", path: () => "/v1/api-tokens", creds: "token", body: { name: "ci" }, status: 201 },
  { name: "POST with a cookie", method: "POST", path: () => "/v1/api-tokens", creds: "cookie", body: { name: "laptop" }, status: 201 },
  { name: "GET with a token", method: "GET", path: () => "/v1/api-tokens", creds: "token", status: 200 },
  { name: "GET with a cookie", method: "GET", path: () => "/v1/api-tokens", creds: "cookie", status: 200 },
);

describe("/v1/api-tokens scenarios", () => {
  test.each(scenarios.map((s) => [s.name, s] as const))("%s", async (_n, s) => {
    const r = await api(t, s.method, s.path(), headersFor(s.creds, alice), s.body);
    expect(r.status).toBe(s.status);
    if (s.code) expect(r.body.code).toBe(s.code);
    if (s.field) expect(r.body.details.field).toBe(s.field);
    if (s.status === 201) {
      expect(r.body.token).toMatch(/^rc_[0-9a-f]{64}$/);
      expect(isWellFormedToken(r.body.token)).toBe(true);
      expect(r.body.id).toMatch(/^tok_/);
      expect(Object.keys(r.body).sort()).toEqual(["created_at", "id", "name", "token"]);
    }
    if (s.status === 200) {
      expect(r.body.next_cursor === null || typeof r.body.next_cursor === "string").toBe(true);
      for (const rec of r.body.data) {
        expect(Object.keys(rec).sort()).toEqual(["created_at", "id", "last_used_at", "name"]);
      }
      // Only the caller's own tokens.
      expect(r.body.data.map((x: { id: string }) => x.id)).not.toContain(bob.tokenId);
    }
  });

  test("a 404 for someone else's token has exactly the body of a missing one", async () => {
    const other = await api(t, "DELETE", `/v1/api-tokens/${bob.tokenId}`, headersFor("token", alice));
    const missing = await api(t, "DELETE", `/v1/api-tokens/${bob.tokenId.slice(0, -1)}x`, headersFor("token", alice));
    expect(other.body.code).toBe(missing.body.code);
    expect(other.body.error.replace(bob.tokenId, "ID")).toBe(missing.body.error.replace(/tok_\w+/, "ID"));
  });
});

describe("token lifecycle", () => {
  test("create → use → delete → 401 on the very next request; DELETE again → 404", async () => {
    const created = await api(t, "POST", "/v1/api-tokens", { cookie: alice.cookie, origin: t.url }, { name: "rotate-me" });
    expect(created.status).toBe(201);
    const auth = { authorization: `Bearer ${created.body.token}` };
    // Used twice: the second use is served from the verification cache.
    expect((await api(t, "GET", "/v1/api-tokens", auth)).status).toBe(200);
    const list = await api(t, "GET", "/v1/api-tokens", auth);
    const mine = list.body.data.find((x: { id: string }) => x.id === created.body.id);
    expect(mine.last_used_at).not.toBeNull();
    expect(mine).not.toHaveProperty("token");
    const del = await t.fetch(`/v1/api-tokens/${created.body.id}`, { method: "DELETE", headers: auth });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    const after = await api(t, "GET", "/v1/api-tokens", auth);
    expect(after.status).toBe(401);
    expect(after.body.code).toBe("UNAUTHORIZED");
    const again = await api(t, "DELETE", `/v1/api-tokens/${created.body.id}`, headersFor("token", alice));
    expect(again.status).toBe(404);
  });

  test("concurrent first uses of a token share one bcrypt compare; later uses hit the cache", async () => {
    const created = await api(t, "POST", "/v1/api-tokens", headersFor("token", alice), { name: "burst" });
    const password = Bun.password as { verify: typeof Bun.password.verify };
    const original = password.verify;
    let compares = 0;
    password.verify = (...args: Parameters<typeof original>) => {
      compares++;
      return original(...args);
    };
    try {
      const auth = { authorization: `Bearer ${created.body.token}` };
      const res = await Promise.all(Array.from({ length: 8 }, () => t.fetch("/v1/api-tokens", { headers: auth })));
      expect(res.map((r) => r.status)).toEqual(Array(8).fill(200));
      expect(compares).toBe(1);
      expect((await t.fetch("/v1/api-tokens", { headers: auth })).status).toBe(200);
      expect(compares).toBe(1);
    } finally {
      password.verify = original;
    }
  });

  test("the plaintext is never stored: only bcrypt and a lookup prefix", async () => {
    const created = await api(t, "POST", "/v1/api-tokens", headersFor("token", alice), { name: "stored" });
    const row = t.app.services.sqlite
      .query<{ lookup: string; token_hash: string }, [string]>("SELECT lookup, token_hash FROM api_tokens WHERE id = ?")
      .get(created.body.id)!;
    expect(row.token_hash).toMatch(/^\$2[aby]\$1\d\$/);
    expect(row.token_hash).not.toContain(created.body.token.slice(3));
    expect(created.body.token.slice(3)).toContain(row.lookup);
    expect(row.lookup.length).toBeLessThan(20);
  });

  test("pagination: newest first, limit and cursor", async () => {
    const h = headersFor("token", bob);
    for (const n of ["p1", "p2", "p3"]) expect((await api(t, "POST", "/v1/api-tokens", h, { name: n })).status).toBe(201);
    const first = await api(t, "GET", "/v1/api-tokens?limit=2", h);
    expect(first.body.data.map((x: { name: string }) => x.name)).toEqual(["p3", "p2"]);
    expect(first.body.next_cursor).toBeString();
    const second = await api(t, "GET", `/v1/api-tokens?limit=2&cursor=${first.body.next_cursor}`, h);
    expect(second.body.data.map((x: { name: string }) => x.name)).toEqual(["p1", "test"]);
    expect(second.body.next_cursor).toBeNull();
  });

  test("the token never reaches the log", () => {
    expect(t.logs.some((l) => /rc_[0-9a-f]{20,}/.test(l))).toBe(false);
    expect(t.logs.some((l) => l.includes(alice.token))).toBe(false);
  });
});
