/** /admin/audit: the audit log, newest first; ?user_id= and ?action= filter it. Logic in src/admin/audit.ts. */
import { Elysia, t } from "elysia";
import { AUDIT_ACTIONS, AuditRecord } from "../../schema/audit.ts";
import { ListOf, OneOf } from "../../schema/common.ts";
import type { Services } from "../../services.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, PageQuery, queryOf } from "../schema.ts";

export const adminAuditRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/audit" })
    .use(adminGuard(s.adminPassword))
    .get("", ({ query }) => s.audit.list(query), {
      query: queryOf({
        ...PageQuery,
        user_id: t.Optional(t.String({ maxLength: 64, "x-field": "user_id", description: "Rows of this user: acting, or acted on (sign-in failures, the operator's changes)" })),
        // An action that does not exist is refused (400 naming the allowed ones), as every enum filter is, not answered with nothing.
        action: t.Optional(OneOf(AUDIT_ACTIONS, { "x-field": "action", description: "One action" })),
      }),
      response: { 200: ListOf(AuditRecord), ...errorResponses(400, 401, 429) },
      detail: {
        tags: ["Admin"],
        summary: "The audit log, newest first",
        description:
          "Security-relevant actions: sign-ins and their failures (with the email tried, never the password), sign-up, first-run setup, API tokens created and deleted, accounts created, their password, role, disabled and policy-override changes, the admin password, PATCH /admin/config (the fields changed), secrets set and deleted (names only), webhook integrations changed and deleted, playbook trigger rotations. Each row has the actor (user, admin, system or anonymous), the user acting or acted on, the target's id, the client IP and details that never hold a secret value, password or token. Rows older than --audit-retention (default 90 days) are deleted hourly.",
        security: ADMIN_SECURITY,
      },
    });
