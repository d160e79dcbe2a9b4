/**
 * /admin/users: list every account, create one (any role), change role or disable. Bearer =
 * the admin password (src/http/guards.ts); user tokens and cookies never open it.
 */
import { Elysia } from "elysia";
import { adminUser } from "../../auth/users.ts";
import { Errors } from "../../lib/errors.ts";
import { ListOf } from "../../schema/common.ts";
import { AdminUser, AdminUserCreateBody, AdminUserPatchBody } from "../../schema/user.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Admin"], summary, description, security: ADMIN_SECURITY });

export const adminUserRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/users" })
    .use(adminGuard(s.adminPassword))
    .get("", ({ query }) => s.users.list(query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(AdminUser), ...errorResponses(400, 401, 429) },
      detail: detail("List every account, newest first"),
    })
    .post(
      "",
      async ({ body, request, set }) => {
        const user = await s.users.create(
          { email: body.email, password: body.password, name: body.name, role: body.role ?? "user", emailVerified: true },
          { actor: "admin", ip: requestContext(request).ip },
        );
        s.log.info("admin created a user", { user_id: user.id, role: user.role });
        set.status = 201;
        return adminUser(user);
      },
      {
        ...jsonBody(AdminUserCreateBody),
        response: { 201: AdminUser, ...errorResponses(400, 401, 429) },
        detail: detail("Create an account", "role defaults to user. A duplicate email is 400 on details.field = email."),
      },
    )
    .patch(
      "/:id",
      async ({ params, body, request }) => {
        if (body.role === undefined && body.disabled === undefined && body.policy === undefined) throw Errors.validation("body", "Send role, disabled and/or policy");
        const user = await s.users.adminPatch(params.id, body, { actor: "admin", ip: requestContext(request).ip });
        s.log.info("admin changed a user", { user_id: user.id, role: body.role, disabled: body.disabled, policy: body.policy });
        return adminUser(user);
      },
      {
        ...jsonBody(AdminUserPatchBody),
        response: { 200: AdminUser, ...errorResponses(400, 401, 404, 429) },
        detail: detail(
          "Change an account's role, disable it, or override the policy for it",
          "Disabling takes effect at once everywhere, before the answer: cookie sessions are deleted, API tokens are refused from the next request, open WebSockets are closed, queued tasks fail (FORBIDDEN), running and waiting tasks are cancelled, workspaces are stopped (their files kept) and schedules are held (trigger URLs answer 404). Enabling again restores the tokens and resumes the schedules from now; the user signs in again. `policy` merges overrides of the operator's policy (a field set to null returns to the server's setting; null clears all).",
        ),
      },
    );
