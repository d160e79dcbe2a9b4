import { Elysia, t } from "elysia";
import { MESSAGE_MAX, URGENCIES } from "../../notifications/payload.ts";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, ListOf, PageQuery, Timestamp } from "../schema.ts";

export const Payload = t.Object({
  channel: t.Literal("webhook"),
  urgency: t.UnionEnum(URGENCIES),
  message: t.String(),
  source: t.UnionEnum(["agent", "platform"]),
  sent_at: Timestamp,
  task_id: t.Optional(t.String()),
  playbook_id: t.Optional(t.String()),
});
export const NotificationRecord = t.Object({
  id: t.String({ examples: ["ntf_01jd4x0v9k8m2n3p4q5r6s7t8v"] }),
  status: t.UnionEnum(["pending", "delivered", "failed"]),
  attempts: t.Integer({ description: "HTTP attempts made so far" }),
  last_error: t.Union([t.String(), t.Null()], { description: "Why the last attempt failed (null once delivered)" }),
  payload: Payload,
  created_at: Timestamp,
  delivered_at: t.Union([Timestamp, t.Null()]),
});
// Not t.UnionEnum: Elysia fills a missing optional UnionEnum query field with its first value.
export const StatusQuery = t.Optional(
  t.Union([t.Literal("pending"), t.Literal("delivered"), t.Literal("failed")], { "x-field": "status", description: "pending | delivered | failed" }),
);
const detail = (summary: string, description?: string) => ({ tags: ["Notifications"], summary, description, security: USER_SECURITY });

export const notificationRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/notifications" })
    .use(userGuard())
    .post(
      "/",
      ({ user, body, set }) => {
        set.status = 202;
        return s.notifications.submit(user.id, body);
      },
      {
        ...jsonBody(
          t.Object({
            message: t.String({ description: `1–${MESSAGE_MAX} characters` }),
            urgency: t.Optional(t.String({ description: "low | normal (default) | high" })),
            task_id: t.Optional(t.String({ description: "One of your tasks" })),
            playbook_id: t.Optional(t.String({ description: "A playbook id (pb_…)" })),
          }),
        ),
        response: { 202: t.Object({ id: t.String(), status: t.Literal("pending") }), ...errorResponses(400, 401, 429) },
        detail: detail(
          "Send a notification to your webhook (source agent)",
          "Queued in the delivery outbox and sent asynchronously. Without a configured webhook integration the answer is 400 VALIDATION_FAILED with details.field \"integration\".",
        ),
      },
    )
    .get("/", ({ user, query }) => s.notifications.list(user.id, query), {
      query: t.Object({ ...PageQuery, status: StatusQuery }),
      response: { 200: ListOf(NotificationRecord), ...errorResponses(400, 401, 429) },
      detail: detail("Your notifications and their delivery state, newest first (?status=pending|delivered|failed)"),
    })
    .get("/:id", ({ user, params }) => s.notifications.get(user.id, params.id), {
      response: { 200: NotificationRecord, ...errorResponses(401, 404, 429) },
      detail: detail("One notification and its delivery state"),
    });
