/**
 * /v1/integrations: the route scenario table (credentials, someone else's webhook, bad input,
 * success), the write-only secret (never in a response or a log line, sealed at rest), the upsert
 * (201 then 200) and delete semantics, and the test notification — against webhook receivers on
 * loopback (test apps run with --allow-private-webhooks).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { sqlGet } from "../../helpers/db.ts";
import { waitFor } from "../../helpers/net.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, createUser, type TestUser } from "../../helpers/users.ts";
import { type Receiver, startReceiver } from "../../notifications/receiver.ts";

const SECRET_A = "whsec_alpha_" + "q7Zx".repeat(8);
const SECRET_TABLE = "whsec_table_" + "t9Wv".repeat(8);

let t: TestApp;
let sc: Actors;
let a: TestUser;
let rcvA: Receiver;
/** The table's receiver: every webhook the table configures points here. */
let rcvT: Receiver;
let intA = "";

beforeAll(async () => {
  t = await startTestApp();
  sc = await actors(t);
  a = await createUser(t);
  rcvA = startReceiver({ secret: SECRET_A });
  rcvT = startReceiver({ secret: SECRET_TABLE });
  const ia = await api(t, "POST", "/v1/integrations", a.bearer, { type: "webhook", config: { url: rcvA.url + "/a", secret: SECRET_A } });
  expect(ia.status).toBe(201);
  intA = ia.body.id;
});

afterAll(async () => {
  rcvA?.stop();
  rcvT?.stop();
  await t?.stop();
});

const webhookBody = () => ({ type: "webhook", config: { url: `${rcvT.url}/table`, secret: SECRET_TABLE } });

/** The webhook of `user` (created, or replaced if they have one), through the service; its id. */
async function webhook(_a: Actors, user: TestUser): Promise<string> {
  return (await t.app.services.notifications.integrations.upsert(user.id, webhookBody())).record.id;
}

const record = (id: string) => ({ id, type: "webhook", config: { url: `${rcvT.url}/table`, has_secret: true }, created_at: expect.any(String), updated_at: expect.any(String) });

// The table's owner has no webhook before its first row succeeds: the POST row (first) answers 201.
routeTable("/v1/integrations", () => sc, [
  {
    route: "POST /v1/integrations",
    body: webhookBody,
    invalid: [
      { name: "type slack", body: { type: "slack", config: { url: "http://x.test/" } }, field: "type" },
      { name: "no config", body: { type: "webhook" }, field: "config" },
      { name: "no url", body: { type: "webhook", config: {} }, field: "config.url" },
      { name: "a malformed url", body: { type: "webhook", config: { url: "http//nope" } }, field: "config.url" },
      { name: "an ftp url", body: { type: "webhook", config: { url: "ftp://x.test/" } }, field: "config.url" },
      { name: "credentials in the url", body: { type: "webhook", config: { url: "https://u:p@x.test/" } }, field: "config.url" },
      { name: "port 0 in the url", body: { type: "webhook", config: { url: "http://1.1.1.1:0/" } }, field: "config.url" },
      { name: "port 0 spelled 00000", body: { type: "webhook", config: { url: "https://1.1.1.1:00000/hook" } }, field: "config.url" },
      { name: "an empty secret", body: { type: "webhook", config: { url: "http://x.test/", secret: "" } }, field: "config.secret" },
      { name: "a secret of 513 characters", body: { type: "webhook", config: { url: "http://x.test/", secret: "s".repeat(513) } }, field: "config.secret" },
      { name: "an unknown config field", body: { type: "webhook", config: { url: "http://x.test/", sekret: "x" } }, field: "config.sekret" },
    ],
    success: 201,
    check: (r) => {
      expect(r.body).toEqual(record(r.body.id));
      expect(r.body.id).toMatch(/^int_[0-9a-z]{26}$/);
      expect(JSON.stringify(r.body)).not.toContain(SECRET_TABLE);
    },
  },
  {
    route: "GET /v1/integrations",
    query: "limit=10",
    invalid: [{ name: "limit=0", query: "limit=0", field: "limit" }],
    success: 200,
    check: async (r) => {
      // The owner's webhook from the POST row, and no one else's.
      expect(r.body).toEqual({ data: [record((await t.app.services.notifications.integrations.idForUser(sc.owner.id))!)], next_cursor: null });
    },
  },
  { route: "GET /v1/integrations/:id", record: webhook, success: 200, check: (r, _a, id) => expect(r.body).toEqual(record(id!)) },
  {
    route: "DELETE /v1/integrations/:id",
    record: webhook,
    invalid: [{ name: "a body (the route takes none)", body: { zzz: 1 }, field: "zzz" }],
    success: 204,
    check: async (r, _a, id) => {
      expect(r.body).toBeNull();
      expect((await api(t, "GET", `/v1/integrations/${id}`, sc.headers("owner"))).status).toBe(404);
    },
  },
  {
    route: "POST /v1/integrations/:id/test",
    record: webhook,
    invalid: [{ name: "a message (the route takes no body: the test message is fixed)", body: { message: "custom" }, field: "message" }],
    success: 202,
    check: async (r) => {
      expect(r.body).toEqual({ id: expect.stringMatching(/^ntf_[0-9a-z]{26}$/), status: "pending" });
      const got = await waitFor(() => rcvT.received.find((x) => x.headers["x-service-delivery"] === r.body.id), { what: "the test notification" });
      expect(got.path).toBe("/table");
      expect(got.hmacOk).toBe(true);
      expect(JSON.parse(got.body)).toMatchObject({ channel: "webhook", source: "platform", urgency: "normal" });
    },
  },
]);

describe("behaviour", () => {
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

  test("the secret is sealed at rest", async () => {
    const row = (await sqlGet<{ secret_ciphertext: Uint8Array }>(t, "SELECT secret_ciphertext FROM integrations WHERE id = ?", [intA]))!;
    expect(Buffer.from(row.secret_ciphertext).includes(Buffer.from(SECRET_A))).toBe(false);
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
      await waitFor(async () => (await t.app.services.notifications.get(u.id, n.body.id)).last_error !== null);
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
    for (const p of ["/v1/integrations/", "/v1/integrations/{id}", "/v1/integrations/{id}/test"]) {
      const key = Object.keys(doc.paths).find((k) => k.replace(/\/$/, "") === p.replace(/\/$/, ""));
      expect(key, p).toBeDefined();
    }
  });

  test("no secret ever reached a log line", () => {
    const all = t.logs.join("\n");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(SECRET_A);
    expect(all).not.toContain(SECRET_TABLE);
    expect(all).not.toContain("first-secret");
  });
});
