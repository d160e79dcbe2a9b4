/**
 * /v1/notifications: the route scenario table (credentials, someone else's notification, bad
 * input, success), delivery of the exact payload to a webhook receiver on loopback (test apps run
 * with --allow-private-webhooks), listing, filtering and paging. GET /admin/notifications is in
 * admin-notifications.test.ts, the webhook itself in integrations.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../../src/db/ids.ts";
import { sessions, tasks } from "../../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { waitFor } from "../../helpers/net.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";
import { type Receiver, startReceiver } from "../../notifications/receiver.ts";

const SECRET_A = "whsec_alpha_" + "q7Zx".repeat(8);
const SECRET_B = "whsec_bravo_" + "m3Kp".repeat(8);
const SECRET_TABLE = "whsec_table_" + "t9Wv".repeat(8);

let t: TestApp;
let sc: Actors;
let a: TestUser;
let b: TestUser;
let c: TestUser; // never configures a webhook
let rcvA: Receiver;
let rcvB: Receiver;
/** The table's receiver: both table users' webhooks point here. */
let rcvT: Receiver;
let ntfA = "";
let ntfB = "";
let taskA = "";
/** A task of the table's other user (inserted in beforeAll): naming it is a bad task_id for the owner. */
const OTHERS_TASK = newId("task");

let playbookA = "";
/** A playbook of the table's other user: naming it is a bad playbook_id for the owner. */
let othersPlaybook = "";

async function playbookOf(u: { bearer: Record<string, string> }): Promise<string> {
  const profile = await api(t, "POST", "/v1/profiles", u.bearer, { name: "notifier", model: { provider: "demo", name: "demo" } });
  const pb = await api(t, "POST", "/v1/playbooks", u.bearer, { name: "notifying", profile_id: profile.body.id, prompt: "p" });
  expect(pb.status).toBe(201);
  return pb.body.id;
}

async function insertTask(userId: string, task = newId("task")): Promise<string> {
  const { db } = t.app.services;
  const sess = newId("session");
  const now = Date.now();
  await db.insert(sessions).values({ id: sess, user_id: userId, profile_id: "prof_x", created_at: now, updated_at: now });
  await db.insert(tasks).values({ id: task, user_id: userId, session_id: sess, profile_id: "prof_x", prompt: "p", status: "completed", max_turns: 10, max_budget_usd: 1, created_at: now });
  return task;
}

beforeAll(async () => {
  t = await startTestApp();
  sc = await actors(t);
  [a, b, c] = await Promise.all([createUser(t), createUser(t), createUser(t)]);
  rcvA = startReceiver({ secret: SECRET_A });
  rcvB = startReceiver({ secret: SECRET_B, respond: () => new Response("gone", { status: 410 }) });
  rcvT = startReceiver({ secret: SECRET_TABLE });
  const ia = await api(t, "POST", "/v1/integrations", a.bearer, { type: "webhook", config: { url: rcvA.url + "/a", secret: SECRET_A } });
  const ib = await api(t, "POST", "/v1/integrations", b.session, { type: "webhook", config: { url: rcvB.url + "/b", secret: SECRET_B } });
  const table = await Promise.all([sc.owner, sc.other].map((u) => api(t, "POST", "/v1/integrations", u.bearer, { type: "webhook", config: { url: rcvT.url + "/table", secret: SECRET_TABLE } })));
  expect([ia.status, ib.status, ...table.map((r) => r.status)]).toEqual([201, 201, 201, 201]);
  taskA = await insertTask(a.id);
  await insertTask(sc.other.id, OTHERS_TASK);
  [playbookA, othersPlaybook] = (await Promise.all([a, sc.other].map((u) => playbookOf(u)))) as [string, string];
  ntfA = (await api(t, "POST", "/v1/notifications", a.bearer, { message: "from a", task_id: taskA })).body.id;
  ntfB = (await api(t, "POST", "/v1/notifications", b.bearer, { message: "from b" })).body.id;
  await waitFor(async () => (await t.app.services.notifications.get(b.id, ntfB)).status === "failed", { what: "b's notification to fail (410)" });
});

afterAll(async () => {
  rcvA?.stop();
  rcvB?.stop();
  rcvT?.stop();
  await t?.stop();
});

/** A notification of `user` (through the service, to the table's receiver); its id. */
const notification = async (_a: Actors, user: TestUser) => (await t.app.services.notifications.submit(user.id, { message: "a record" })).id;

routeTable("/v1/notifications", () => sc, [
  {
    route: "POST /v1/notifications",
    body: () => ({ message: "from the table", urgency: "low" }),
    invalid: [
      { name: "no message", body: {}, field: "message" },
      { name: "a blank message", body: { message: "  \n " }, field: "message" },
      { name: "a message over 4000 characters", body: { message: "x".repeat(4001) }, field: "message" },
      { name: "an unknown urgency", body: { message: "x", urgency: "urgent" }, field: "urgency" },
      { name: "a malformed task_id", body: { message: "x", task_id: "123" }, field: "task_id" },
      { name: "someone else's task", body: { message: "x", task_id: OTHERS_TASK }, field: "task_id" },
      { name: "a malformed playbook_id", body: { message: "x", playbook_id: "task_1" }, field: "playbook_id" },
      { name: "someone else's playbook", body: () => ({ message: "x", playbook_id: othersPlaybook }), field: "playbook_id" },
      { name: "a playbook that does not exist", body: { message: "x", playbook_id: "pb_01jd4x0v9k8m2n3p4q5r6s7t8v" }, field: "playbook_id" },
      { name: "an unknown field", body: { message: "x", channel: "sms" }, field: "channel" },
    ],
    success: 202,
    check: async (r) => {
      expect(r.body).toEqual({ id: expect.stringMatching(/^ntf_[0-9a-z]{26}$/), status: "pending" });
      const got = await waitFor(() => rcvT.received.find((x) => x.headers["x-service-delivery"] === r.body.id), { what: "the delivery" });
      expect(got.hmacOk).toBe(true);
      expect(JSON.parse(got.body)).toMatchObject({ channel: "webhook", source: "agent", urgency: "low", message: "from the table" });
    },
  },
  {
    route: "GET /v1/notifications",
    query: "limit=100",
    invalid: [
      { name: "an unknown status", query: "status=lost", field: "status" },
      { name: "limit=0", query: "limit=0", field: "limit" },
    ],
    success: 200,
    check: async (r) => {
      const ids: string[] = r.body.data.map((n: { id: string }) => n.id);
      // The owner's notifications (the POST row's), none of anyone else's.
      expect(ids.length).toBeGreaterThan(0);
      expect(ids).toEqual((await t.app.services.notifications.list(sc.owner.id, { limit: 100 })).data.map((n) => n.id));
      expect(ids).not.toContain(ntfA);
      expect(ids).not.toContain(ntfB);
      expect(r.body.next_cursor).toBeNull();
    },
  },
  {
    route: "GET /v1/notifications/:id",
    record: notification,
    success: 200,
    check: (r, _a, id) => {
      expect(r.body).toMatchObject({ id, attempts: expect.any(Number), payload: { channel: "webhook", source: "agent", urgency: "normal", message: "a record" } });
      expect(["pending", "delivered"]).toContain(r.body.status);
    },
  },
]);

describe("refusals", () => {
  test("POST /v1/notifications without a webhook → 400 on integration", async () => {
    const r = await api(t, "POST", "/v1/notifications", c.bearer, { message: "x" });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("VALIDATION_FAILED");
    expect(r.body.details.field).toBe("integration");
  });
});

describe("behaviour", () => {
  test("POST /v1/notifications → 202 pending, then delivered with the exact payload", async () => {
    const res = await api(t, "POST", "/v1/notifications", a.bearer, { message: "build finished ✓", urgency: "high", task_id: taskA, playbook_id: playbookA });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.stringMatching(/^ntf_[0-9a-z]{26}$/), status: "pending" });
    const got = await waitFor(() => rcvA.received.find((r) => r.headers["x-service-delivery"] === res.body.id), { what: "delivery" });
    const payload = JSON.parse(got.body);
    expect(Object.keys(payload)).toEqual(["channel", "urgency", "message", "source", "sent_at", "task_id", "playbook_id"]);
    expect(payload).toEqual({ channel: "webhook", urgency: "high", message: "build finished ✓", source: "agent", sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), task_id: taskA, playbook_id: playbookA });
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

  test.each([
    ["/v1/notifications?status=bogus&status=failed", "status"],
    ["/v1/notifications?status=failed&status=delivered", "status"],
    ["/v1/tasks?status=bogus&status=failed", "status"],
    ["/v1/tasks?session_id=a&limit=2&session_id=b", "session_id"],
    ["/v1/usage?from=2026-11-01&from=2026-11-02", "from"],
    ["/v1/usage?group_by=day&group_by=profile", "group_by"],
  ])("a list filter given twice is refused, not the last one taken: %s", async (path, field) => {
    const res = await api(t, "GET", path, a.bearer);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field, reason: "repeated", in: "query" } });
  });

  test("a parameter the route does not read may come twice (ignored, like any unknown one)", async () => {
    expect((await api(t, "GET", "/v1/notifications?_=1&_=2", a.bearer)).status).toBe(200);
    // The profile list reads no status filter: two are ignored, as one is.
    expect((await api(t, "GET", "/v1/profiles?status=a&status=b", a.bearer)).status).toBe(200);
  });

  test("the OpenAPI document lists every route", async () => {
    const doc = await (await t.fetch("/v1/openapi.json")).json();
    for (const p of ["/v1/notifications/", "/v1/notifications/{id}"]) {
      const key = Object.keys(doc.paths).find((k) => k.replace(/\/$/, "") === p.replace(/\/$/, ""));
      expect(key, p).toBeDefined();
    }
  });

  test("no secret ever reached a log line", () => {
    const all = t.logs.join("\n");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(SECRET_A);
    expect(all).not.toContain(SECRET_B);
    expect(all).not.toContain(SECRET_TABLE);
  });
});
