/**
 * /admin/audit: the route scenario table (anonymous and a user's token → 401, bad input, the admin
 * password → success), its filters (?user_id=, ?action=, both), keyset pages newest first, and its
 * OpenAPI entry. Rows are written through the Audit service (what records them is tested in
 * test/security/audit.test.ts).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { newId } from "../../../src/db/ids.ts";
import { AUDIT_ACTIONS } from "../../../src/schema/audit.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
// Users that exist only in these rows (the log has no foreign key: rows outlive users).
const X = newId("user");
const Y = newId("user");
const ids: Record<"signInX" | "secretY" | "secretX", string> = { signInX: "", secretY: "", secretX: "" };

/** The id of the newest row (the one just recorded). */
const newest = async () => (await t.app.services.audit.list({ limit: 1 })).data[0]!.id;

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  const audit = t.app.services.audit;
  await audit.record({ action: "auth.sign_in", actor: "user", user_id: X, target_id: "login_x", ip: "192.0.2.1", details: { method: "password" } });
  ids.signInX = await newest();
  await audit.record({ action: "secret.set", actor: "user", user_id: Y, target_id: "DEPLOY_KEY", ip: "192.0.2.2", details: { name: "DEPLOY_KEY", created: true } });
  ids.secretY = await newest();
  await audit.record({ action: "secret.set", actor: "user", user_id: X, target_id: "API_KEY", ip: null, details: { name: "API_KEY", created: false } });
  ids.secretX = await newest();
});
afterAll(() => t.stop());

const idsOf = (r: { body: { data: { id: string }[] } }) => r.body.data.map((e) => e.id);

routeTable("/admin/audit", () => a, [
  {
    route: "GET /admin/audit",
    query: `user_id=${X}`,
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=101", query: "limit=101", field: "limit" },
      { name: "a user_id over 64 characters", query: `user_id=usr_${"0".repeat(62)}`, field: "user_id" },
      { name: "an action over 64 characters", query: `action=${"a".repeat(65)}`, field: "action" },
      { name: "an action that does not exist", query: "action=bogus", field: "action" },
    ],
    success: 200,
    check: (r) => {
      expect(idsOf(r)).toEqual([ids.secretX, ids.signInX]);
      expect(r.body.data[1]).toEqual({
        id: ids.signInX,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        actor: "user",
        user_id: X,
        action: "auth.sign_in",
        target_id: "login_x",
        ip: "192.0.2.1",
        details: { method: "password" },
      });
      expect(r.body.data[0]).toMatchObject({ ip: null, details: { name: "API_KEY", created: false } });
      expect(r.body.next_cursor).toBeNull();
    },
  },
]);

test("?action= is one action for every user; ?user_id= and ?action= together narrow both", async () => {
  const secrets = await api(t, "GET", "/admin/audit?action=secret.set", a.headers("admin"));
  expect(secrets.status).toBe(200);
  expect(idsOf(secrets)).toEqual([ids.secretX, ids.secretY]);
  const both = await api(t, "GET", `/admin/audit?action=secret.set&user_id=${Y}`, a.headers("admin"));
  expect(idsOf(both)).toEqual([ids.secretY]);
  const none = await api(t, "GET", `/admin/audit?action=token.deleted&user_id=${X}`, a.headers("admin"));
  expect(none.body).toEqual({ data: [], next_cursor: null });
});

test("an unknown ?action= is refused like any other enum filter, naming the allowed actions", async () => {
  const r = await api(t, "GET", "/admin/audit?action=bogus", a.headers("admin"));
  expect(r.status).toBe(400);
  expect(r.body).toEqual({ error: `action must be one of ${AUDIT_ACTIONS.join(", ")}`, code: "VALIDATION_FAILED", details: { field: "action", reason: "not allowed", in: "query" } });
  // The same shape as /admin/workspaces?status= and /v1/tasks?status=.
  const ws = await api(t, "GET", "/admin/workspaces?status=bogus", a.headers("admin"));
  expect(ws.body.details).toEqual({ field: "status", reason: "not allowed", in: "query" });
});

test("without filters: every row, newest first (the actors' own rows too)", async () => {
  const all = await api(t, "GET", "/admin/audit?limit=100", a.headers("admin"));
  // (The scenarios' refused admin credentials — a user's token — are rows of their own, newer.)
  const refused = all.body.data.filter((e: { action: string }) => e.action === "admin.sign_in_failed").map((e: { id: string }) => e.id);
  expect(refused.length).toBeGreaterThan(0);
  expect(idsOf(all).filter((id: string) => !refused.includes(id)).slice(0, 3)).toEqual([ids.secretX, ids.secretY, ids.signInX]);
  // actors(): two users' API tokens and the admin password, recorded by the services.
  expect(all.body.data.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(["token.created", "admin.password_changed"]));
  const sorted = [...idsOf(all)].sort().reverse();
  expect(idsOf(all)).toEqual(sorted);
});

test("pages of one, newest first, by next_cursor", async () => {
  const first = await api(t, "GET", `/admin/audit?user_id=${X}&limit=1`, a.headers("admin"));
  expect(idsOf(first)).toEqual([ids.secretX]);
  expect(first.body.next_cursor).toBe(ids.secretX);
  const second = await api(t, "GET", `/admin/audit?user_id=${X}&limit=1&cursor=${first.body.next_cursor}`, a.headers("admin"));
  expect(idsOf(second)).toEqual([ids.signInX]);
  expect(second.body.next_cursor).toBeNull();
});

test("documented in the OpenAPI document (tag Admin, the admin password, the filters)", async () => {
  const doc = await api(t, "GET", "/v1/openapi.json");
  const op = doc.body.paths["/admin/audit"]?.get;
  expect(op).toBeDefined();
  expect(op.tags).toEqual(["Admin"]);
  expect(op.security).toEqual([{ adminPassword: [] }]);
  expect(op.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(["limit", "cursor", "user_id", "action"]));
  expect(JSON.stringify(op.responses["200"])).toContain("next_cursor");
});
