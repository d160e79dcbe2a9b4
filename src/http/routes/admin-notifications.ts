import { Elysia, t } from "elysia";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import type { Services } from "../../services.ts";
import { errorResponses, ListOf, PageQuery, Timestamp } from "../schema.ts";
import { NotificationRecord, StatusQuery } from "./notifications.ts";

const AdminNotification = t.Composite([NotificationRecord, t.Object({ user_id: t.String(), failed_at: t.Union([Timestamp, t.Null()]) })]);

export const adminNotificationRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/notifications" })
    .use(adminGuard(s.adminPassword))
    .get("/", ({ query }) => s.notifications.listAll(query), {
      query: t.Object({ ...PageQuery, status: StatusQuery, user_id: t.Optional(t.String({ maxLength: 64, "x-field": "user_id" })) }),
      response: { 200: ListOf(AdminNotification), ...errorResponses(400, 401, 429) },
      detail: {
        tags: ["Admin"],
        summary: "Every user's notifications, newest first; ?status=failed is the notification log of permanent failures",
        security: ADMIN_SECURITY,
      },
    });
