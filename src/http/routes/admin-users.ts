/**
 * /admin/users: list every account, create one (any role), change role or disable. Bearer =
 * the admin password (src/http/guards.ts); user tokens and cookies never open it.
 */
import { Elysia, t } from "elysia";
import { adminUser } from "../../auth/users.ts";
import { Errors } from "../../lib/errors.ts";
import { ListOf } from "../../schema/common.ts";
import { AdminUser, AdminUserCreateBody, AdminUserPatchBody } from "../../schema/user.ts";
import type { Services } from "../../services.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Admin"], summary, description, security: ADMIN_SECURITY });

export const adminUserRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/users" })
    .use(adminGuard(s.adminPassword))
    .get("", ({ query }) => s.users.list(query), {
      query: t.Object(PageQuery),
      response: { 200: ListOf(AdminUser), ...errorResponses(400, 401, 429) },
      detail: detail("List every account, newest first"),
    })
    .post(
      "",
      async ({ body, set }) => {
        const user = await s.users.create({ email: body.email, password: body.password, name: body.name, role: body.role ?? "user", emailVerified: true });
        s.log.info("admin created a user", { user_id: user.id, role: user.role });
        set.status = 201;
        return adminUser(user);
      },
      {
        ...jsonBody(AdminUserCreateBody),
        response: { 201: AdminUser, ...errorResponses(400, 401, 415, 429) },
        detail: detail("Create an account", "role defaults to user. A duplicate email is 400 on details.field = email."),
      },
    )
    .patch(
      "/:id",
      ({ params, body }) => {
        if (body.role === undefined && body.disabled === undefined) throw Errors.validation("body", "Send role and/or disabled");
        const user = s.users.adminPatch(params.id, body);
        s.log.info("admin changed a user", { user_id: user.id, ...body });
        return adminUser(user);
      },
      {
        ...jsonBody(AdminUserPatchBody),
        response: { 200: AdminUser, ...errorResponses(400, 401, 404, 415, 429) },
        detail: detail(
          "Change an account's role or disable it",
          "Disabling takes effect at once everywhere: cookie sessions are deleted, API tokens are refused from the next request, open WebSockets are closed. Enabling again restores the tokens; the user signs in again.",
        ),
      },
    );
