/**
 * /admin/notifications: the route scenario table (anonymous and a user's token → 401, bad input,
 * the admin password → success) and its filters: ?status=failed is every user's notification log,
 * ?user_id= one user's notifications. Rows are written directly (delivery is tested in
 * test/notifications/).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { newId } from "../../../src/db/ids.ts";
import type { NotificationStatus } from "../../../src/db/schema.ts";
import { notificationLog } from "../../../src/db/tables.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";

let t: TestApp;
let a: Actors;
let ownerFailed: string;
let otherDelivered: string;
let otherFailed: string;

/** A finished notification row of `userId`'s (not pending, so the delivery worker leaves it alone). */
async function insertNotification(userId: string, status: Exclude<NotificationStatus, "pending">, message: string): Promise<string> {
  const id = newId("notification");
  const now = Date.now();
  const payload = JSON.stringify({ channel: "webhook", urgency: "normal", message, source: "agent", sent_at: new Date(now).toISOString() });
  await t.app.services.db
    .insert(notificationLog)
    .values({
      id,
      user_id: userId,
      source: "agent",
      urgency: "normal",
      payload,
      status,
      attempts: 1,
      max_attempts: 5,
      last_error: status === "failed" ? "HTTP 410: gone" : null,
      created_at: now,
      delivered_at: status === "delivered" ? now : null,
      failed_at: status === "failed" ? now : null,
    });
  return id;
}

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  ownerFailed = await insertNotification(a.owner.id, "failed", "from the owner");
  otherDelivered = await insertNotification(a.other.id, "delivered", "from the other");
  otherFailed = await insertNotification(a.other.id, "failed", "from the other, failed");
});
afterAll(() => t.stop());

routeTable("/admin/notifications", () => a, [
  {
    route: "GET /admin/notifications",
    query: "status=failed",
    invalid: [
      { name: "an unknown status", query: "status=nope", field: "status" },
      { name: "limit=0", query: "status=failed&limit=0", field: "limit" },
      { name: "a user_id over 64 characters", query: `user_id=usr_${"0".repeat(62)}`, field: "user_id" },
    ],
    success: 200,
    check: (r) => {
      expect(r.body.data.map((n: { id: string }) => n.id)).toEqual([otherFailed, ownerFailed]);
      expect(r.body.data[1]).toEqual({
        id: ownerFailed,
        user_id: a.owner.id,
        status: "failed",
        attempts: 1,
        last_error: "HTTP 410: gone",
        payload: expect.objectContaining({ message: "from the owner", source: "agent" }),
        created_at: expect.any(String),
        delivered_at: null,
        failed_at: expect.any(String),
      });
      expect(r.body.next_cursor).toBeNull();
    },
  },
]);

test("?user_id= is one user's notifications, every status; both filters together", async () => {
  const others = await api(t, "GET", `/admin/notifications?user_id=${a.other.id}`, a.headers("admin"));
  expect(others.status).toBe(200);
  expect(others.body.data.map((n: { id: string }) => n.id)).toEqual([otherFailed, otherDelivered]);
  expect(others.body.data[1]).toMatchObject({ status: "delivered", delivered_at: expect.any(String), failed_at: null });
  const both = await api(t, "GET", `/admin/notifications?user_id=${a.other.id}&status=delivered`, a.headers("admin"));
  expect(both.body.data.map((n: { id: string }) => n.id)).toEqual([otherDelivered]);
  const none = await api(t, "GET", `/admin/notifications?user_id=${a.owner.id}&status=delivered`, a.headers("admin"));
  expect(none.body.data).toEqual([]);
});

test("pages of one, newest first", async () => {
  const page = await api(t, "GET", "/admin/notifications?limit=1", a.headers("admin"));
  expect(page.body.data.map((n: { id: string }) => n.id)).toEqual([otherFailed]);
  const next = await api(t, "GET", `/admin/notifications?limit=1&cursor=${page.body.next_cursor}`, a.headers("admin"));
  expect(next.body.data.map((n: { id: string }) => n.id)).toEqual([otherDelivered]);
});
