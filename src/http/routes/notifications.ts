import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";
import { ListOf, OneOf } from "../../schema/common.ts";
import { NotificationBody, NotificationRecord, Queued } from "../../schema/notification.ts";
import { NOTIFICATION_STATUSES } from "../../db/schema.ts";

// Not t.UnionEnum: Elysia fills a missing optional UnionEnum query field with its first value.
export const StatusQuery = t.Optional(OneOf(NOTIFICATION_STATUSES, { "x-field": "status", description: "pending | delivered | failed" }));
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
        ...jsonBody(NotificationBody),
        response: { 202: Queued, ...errorResponses(400, 401, 429) },
        detail: detail(
          "Send a notification to your webhook (source agent)",
          "Queued in the delivery outbox and sent asynchronously. Without a configured webhook integration the answer is 400 VALIDATION_FAILED with details.field \"integration\".",
        ),
      },
    )
    .get("/", ({ user, query }) => s.notifications.list(user.id, query), {
      query: queryOf({ ...PageQuery, status: StatusQuery }),
      response: { 200: ListOf(NotificationRecord), ...errorResponses(400, 401, 429) },
      detail: detail("Your notifications and their delivery state, newest first (?status=pending|delivered|failed)"),
    })
    .get("/:id", ({ user, params }) => s.notifications.get(user.id, params.id), {
      response: { 200: NotificationRecord, ...errorResponses(401, 404, 429) },
      detail: detail("One notification and its delivery state"),
    });
