/**
 * /v1/api-tokens: the route scenario table (credentials, someone else's token, bad input,
 * success), credentials that are not one (malformed or unknown token, a bad cookie), and the token
 * lifecycle (create → use → delete → 401 on the very next request, also past the verification cache).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { isWellFormedToken, mintTokenString } from "../../../src/auth/tokens.ts";
import { first } from "../../../src/db/client.ts";
import { apiTokens } from "../../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
  a = await actors(t);
});
afterAll(() => t.stop());

const headersFor = (c: "token" | "cookie", u: TestUser): Record<string, string> => (c === "token" ? { authorization: `Bearer ${u.token}` } : { cookie: u.cookie, origin: t.url });

/** A token of `user`, made through the service; its id. */
const token = async (_a: Actors, user: TestUser) => (await t.app.services.tokens.create(user.id, "x")).id;

/** What POST answers: the plaintext once, and the record. */
function expectCreated(body: any) {
  expect(body.token).toMatch(/^rc_[0-9a-f]{64}$/);
  expect(isWellFormedToken(body.token)).toBe(true);
  expect(body.id).toMatch(/^tok_[0-9a-z]{26}$/);
  expect(Object.keys(body).sort()).toEqual(["created_at", "id", "name", "token"]);
}

routeTable("/v1/api-tokens", () => a, [
  {
    route: "POST /v1/api-tokens",
    body: () => ({ name: "ci" }),
    invalid: [
      { name: "no name", body: {}, field: "name" },
      { name: "an empty name", body: { name: "" }, field: "name" },
      { name: "a 101-character name", body: { name: "n".repeat(101) }, field: "name" },
      { name: "a name with a control character", body: { name: "ci\u0000token" }, field: "name" },
      { name: "a name with a bidi override (it would read backwards)", body: { name: "ci\u202etoken" }, field: "name" },
      { name: "a name that looks blank (Hangul filler)", body: { name: "\u3164" }, field: "name" },
      { name: "a blank name", body: { name: "   " }, field: "name" },
      { name: "an unknown field", body: { name: "x", scope: "all" }, field: "scope" },
    ],
    success: 201,
    check: async (r) => {
      expectCreated(r.body);
      expect(r.body.name).toBe("ci");
      // The new token is a working credential of the owner.
      const mine = await api(t, "GET", "/v1/api-tokens?limit=100", { authorization: `Bearer ${r.body.token}` });
      expect(mine.status).toBe(200);
      expect(mine.body.data.map((x: { id: string }) => x.id)).toContain(a.owner.tokenId);
    },
  },
  {
    route: "GET /v1/api-tokens",
    query: "limit=100",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=101", query: "limit=101", field: "limit" },
    ],
    success: 200,
    viaCookie: true,
    check: (r) => {
      expect(r.body.next_cursor).toBeNull();
      const ids = r.body.data.map((x: { id: string }) => x.id);
      expect(ids).toContain(a.owner.tokenId);
      // Only the caller's own tokens, and never the token itself.
      expect(ids).not.toContain(a.other.tokenId);
      for (const rec of r.body.data) expect(Object.keys(rec).sort()).toEqual(["created_at", "id", "last_used_at", "name"]);
    },
  },
  {
    route: "DELETE /v1/api-tokens/:id",
    record: token,
    success: 204,
    check: async (r, _a, id) => {
      expect(r.body).toBeNull();
      expect((await t.app.services.tokens.list(a.owner.id, { limit: 100 })).data.map((x) => x.id)).not.toContain(id);
    },
  },
]);

describe("credentials that are not one", () => {
  const bad = {
    "a malformed token": () => ({ authorization: `Bearer rc_${"0".repeat(64)}` }),
    "an unknown token": () => ({ authorization: `Bearer ${mintTokenString()}` }),
    "a bad cookie": () => ({ cookie: "runcell.session_token=not-a-session", origin: t.url }),
  };
  const routes = [
    ["POST", () => "/v1/api-tokens", { name: "x" }],
    ["GET", () => "/v1/api-tokens", undefined],
    ["DELETE", () => `/v1/api-tokens/${alice.tokenId}`, undefined],
  ] as const;
  test.each(Object.keys(bad).flatMap((creds) => routes.map(([method, path, body]) => [method, creds as keyof typeof bad, path, body] as const)))(
    "%s with %s → 401",
    async (method, creds, path, body) => {
      const r = await api(t, method, path(), bad[creds](), body);
      expect(r.status).toBe(401);
      expect(r.body.code).toBe("UNAUTHORIZED");
    },
  );

  test("an anonymous POST with a bad body is still 401 (credentials first)", async () => {
    const r = await api(t, "POST", "/v1/api-tokens", {}, { nope: 1 });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("UNAUTHORIZED");
  });

  test("the token and the cookie both create and list", async () => {
    for (const c of ["token", "cookie"] as const) {
      const created = await api(t, "POST", "/v1/api-tokens", headersFor(c, alice), { name: `via-${c}` });
      expect(created.status).toBe(201);
      expectCreated(created.body);
      const list = await api(t, "GET", "/v1/api-tokens?limit=100", headersFor(c, alice));
      expect(list.status).toBe(200);
      expect(list.body.data.map((x: { id: string }) => x.id)).toContain(created.body.id);
    }
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
    const row = (await first(
      t.app.services.db.select({ lookup: apiTokens.lookup, token_hash: apiTokens.token_hash }).from(apiTokens).where(eq(apiTokens.id, created.body.id)),
    ))!;
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

  test("tokens made at the same time list newest first by created_at too (the order of ids)", async () => {
    const h = headersFor("token", bob);
    const made = await Promise.all(Array.from({ length: 6 }, (_, i) => api(t, "POST", "/v1/api-tokens", h, { name: `c${i}` })));
    for (const r of made) expect(r.status).toBe(201);
    const list = (await api(t, "GET", "/v1/api-tokens?limit=100", h)).body.data as { created_at: string }[];
    const times = list.map((x) => Date.parse(x.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  test("the token never reaches the log", () => {
    expect(t.logs.some((l) => /rc_[0-9a-f]{20,}/.test(l))).toBe(false);
    expect(t.logs.some((l) => l.includes(alice.token))).toBe(false);
  });
});
