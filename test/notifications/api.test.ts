/**
 * Table-driven API scenarios for every notifications route: no credential 401, bad credential
 * 401, someone else's record 404, bad input 400, success. Plus the write-only secret (never in a
 * response or a log line) and the upsert / delete semantics.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../src/db/ids.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { waitFor } from "../helpers/net.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { type Receiver, startReceiver } from "./receiver.ts";

const SECRET_A = "whsec_alpha_" + "q7Zx".repeat(8);
const SECRET_B = "whsec_bravo_" + "m3Kp".repeat(8);
const ADMIN_PASSWORD = "operator-password-123";

let t: TestApp;
let a: TestUser;
let b: TestUser;
let c: TestUser; // never configures a webhook
let rcvA: Receiver;
let rcvB: Receiver;
let intA = "";
let intB = "";
let ntfA = "";
let ntfB = "";
let taskA = "";
let taskB = "";
const BAD = { authorization: "Bearer rc_" + "0".repeat(64), "content-type": "application/json" };
const NONE = { "content-type": "application/json" };
const admin = { authorization: `Bearer ${ADMIN_PASSWORD}` };

function insertTask(userId: string): string {
  const sqlite = t.app.services.sqlite;
  const sess = newId("session");
  const task = newId("task");
  const now = Date.now();
  sqlite.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)", [sess, userId, "prof_x", now, now]);
  sqlite.run(
    "INSERT INTO tasks (id, user_id, session_id, profile_id, prompt, status, max_turns, max_budget_usd, created_at) VALUES (?, ?, ?, ?, ?, 'completed', 10, 1, ?)",
    [task, userId, sess, "prof_x", "p", now],
  );
  return task;
}

beforeAll(async () => {
  t = await startTestApp();
  await t.app.services.adminPassword.set(ADMIN_PASSWORD);
  [a, b, c] = await Promise.all([createUser(t), createUser(t), createUser(t)]);
  rcvA = startReceiver({ secret: SECRET_A });
  rcvB = startReceiver({ secret: SECRET_B, respond: () => new Response("gone", { status: 410 }) });
  const ia = await api(t, "POST", "/v1/integrations", a.bearer, { type: "webhook", config: { url: rcvA.url + "/a", secret: SECRET_A } });
  const ib = await api(t, "POST", "/v1/integrations", b.session, { type: "webhook", config: { url: rcvB.url + "/b", secret: SECRET_B } });
  expect([ia.status, ib.status]).toEqual([201, 201]);
  intA = ia.body.id;
  intB = ib.body.id;
  taskA = insertTask(a.id);
  taskB = insertTask(b.id);
  ntfA = (await api(t, "POST", "/v1/notifications", a.bearer, { message: "from a", task_id: taskA })).body.id;
  ntfB = (await api(t, "POST", "/v1/notifications", b.bearer, { message: "from b" })).body.id;
  await waitFor(() => t.app.services.notifications.get(b.id, ntfB).status === "failed", { what: "b's notification to fail (410)" });
});

afterAll(async () => {
  rcvA?.stop();
  rcvB?.stop();
  await t?.stop();
});

interface Scenario {
  name: string;
  method: string;
  path: () => string;
  headers: () => Record<string, string>;
  body?: () => unknown;
  status: number;
  code?: string;
  field?: string;
}

const user = (u: () => TestUser) => () => u().bearer;

const scenarios: Scenario[] = [
  // POST /v1/integrations
  { name: "create: no credential", method: "POST", path: () => "/v1/integrations", headers: () => NONE, body: () => ({ type: "webhook", config: { url: "http://x.test/" } }), status: 401, code: "UNAUTHORIZED" },
  { name: "create: bad credential", method: "POST", path: () => "/v1/integrations", headers: () => BAD, body: () => ({ type: "webhook", config: { url: "http://x.test/" } }), status: 401, code: "UNAUTHORIZED" },
  { name: "create: type slack", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "slack", config: { url: "http://x.test/" } }), status: 400, field: "type" },
  { name: "create: no config", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook" }), status: 400, field: "config" },
  { name: "create: no url", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: {} }), status: 400, field: "config.url" },
  { name: "create: malformed url", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "http//nope" } }), status: 400, field: "config.url" },
  { name: "create: ftp scheme", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "ftp://x.test/" } }), status: 400, field: "config.url" },
  { name: "create: credentials in url", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "https://u:p@x.test/" } }), status: 400, field: "config.url" },
  { name: "create: empty secret", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "http://x.test/", secret: "" } }), status: 400, field: "config.secret" },
  { name: "create: secret too long", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "http://x.test/", secret: "s".repeat(513) } }), status: 400, field: "config.secret" },
  { name: "create: unknown field", method: "POST", path: () => "/v1/integrations", headers: user(() => c), body: () => ({ type: "webhook", config: { url: "http://x.test/", sekret: "x" } }), status: 400, field: "config.sekret" },
  // GET /v1/integrations
  { name: "list: no credential", method: "GET", path: () => "/v1/integrations", headers: () => NONE, status: 401, code: "UNAUTHORIZED" },
  { name: "list: bad credential", method: "GET", path: () => "/v1/integrations", headers: () => BAD, status: 401, code: "UNAUTHORIZED" },
  { name: "list: bad limit", method: "GET", path: () => "/v1/integrations?limit=0", headers: user(() => a), status: 400, field: "limit" },
  // GET /v1/integrations/:id
  { name: "get: no credential", method: "GET", path: () => `/v1/integrations/${intA}`, headers: () => NONE, status: 401 },
  { name: "get: bad credential", method: "GET", path: () => `/v1/integrations/${intA}`, headers: () => BAD, status: 401 },
  { name: "get: someone else's", method: "GET", path: () => `/v1/integrations/${intB}`, headers: user(() => a), status: 404, code: "NOT_FOUND" },
  { name: "get: missing", method: "GET", path: () => `/v1/integrations/int_nope`, headers: user(() => a), status: 404, code: "NOT_FOUND" },
  // DELETE /v1/integrations/:id
  { name: "delete: no credential", method: "DELETE", path: () => `/v1/integrations/${intA}`, headers: () => NONE, status: 401 },
  { name: "delete: bad credential", method: "DELETE", path: () => `/v1/integrations/${intA}`, headers: () => BAD, status: 401 },
  { name: "delete: someone else's", method: "DELETE", path: () => `/v1/integrations/${intB}`, headers: user(() => a), status: 404, code: "NOT_FOUND" },
  // POST /v1/integrations/:id/test
  { name: "test: no credential", method: "POST", path: () => `/v1/integrations/${intA}/test`, headers: () => NONE, status: 401 },
  { name: "test: bad credential", method: "POST", path: () => `/v1/integrations/${intA}/test`, headers: () => BAD, status: 401 },
  { name: "test: someone else's", method: "POST", path: () => `/v1/integrations/${intB}/test`, headers: user(() => a), status: 404, code: "NOT_FOUND" },
  // POST /v1/notifications
  { name: "notify: no credential", method: "POST", path: () => "/v1/notifications", headers: () => NONE, body: () => ({ message: "x" }), status: 401 },
  { name: "notify: bad credential", method: "POST", path: () => "/v1/notifications", headers: () => BAD, body: () => ({ message: "x" }), status: 401 },
  { name: "notify: no message", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({}), status: 400, field: "message" },
  { name: "notify: blank message", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "  \n " }), status: 400, field: "message" },
  { name: "notify: message over 4000", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x".repeat(4001) }), status: 400, field: "message" },
  { name: "notify: bad urgency", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x", urgency: "urgent" }), status: 400, field: "urgency" },
  { name: "notify: malformed task_id", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x", task_id: "123" }), status: 400, field: "task_id" },
  { name: "notify: someone else's task", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x", task_id: taskB }), status: 400, field: "task_id" },
  { name: "notify: malformed playbook_id", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x", playbook_id: "task_1" }), status: 400, field: "playbook_id" },
  { name: "notify: unknown field", method: "POST", path: () => "/v1/notifications", headers: user(() => a), body: () => ({ message: "x", channel: "sms" }), status: 400, field: "channel" },
  { name: "notify: no integration", method: "POST", path: () => "/v1/notifications", headers: user(() => c), body: () => ({ message: "x" }), status: 400, field: "integration" },
  // GET /v1/notifications
  { name: "notifications: no credential", method: "GET", path: () => "/v1/notifications", headers: () => NONE, status: 401 },
  { name: "notifications: bad credential", method: "GET", path: () => "/v1/notifications", headers: () => BAD, status: 401 },
  { name: "notifications: bad status", method: "GET", path: () => "/v1/notifications?status=lost", headers: user(() => a), status: 400, field: "status" },
  // GET /v1/notifications/:id
  { name: "notification: no credential", method: "GET", path: () => `/v1/notifications/${ntfA}`, headers: () => NONE, status: 401 },
  { name: "notification: bad credential", method: "GET", path: () => `/v1/notifications/${ntfA}`, headers: () => BAD, status: 401 },
  { name: "notification: someone else's", method: "GET", path: () => `/v1/notifications/${ntfB}`, headers: user(() => a), status: 404, code: "NOT_FOUND" },
  // GET /admin/notifications
  { name: "admin: no credential", method: "GET", path: () => "/admin/notifications?status=failed", headers: () => ({}), status: 401 },
  { name: "admin: a user's token", method: "GET", path: () => "/admin/notifications?status=failed", headers: user(() => a), status: 401 },
  { name: "admin: wrong password", method: "GET", path: () => "/admin/notifications?status=failed", headers: () => ({ authorization: "Bearer wrong-password-xyz" }), status: 401 },
  { name: "admin: bad status", method: "GET", path: () => "/admin/notifications?status=nope", headers: () => admin, status: 400, field: "status" },
];

describe("refusals", () => {
  test.each(scenarios.map((s) => [s.name, s] as const))("%s", async (_n, s) => {
    const res = await api(t, s.method, s.path(), s.headers(), s.body?.());
    expect(res.status).toBe(s.status);
    expect(typeof res.body.error).toBe("string");
    if (s.code) expect(res.body.code).toBe(s.code);
    if (s.status === 400) expect(res.body.code).toBe("VALIDATION_FAILED");
    if (s.field) expect(res.body.details?.field).toBe(s.field);
  });
});

describe("success", () => {
  test("the integration record: has_secret only, never the secret", async () => {
    const list = await api(t, "GET", "/v1/integrations", a.bearer);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: [{ id: intA, type: "webhook", config: { url: `${rcvA.url}/a`, has_secret: true }, created_at: expect.any(String), updated_at: expect.any(String) }],
      next_cursor: null,
    });
    const one = await api(t, "GET", `/v1/integrations/${intA}`, a.session);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list.body.data[0]);
    expect(JSON.stringify([list.body, one.body])).not.toContain(SECRET_A);
  });

  test("a second POST replaces the webhook: 200, same id, new url, secret removed when omitted", async () => {
    const u = await createUser(t);
    const first = await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: "http://first.test/hook", secret: "first-secret" } });
    expect(first.status).toBe(201);
    expect(first.body.config).toEqual({ url: "http://first.test/hook", has_secret: true });
    const second = await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: "https://second.test/h?x=1" } });
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
    expect(second.body.created_at).toBe(first.body.created_at);
    expect(second.body.config).toEqual({ url: "https://second.test/h?x=1", has_secret: false });
    expect((await api(t, "GET", "/v1/integrations", u.bearer)).body.data).toHaveLength(1);
  });

  test("the secret is sealed at rest", () => {
    const row = t.app.services.sqlite.query<{ secret_ciphertext: Uint8Array }, [string]>("SELECT secret_ciphertext FROM integrations WHERE id = ?").get(intA)!;
    expect(Buffer.from(row.secret_ciphertext).includes(Buffer.from(SECRET_A))).toBe(false);
  });

  test("POST /v1/notifications → 202 pending, then delivered with the exact payload", async () => {
    const res = await api(t, "POST", "/v1/notifications", a.bearer, { message: "build finished ✓", urgency: "high", task_id: taskA, playbook_id: "pb_01jd4x0v9k8m2n3p4q5r6s7t8v" });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.stringMatching(/^ntf_[0-9a-z]{26}$/), status: "pending" });
    const got = await waitFor(() => rcvA.received.find((r) => r.headers["x-service-delivery"] === res.body.id), { what: "delivery" });
    const payload = JSON.parse(got.body);
    expect(Object.keys(payload)).toEqual(["channel", "urgency", "message", "source", "sent_at", "task_id", "playbook_id"]);
    expect(payload).toEqual({ channel: "webhook", urgency: "high", message: "build finished ✓", source: "agent", sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), task_id: taskA, playbook_id: "pb_01jd4x0v9k8m2n3p4q5r6s7t8v" });
    expect(got.hmacOk).toBe(true);
    expect(got.stripeOk).toBe(true);
    const rec = await waitFor(async () => {
      const r = await api(t, "GET", `/v1/notifications/${res.body.id}`, a.bearer);
      return r.body.status === "delivered" ? r : null;
    });
    expect(rec.body).toEqual({ id: res.body.id, status: "delivered", attempts: 1, last_error: null, payload, created_at: expect.any(String), delivered_at: expect.any(String) });
  });

  test("urgency defaults to normal; task_id and playbook_id are absent when not given", async () => {
    const res = await api(t, "POST", "/v1/notifications", a.session, { message: "plain" });
    expect(res.status).toBe(202);
    const got = await waitFor(() => rcvA.received.find((r) => r.headers["x-service-delivery"] === res.body.id));
    expect(Object.keys(JSON.parse(got.body))).toEqual(["channel", "urgency", "message", "source", "sent_at"]);
    expect(JSON.parse(got.body).urgency).toBe("normal");
  });

  test("a message of exactly 4000 characters is accepted", async () => {
    const res = await api(t, "POST", "/v1/notifications", a.bearer, { message: "y".repeat(4000), urgency: "low" });
    expect(res.status).toBe(202);
  });

  test("GET /v1/notifications lists only the caller's, newest first, filtered by status, paginated", async () => {
    const all = await api(t, "GET", "/v1/notifications", a.bearer);
    expect(all.status).toBe(200);
    const ids: string[] = all.body.data.map((n: { id: string }) => n.id);
    expect(ids).toContain(ntfA);
    expect(ids).not.toContain(ntfB);
    expect([...ids].sort().reverse()).toEqual(ids);
    const failedB = await api(t, "GET", "/v1/notifications?status=failed", b.bearer);
    expect(failedB.body.data.map((n: { id: string }) => n.id)).toEqual([ntfB]);
    expect(failedB.body.data[0]).toMatchObject({ status: "failed", attempts: 1, last_error: "HTTP 410: gone", delivered_at: null });
    expect((await api(t, "GET", "/v1/notifications?status=failed", a.bearer)).body.data).toEqual([]);
    const page1 = await api(t, "GET", "/v1/notifications?limit=1", a.bearer);
    expect(page1.body.data).toHaveLength(1);
    expect(page1.body.next_cursor).toBe(page1.body.data[0].id);
    const page2 = await api(t, "GET", `/v1/notifications?limit=1&cursor=${page1.body.next_cursor}`, a.bearer);
    expect(page2.body.data[0].id).toBe(ids[1]);
  });

  test("GET /admin/notifications?status=failed is every user's notification log", async () => {
    const res = await api(t, "GET", "/admin/notifications?status=failed", admin);
    expect(res.status).toBe(200);
    const row = res.body.data.find((n: { id: string }) => n.id === ntfB);
    expect(row).toMatchObject({ id: ntfB, user_id: b.id, status: "failed", last_error: "HTTP 410: gone", failed_at: expect.any(String) });
    expect(res.body.data.every((n: { status: string }) => n.status === "failed")).toBe(true);
    const all = await api(t, "GET", `/admin/notifications?user_id=${a.id}`, admin);
    expect(all.body.data.length).toBeGreaterThan(0);
    expect(all.body.data.every((n: { user_id: string }) => n.user_id === a.id)).toBe(true);
  });

  test("POST /v1/integrations/:id/test → 202 and a platform notification arrives", async () => {
    const res = await api(t, "POST", `/v1/integrations/${intA}/test`, a.bearer);
    expect(res.status).toBe(202);
    expect(res.body.status).toBe("pending");
    const got = await waitFor(() => rcvA.received.find((r) => r.headers["x-service-delivery"] === res.body.id));
    expect(JSON.parse(got.body)).toMatchObject({ channel: "webhook", source: "platform", urgency: "normal" });
  });

  test("DELETE fails the pending deliveries with a reason; DELETE again → 404; then notifying → 400", async () => {
    const u = await createUser(t);
    const rcv = startReceiver({ respond: () => new Response("down", { status: 503 }) });
    try {
      const i = await api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: rcv.url } });
      const n = await api(t, "POST", "/v1/notifications", u.bearer, { message: "will never arrive" });
      await waitFor(() => rcv.received.length >= 1);
      await waitFor(() => t.app.services.notifications.get(u.id, n.body.id).last_error !== null);
      expect((await api(t, "DELETE", `/v1/integrations/${i.body.id}`, u.bearer)).status).toBe(204);
      const after = await api(t, "GET", `/v1/notifications/${n.body.id}`, u.bearer);
      expect(after.body.status).toBe("failed");
      expect(after.body.last_error).toContain("was deleted");
      expect((await api(t, "DELETE", `/v1/integrations/${i.body.id}`, u.bearer)).status).toBe(404);
      expect((await api(t, "GET", "/v1/integrations", u.bearer)).body.data).toEqual([]);
      const again = await api(t, "POST", "/v1/notifications", u.bearer, { message: "x" });
      expect(again.status).toBe(400);
      expect(again.body.details.field).toBe("integration");
      expect(again.body.error).toContain("POST /v1/integrations");
      const count = rcv.received.length;
      await Bun.sleep(150);
      expect(rcv.received.length).toBe(count);
    } finally {
      rcv.stop();
    }
  });

  test("the OpenAPI document lists every route", async () => {
    const doc = await (await t.fetch("/v1/openapi.json")).json();
    for (const p of ["/v1/integrations/", "/v1/integrations/{id}", "/v1/integrations/{id}/test", "/v1/notifications/", "/v1/notifications/{id}", "/admin/notifications/"]) {
      const key = Object.keys(doc.paths).find((k) => k.replace(/\/$/, "") === p.replace(/\/$/, ""));
      expect(key, p).toBeDefined();
    }
  });

  test("no secret ever reached a log line", () => {
    const all = t.logs.join("\n");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(SECRET_A);
    expect(all).not.toContain(SECRET_B);
    expect(all).not.toContain("first-secret");
  });
});
