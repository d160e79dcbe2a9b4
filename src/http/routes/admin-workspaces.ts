/** /admin/workspaces: every user's workspaces, and removing one. */
import { Elysia, t } from "elysia";
import { WORKSPACE_STATUSES } from "../../db/schema.ts";
import { ListOf, OneOf } from "../../schema/common.ts";
import { AdminWorkspaceRecord } from "../../schema/workspace.ts";
import type { Services } from "../../services.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string) => ({ tags: ["Admin"], summary, security: ADMIN_SECURITY });

export const adminWorkspaceRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/workspaces" })
    .use(adminGuard(s.adminPassword))
    .get("/", ({ query }) => s.workspaces.listAll(query, { status: query.status, userId: query.user_id }), {
      query: queryOf({
        ...PageQuery,
        status: t.Optional(OneOf(WORKSPACE_STATUSES, { "x-field": "status" })),
        user_id: t.Optional(t.String({ maxLength: 64, "x-field": "user_id" })),
      }),
      response: { 200: ListOf(AdminWorkspaceRecord), ...errorResponses(400, 401, 429) },
      detail: detail("Every user's workspaces, newest first (?status=, ?user_id= filter)"),
    })
    .delete(
      "/:id",
      async ({ params, set }) => {
        await s.workspaces.removeById(params.id);
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404, 429) }, detail: detail("Stop and remove any workspace (container and volume)") },
    );
