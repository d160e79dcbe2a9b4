/** /admin/notifications: every user's notifications; ?status=failed is the notification log of permanent failures. */
import { Elysia, t } from "elysia";
import { ListOf } from "../../schema/common.ts";
import { AdminNotificationRecord } from "../../schema/notification.ts";
import type { Services } from "../../services.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, PageQuery, queryOf } from "../schema.ts";
import { StatusQuery } from "./notifications.ts";

export const adminNotificationRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/notifications" })
    .use(adminGuard(s.adminPassword))
    .get("/", ({ query }) => s.notifications.listAll(query), {
      query: queryOf({ ...PageQuery, status: StatusQuery, user_id: t.Optional(t.String({ maxLength: 64, "x-field": "user_id" })) }),
      response: { 200: ListOf(AdminNotificationRecord), ...errorResponses(400, 401, 429) },
      detail: {
        tags: ["Admin"],
        summary: "Every user's notifications, newest first; ?status=failed is the notification log of permanent failures",
        security: ADMIN_SECURITY,
      },
    });
