/**
 * /v1/secrets on a real app: the route scenario table (credentials, someone else's secret, bad
 * names and values, success), create/replace/list/delete, ownership, and the at-rest guarantees
 * (ciphertext only, AAD bound to owner and name, key file 0600, values never in responses or logs).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { secrets } from "../../../src/db/tables.ts";
import { AppError } from "../../../src/lib/errors.ts";
import { KEY_FILE } from "../../../src/lib/sealer.ts";
import { SECRETS_PER_USER } from "../../../src/vault/names.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { sqlGet, sqlRun } from "../../helpers/db.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
let alice: TestUser;
let bob: TestUser;
/** Every value stored in this file: none may ever appear in a response or a log line. */
const VALUES: string[] = [];
const bodies: string[] = [];

const value = (label: string) => {
  const v = `sv-${label}-${crypto.randomUUID()}`;
  VALUES.push(v);
  return v;
};

async function call(method: string, path: string, who: TestUser | Record<string, string>, body?: unknown) {
  const headers = "bearer" in who ? (who as TestUser).bearer : (who as Record<string, string>);
  const r = await api(t, method, path, headers, body);
  bodies.push(JSON.stringify(r.body ?? ""));
  return r;
}

beforeAll(async () => {
  t = await startTestApp();
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
  a = await actors(t);
  await t.app.services.secrets.put(a.other.id, "OTHERS_ONLY", value("others"));
});
afterAll(() => t.stop());

let stored = 0;
/** A secret of `user` (through the service), by name. */
async function secret(_a: Actors, user: TestUser): Promise<string> {
  const name = `TABLE_${++stored}`;
  await t.app.services.secrets.put(user.id, name, value(name));
  return name;
}

/** The last value the table's PUT sent (its success check reads it back). */
let lastPut = "";
/** Malformed names: each is refused on `name`, on PUT as on DELETE. */
const BAD_NAMES: [string, string][] = [
  ["a name starting with a digit", "1TOKEN"],
  ["a name with a dash", "MY-TOKEN"],
  ["a name of 65 characters", "A".repeat(65)],
  ["a name not in ASCII", "TÖKEN"],
];

// PUT is keyed by a name in the caller's own namespace and creates what is missing, so "someone
// else's secret" cannot answer 404 there: the table's PUT row uses a fixed name (the ownership
// test below and "same names are independent" cover it), and its bad names are the test.each below.
routeTable("/v1/secrets", () => a, [
  {
    route: "PUT /v1/secrets/TABLE_PUT",
    body: () => ({ value: (lastPut = value("put")) }),
    invalid: [
      { name: "no value", body: {}, field: "value" },
      { name: "a value that is not a string", body: { value: 42 }, field: "value" },
      { name: "an empty value", body: { value: "" }, field: "value" },
      // Shorter values could not be scrubbed from output without garbling ordinary text.
      { name: "a value of 3 characters", body: { value: "pw1" }, field: "value" },
      { name: "a value over 64 KiB", body: { value: "x".repeat(64 * 1024 + 1) }, field: "value" },
      { name: "a value over 64 KiB in UTF-8 bytes", body: { value: "é".repeat(32 * 1024 + 1) }, field: "value" },
      { name: "a value with NUL", body: { value: "a\u0000b" }, field: "value" },
      { name: "an unknown field", body: { value: "x", note: "y" }, field: "note" },
      { name: "a body that is not an object", body: ["x"], field: "body" },
    ],
    success: 204,
    check: async (r) => {
      expect(r.body).toBeNull();
      expect(await t.app.services.secrets.resolveEnv(a.owner.id, { T: { secret: "TABLE_PUT" } })).toEqual({ T: lastPut });
    },
  },
  {
    route: "GET /v1/secrets",
    query: "limit=100",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=101", query: "limit=101", field: "limit" },
      { name: "a cursor that is not a next_cursor", query: "cursor=garbage", field: "cursor" },
    ],
    success: 200,
    check: (r) => {
      bodies.push(JSON.stringify(r.body));
      expect(r.body.next_cursor).toBeNull();
      expect(r.body.data.length).toBeGreaterThan(0);
      for (const rec of r.body.data) expect(Object.keys(rec).sort()).toEqual(["created_at", "name", "updated_at"]);
      // Only the caller's own.
      expect(r.body.data.map((s: { name: string }) => s.name)).not.toContain("OTHERS_ONLY");
    },
  },
  {
    route: "DELETE /v1/secrets/:id",
    record: secret,
    missing: "NEVER_SET",
    invalid: BAD_NAMES.map(([name, id]) => ({ name, id, field: "name" })),
    success: 204,
    check: async (r, _a, name) => {
      expect(r.body).toBeNull();
      expect((await t.app.services.secrets.list(a.owner.id, { limit: 100 })).data.map((s) => s.name)).not.toContain(name);
    },
  },
]);

test.each(BAD_NAMES)("PUT /v1/secrets/:name with %s → 400 on name", async (_what, name) => {
  const r = await call("PUT", `/v1/secrets/${encodeURIComponent(name)}`, alice, { value: "x-value" });
  expect(r.status).toBe(400);
  expect(r.body.code).toBe("VALIDATION_FAILED");
  expect(r.body.details.field).toBe("name");
});

describe("credentials", () => {
  test.each([
    ["PUT", "/v1/secrets/TOKEN", { value: "x-value" }],
    ["GET", "/v1/secrets", undefined],
    ["DELETE", "/v1/secrets/TOKEN", undefined],
  ] as const)("%s %s with a token that matches no user → 401", async (method, path, body) => {
    const r = await call(method, path, { authorization: "Bearer rc_" + "f".repeat(64) }, body);
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("UNAUTHORIZED");
  });
  test("an anonymous PUT with a bad name and value is 401, not 400", async () => {
    expect((await call("PUT", "/v1/secrets/1bad", {}, { value: 5 })).status).toBe(401);
  });
});

describe("validation", () => {
  test("a value of exactly 64 KiB is accepted", async () => {
    const prefix = value("big");
    const v = prefix + "x".repeat(64 * 1024 - prefix.length);
    VALUES[VALUES.length - 1] = v;
    expect(Buffer.byteLength(v)).toBe(64 * 1024);
    expect((await call("PUT", "/v1/secrets/BIG", alice, { value: v })).status).toBe(204);
    expect((await call("DELETE", "/v1/secrets/BIG", alice)).status).toBe(204);
  });

  test("nothing was stored by the invalid requests", async () => {
    const u = await createUser(t);
    await call("PUT", "/v1/secrets/TOKEN", u, { value: "" });
    expect((await call("GET", "/v1/secrets", u)).body).toEqual({ data: [], next_cursor: null });
  });
});

describe("lifecycle", () => {
  test("PUT creates (204), GET lists names and times only, PUT again replaces (204)", async () => {
    const v1 = value("gh1");
    const put = await call("PUT", "/v1/secrets/GITHUB_TOKEN", alice, { value: v1 });
    expect(put.status).toBe(204);
    expect(put.body).toBeNull();
    const list1 = await call("GET", "/v1/secrets", alice);
    expect(list1.status).toBe(200);
    const rec = list1.body.data.find((s: { name: string }) => s.name === "GITHUB_TOKEN");
    expect(Object.keys(rec).sort()).toEqual(["created_at", "name", "updated_at"]);
    expect(rec.created_at).toBe(rec.updated_at);

    await Bun.sleep(3);
    const v2 = value("gh2");
    expect((await call("PUT", "/v1/secrets/GITHUB_TOKEN", alice, { value: v2 })).status).toBe(204);
    const rec2 = (await call("GET", "/v1/secrets", alice)).body.data.find((s: { name: string }) => s.name === "GITHUB_TOKEN");
    expect(rec2.created_at).toBe(rec.created_at);
    expect(rec2.updated_at > rec.updated_at).toBe(true);
    expect(await t.app.services.secrets.resolveEnv(alice.id, { T: { secret: "GITHUB_TOKEN" } })).toEqual({ T: v2 });
  });

  test("names are case-sensitive", async () => {
    await call("PUT", "/v1/secrets/case_x", alice, { value: value("lower") });
    await call("PUT", "/v1/secrets/CASE_X", alice, { value: value("upper") });
    const names = (await call("GET", "/v1/secrets?limit=100", alice)).body.data.map((s: { name: string }) => s.name);
    expect(names).toEqual(expect.arrayContaining(["case_x", "CASE_X"]));
  });

  test("DELETE → 204, again → 404; the secret is gone from the list", async () => {
    await call("PUT", "/v1/secrets/TEMP", alice, { value: value("temp") });
    expect((await call("DELETE", "/v1/secrets/TEMP", alice)).status).toBe(204);
    const again = await call("DELETE", "/v1/secrets/TEMP", alice);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("NOT_FOUND");
    const names = (await call("GET", "/v1/secrets?limit=100", alice)).body.data.map((s: { name: string }) => s.name);
    expect(names).not.toContain("TEMP");
  });

  test("newest first, paginated with an opaque next_cursor (ties broken by name)", async () => {
    const u = await createUser(t);
    const names = ["A1", "B2", "C3", "D4", "E5"];
    for (const n of names) await call("PUT", `/v1/secrets/${n}`, u, { value: value(n) });
    // Two created in the same millisecond as another must not be skipped or repeated.
    const at = t.app.services.now();
    for (const n of ["T_A", "T_B", "T_C"]) {
      await t.app.services.db
        .insert(secrets)
        .values({ user_id: u.id, name: n, ciphertext: t.app.services.sealer.seal("v", `vault:${u.id}:${n}`), created_at: at + 10_000, updated_at: at + 10_000 });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await call("GET", `/v1/secrets?limit=2${cursor ? `&cursor=${cursor}` : ""}`, u);
      expect(r.status).toBe(200);
      seen.push(...r.body.data.map((s: { name: string }) => s.name));
      cursor = r.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(["T_C", "T_B", "T_A", ...[...names].reverse()]);
  });

  test(`at most ${SECRETS_PER_USER} secrets per user; replacing still works at the limit`, async () => {
    const u = await createUser(t);
    for (let i = 0; i < SECRETS_PER_USER; i++) await t.app.services.secrets.put(u.id, `S${i}`, "v-value");
    const over = await call("PUT", "/v1/secrets/ONE_MORE", u, { value: "v-value" });
    expect(over.status).toBe(400);
    expect(over.body.details).toMatchObject({ field: "name", reason: "limit" });
    expect((await call("PUT", "/v1/secrets/S0", u, { value: "v2-value" })).status).toBe(204);
  });
});

describe("ownership", () => {
  test("another user's secrets are invisible and cannot be deleted; same names are independent", async () => {
    const mine = value("alice-own");
    await call("PUT", "/v1/secrets/SHARED_NAME", alice, { value: mine });
    expect((await call("GET", "/v1/secrets?limit=100", bob)).body.data.map((s: { name: string }) => s.name)).not.toContain("SHARED_NAME");
    const del = await call("DELETE", "/v1/secrets/SHARED_NAME", bob);
    expect(del.status).toBe(404);
    const theirs = value("bob-own");
    expect((await call("PUT", "/v1/secrets/SHARED_NAME", bob, { value: theirs })).status).toBe(204);
    const s = t.app.services.secrets;
    expect((await s.resolveEnv(alice.id, { X: { secret: "SHARED_NAME" } })).X).toBe(mine);
    expect((await s.resolveEnv(bob.id, { X: { secret: "SHARED_NAME" } })).X).toBe(theirs);
  });
});

describe("at rest", () => {
  test("the database holds ciphertext only: nonce ‖ ciphertext ‖ tag, fresh nonce every write", async () => {
    const v = value("rest");
    await call("PUT", "/v1/secrets/AT_REST", alice, { value: v });
    const read = async () => (await sqlGet<{ ciphertext: Uint8Array }>(t, "SELECT ciphertext FROM secrets WHERE user_id = ? AND name = ?", [alice.id, "AT_REST"]))!.ciphertext;
    const c1 = Buffer.from(await read());
    expect(c1.length).toBe(12 + Buffer.byteLength(v) + 16);
    expect(c1.includes(Buffer.from(v))).toBe(false);
    expect(c1.toString("latin1")).not.toContain(v.slice(3, 20));
    await call("PUT", "/v1/secrets/AT_REST", alice, { value: v });
    const c2 = Buffer.from(await read());
    expect(c2.equals(c1)).toBe(false);
    expect(c2.subarray(0, 12).equals(c1.subarray(0, 12))).toBe(false);
  });

  test("the AAD binds a value to its owner and name: a copied or renamed row does not decrypt", async () => {
    const v = value("aad");
    await call("PUT", "/v1/secrets/BOUND", alice, { value: v });
    await sqlRun(t, "INSERT INTO secrets (user_id, name, ciphertext, created_at, updated_at) SELECT ?, name, ciphertext, created_at, updated_at FROM secrets WHERE user_id = ? AND name = 'BOUND'", [bob.id, alice.id]);
    await sqlRun(t, "INSERT INTO secrets (user_id, name, ciphertext, created_at, updated_at) SELECT user_id, 'RENAMED', ciphertext, created_at, updated_at FROM secrets WHERE user_id = ? AND name = 'BOUND'", [alice.id]);
    const s = t.app.services.secrets;
    for (const [user, name] of [[bob.id, "BOUND"], [alice.id, "RENAMED"]] as const) {
      let err: unknown;
      try {
        await s.resolveEnv(user, { X: { secret: name } });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe("VALIDATION_FAILED");
      expect((err as AppError).details).toMatchObject({ field: "env.X", reason: "undecryptable secret" });
      expect(JSON.stringify((err as AppError).toBody())).not.toContain(v);
    }
    expect(await s.valuesFor(bob.id)).not.toContain(v);
    expect(await s.valuesFor(alice.id)).toContain(v);
    expect((await s.resolveEnv(alice.id, { X: { secret: "BOUND" } })).X).toBe(v);
  });

  test("the key file exists in the data dir with mode 0600", () => {
    const st = statSync(join(t.dataDir, KEY_FILE));
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.size).toBeGreaterThan(40);
  });
});

test("no stored value ever appeared in a response body or a log line", () => {
  expect(VALUES.length).toBeGreaterThan(5);
  const logs = t.logs.join("\n");
  expect(logs).toContain("secret created"); // the vault does log, by name only
  expect(logs).toContain('"secret_name":"GITHUB_TOKEN"');
  const responses = bodies.join("\n");
  for (const v of VALUES) {
    expect(logs).not.toContain(v);
    expect(responses).not.toContain(v);
  }
});
