/**
 * GET /healthz: public (the scenario table's success row; a credential changes nothing), the body
 * is exactly {status, version, db, docker, replica}; an unreachable Docker engine is reported but is
 * not a failure, a database that does not answer is (503). `replica` is the answering server's id,
 * also sent as X-Runcell-Replica on every response.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DB_PROBE_MAX_AGE_MS } from "../../../src/http/routes/health.ts";
import { VERSION } from "../../../src/version.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  // /healthz answers from the last Docker probe; make sure there has been one.
  expect(await t.app.services.docker.available(0)).toBe(true);
});
afterAll(() => t.stop());

routeTable("/healthz", () => a, [
  {
    route: "GET /healthz",
    success: 200,
    check: (r) => {
      expect(r.body).toEqual({ status: "ok", version: VERSION, db: "ok", docker: "ok", replica: t.app.services.replicas.id });
      expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(r.headers.get("x-runcell-replica")).toBe(t.app.services.replicas.id);
    },
  },
]);

test("a credential changes nothing: a bad token, a user's token and the admin password get the same answer", async () => {
  const anonymous = await api(t, "GET", "/healthz");
  for (const headers of [{ authorization: "Bearer rc_not-a-token" }, a.headers("owner"), a.headers("admin")]) {
    const r = await api(t, "GET", "/healthz", headers);
    expect(r.status).toBe(200);
    expect(r.body).toEqual(anonymous.body);
  }
});

test("Docker unreachable: still 200, docker unavailable; the database closed: 503 once the last probe is a second old, status and db error", async () => {
  const bare = await startTestApp({ flags: ["--docker-host", "tcp://127.0.0.1:9"] });
  try {
    expect(await bare.app.services.docker.available(0)).toBe(false);
    const noDocker = await api(bare, "GET", "/healthz");
    expect(noDocker.status).toBe(200);
    expect(noDocker.body).toEqual({ status: "ok", version: VERSION, db: "ok", docker: "unavailable", replica: bare.app.services.replicas.id });
    // The database goes away: SQLite's connection, or PostgreSQL's pool, is closed under the app.
    const { sqlite, sql } = bare.app.services.store;
    if (sqlite) sqlite.close(true);
    else await sql!.close({ timeout: 0 });
    // The last probe's answer stands until it is DB_PROBE_MAX_AGE_MS old.
    await Bun.sleep(DB_PROBE_MAX_AGE_MS + 50);
    if (PG_SERVER) {
      // PostgreSQL's probe is a round trip: its answer applies from the next request on
      // (src/http/routes/health.ts). This request starts it; the closed pool refuses at once.
      await api(bare, "GET", "/healthz");
      await Bun.sleep(100);
    }
    const noDb = await api(bare, "GET", "/healthz");
    expect(noDb.status).toBe(503);
    expect(noDb.body).toEqual({ status: "error", version: VERSION, db: "error", docker: "unavailable", replica: bare.app.services.replicas.id });
  } finally {
    await bare.stop();
  }
});

test("which replica answered: /healthz's replica is this process's rep_ id, distinct per app, and every response (routed, refused, 404) carries it as X-Runcell-Replica", async () => {
  const id = t.app.services.replicas.id;
  expect(id).toMatch(/^rep_[0-9a-z]+$/);
  const other = await startTestApp();
  try {
    const mine = await api(t, "GET", "/healthz");
    const theirs = await api(other, "GET", "/healthz");
    expect(mine.body.replica).toBe(id);
    expect(theirs.body.replica).toBe(other.app.services.replicas.id);
    expect(theirs.body.replica).not.toBe(id);
    expect(theirs.headers.get("x-runcell-replica")).toBe(theirs.body.replica);
  } finally {
    await other.stop();
  }
  for (const [path, headers, status] of [
    ["/v1/profiles", a.headers("owner"), 200],
    ["/v1/profiles", {}, 401],
    ["/v1/no-such-route", a.headers("owner"), 404],
  ] as const) {
    const r = await t.fetch(path, { headers });
    expect(r.status).toBe(status);
    expect(r.headers.get("x-runcell-replica")).toBe(id);
  }
});

test("the OpenAPI document describes the replica field of /healthz", async () => {
  const doc = (await api(t, "GET", "/v1/openapi.json")).body;
  const schema = doc.paths["/healthz"].get.responses["200"].content["application/json"].schema;
  expect(schema.required).toContain("replica");
  expect(schema.properties.replica.type).toBe("string");
});
