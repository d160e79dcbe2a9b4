/**
 * Table-driven route scenarios (like PocketBase's ApiScenario): one table per route module, each
 * row a route, and for each row the same questions asked the same way —
 *
 * - who may call it: anonymous → 401; a user's token on /admin/* → 401; the admin password on
 *   /v1/* → 401 (surfaces never open for the other surface's credential);
 * - someone else's record → 404 with the same body as a record that does not exist;
 * - each bad input → 400 VALIDATION_FAILED naming the field;
 * - success with the owner's token (or the admin password) → the documented status;
 * - every answer is one the OpenAPI document lists for the operation, its JSON body valid against
 *   the documented schema (test/helpers/openapi.ts).
 *
 * The credential matrix (`actors`): anonymous, the owner (API token, and cookie), another user,
 * the admin password.
 */
import { describe, expect, test } from "bun:test";
import type { TestApp } from "./app.ts";
import { expectDocumented } from "./openapi.ts";
import { api, createUser, type TestUser } from "./users.ts";

export const ADMIN_PASSWORD = "an admin password for the scenarios";

export type Who = "anonymous" | "owner" | "owner-cookie" | "other" | "admin";

export interface Actors {
  t: TestApp;
  owner: TestUser;
  other: TestUser;
  headers(who: Who): Record<string, string>;
}

/** Two users and the admin password on `t`. */
export async function actors(t: TestApp): Promise<Actors> {
  const [owner, other] = await Promise.all([createUser(t), createUser(t)]);
  await t.app.services.adminPassword.set(ADMIN_PASSWORD);
  return {
    t,
    owner,
    other,
    headers(who): Record<string, string> {
      switch (who) {
        case "anonymous":
          return {};
        case "owner":
          return { authorization: `Bearer ${owner.token}` };
        case "owner-cookie":
          return { cookie: owner.cookie, origin: t.url };
        case "other":
          return { authorization: `Bearer ${other.token}` };
        case "admin":
          return { authorization: `Bearer ${ADMIN_PASSWORD}` };
      }
    },
  };
}

export type Surface = "user" | "admin" | "public";

export interface BadInput {
  name: string;
  /** The body, or a function that makes it when the test runs (for records made in beforeAll). */
  body?: unknown;
  /** Query string (without `?`) instead of the valid one. */
  query?: string;
  /** A path id to use instead of the record's (e.g. a malformed name). */
  id?: string;
  field: string;
}

export interface RouteCase {
  /** "METHOD /path", with `:id` where the route takes the record's id (or name). */
  route: string;
  /** Creates the record the route acts on, owned by `user`; returns its id. Routes with `:id` need it. */
  record?: (a: Actors, user: TestUser) => Promise<string>;
  /** A record in the state the success needs, when that costs more than `record` (e.g. a task waiting for an answer). */
  successRecord?: (a: Actors, user: TestUser) => Promise<string>;
  /** An id no record has (same shape as a real one); default: the record's prefix and zeros. */
  missing?: string;
  /** A valid body (given the record's id). */
  body?: (id: string | undefined, a: Actors) => unknown;
  /** A valid query string (without `?`). */
  query?: string;
  invalid?: BadInput[];
  /** The success status for the owner (user routes) or the admin password (admin routes). */
  success: number;
  /** Extra checks on the successful answer. */
  check?: (res: { status: number; headers: Headers; body: any }, a: Actors, id: string | undefined) => void | Promise<void>;
  /** Default: admin for /admin/* and /metrics, user for /v1/* (but its public documents), else public. */
  surface?: Surface;
  /** Send the success request with the owner's cookie instead of the token. */
  viaCookie?: boolean;
}

/** The documents under /v1 are public (src/http/guards.ts). */
const PUBLIC_V1 = new Set(["/v1/openapi.json", "/v1/asyncapi.json"]);
const surfaceOf = (path: string): Surface =>
  path.startsWith("/admin") || path === "/metrics" ? "admin" : path.startsWith("/v1/") && !PUBLIC_V1.has(path) ? "user" : "public";

function split(route: string): { method: string; path: string } {
  const [method, path] = route.split(" ");
  return { method: method!, path: path! };
}

const fill = (path: string, id: string | undefined, query?: string) => (id === undefined ? path : path.replace(":id", encodeURIComponent(id))) + (query ? `?${query}` : "");

/** A well-formed id of the same kind that no record has. */
export function missingLike(id: string): string {
  const m = /^([a-z]+)_[0-9a-z]{26}$/.exec(id);
  return m ? `${m[1]}_${"0".repeat(26)}` : `${id.replace(/[^A-Za-z0-9_]/g, "").slice(0, 40)}_MISSING`;
}

/** The JSON body with every occurrence of `id` replaced, so two 404s can be compared. */
const normalized = (body: unknown, id: string) => JSON.parse(JSON.stringify(body).split(id).join(":id"));

/** One request of a scenario; every answer is also checked against the server's OpenAPI document. */
async function call(a: Actors, method: string, path: string, who: Who, body?: unknown) {
  const r = await api(a.t, method, path, a.headers(who), body);
  await expectDocumented(a.t, method, path, r);
  return r;
}

/**
 * Generates the scenario tests of a route module. `get` returns the actors once `beforeAll` has
 * made them.
 */
export function routeTable(name: string, get: () => Actors, cases: RouteCase[]) {
  describe(name, () => {
    for (const c of cases) {
      const { method, path } = split(c.route);
      const surface = c.surface ?? surfaceOf(path);
      const needsRecord = path.includes(":id");
      if (needsRecord && !c.record) throw new Error(`${c.route}: a route on a record needs record()`);
      const make = async (a: Actors, user: TestUser) => (c.record ? c.record(a, user) : undefined);

      if (surface === "user") {
        test(`${c.route}: anonymous → 401`, async () => {
          const a = get();
          const id = await make(a, a.owner);
          const r = await call(a, method, fill(path, id, c.query), "anonymous", c.body?.(id, a));
          expect(r.status).toBe(401);
          expect(r.body.code).toBe("UNAUTHORIZED");
        });
        test(`${c.route}: the admin password is not a user credential → 401`, async () => {
          const a = get();
          const id = await make(a, a.owner);
          const r = await call(a, method, fill(path, id, c.query), "admin", c.body?.(id, a));
          expect(r.status).toBe(401);
        });
      }
      if (surface === "admin") {
        for (const who of ["anonymous", "owner"] as const) {
          test(`${c.route}: ${who === "owner" ? "a user's token" : "anonymous"} → 401`, async () => {
            const a = get();
            const id = await make(a, a.owner);
            const r = await call(a, method, fill(path, id, c.query), who, c.body?.(id, a));
            expect(r.status).toBe(401);
            expect(r.body.code).toBe("UNAUTHORIZED");
          });
        }
      }

      if (needsRecord && surface === "user") {
        test(`${c.route}: another user's record → 404, the same answer as a missing one`, async () => {
          const a = get();
          const foreign = (await make(a, a.other))!;
          const missing = c.missing ?? missingLike(foreign);
          const theirs = await call(a, method, fill(path, foreign, c.query), "owner", c.body?.(foreign, a));
          const none = await call(a, method, fill(path, missing, c.query), "owner", c.body?.(missing, a));
          expect(theirs.status).toBe(404);
          expect(theirs.body.code).toBe("NOT_FOUND");
          expect(none.status).toBe(404);
          expect(normalized(theirs.body, foreign)).toEqual(normalized(none.body, missing));
        });
      }
      if (needsRecord && surface === "admin") {
        test(`${c.route}: a record that does not exist → 404`, async () => {
          const a = get();
          const id = (await make(a, a.owner))!;
          const r = await call(a, method, fill(path, c.missing ?? missingLike(id), c.query), "admin", c.body?.(id, a));
          expect(r.status).toBe(404);
          expect(r.body.code).toBe("NOT_FOUND");
        });
      }

      if (needsRecord && surface !== "public") {
        // `%ff` decodes to nothing: no record has that id, and no route sees a null parameter.
        test(`${c.route}: an id that does not decode (%ff) → 404, after the credential`, async () => {
          const a = get();
          const id = (await make(a, a.owner))!;
          const undecodable = path.replace(":id", "%ff") + (c.query ? `?${c.query}` : "");
          const anonymous = await call(a, method, undecodable, "anonymous", c.body?.(id, a));
          expect(anonymous.status).toBe(401);
          const r = await call(a, method, undecodable, surface === "admin" ? "admin" : "owner", c.body?.(id, a));
          expect(r.status, JSON.stringify(r.body)).toBe(404);
          expect(r.body.code).toBe("NOT_FOUND");
        });
      }

      for (const bad of c.invalid ?? []) {
        test(`${c.route}: ${bad.name} → 400 on ${bad.field}`, async () => {
          const a = get();
          const id = await make(a, a.owner);
          const who: Who = surface === "admin" ? "admin" : "owner";
          const body = "body" in bad ? (typeof bad.body === "function" ? bad.body() : bad.body) : c.body?.(id, a);
          const r = await call(a, method, fill(path, bad.id ?? id, bad.query ?? c.query), who, body);
          expect(r.status, JSON.stringify(r.body)).toBe(400);
          expect(r.body.code).toBe("VALIDATION_FAILED");
          expect(r.body.details.field).toBe(bad.field);
          expect(typeof r.body.error).toBe("string");
        });
      }

      test(`${c.route}: ${surface === "admin" ? "the admin password" : surface === "public" ? "success" : c.viaCookie ? "the owner's cookie" : "the owner's token"} → ${c.success}`, async () => {
        const a = get();
        const id = c.successRecord ? await c.successRecord(a, a.owner) : await make(a, a.owner);
        const who: Who = surface === "admin" ? "admin" : surface === "public" ? "anonymous" : c.viaCookie ? "owner-cookie" : "owner";
        const r = await call(a, method, fill(path, id, c.query), who, c.body?.(id, a));
        expect(r.status, JSON.stringify(r.body)).toBe(c.success);
        if (c.success !== 204 && r.status < 300 && r.headers.get("content-type")?.includes("json")) expect(r.body).not.toBeNull();
        await c.check?.(r, a, id);
      });
    }
  });
}
