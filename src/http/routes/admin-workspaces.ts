/** /admin/workspaces: every user's workspaces, and removing one. */
import { Elysia, t } from "elysia";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { iso } from "../../lib/time.ts";
import type { Services } from "../../services.ts";
import type { WorkspaceRow } from "../../workspaces/store.ts";
import { errorResponses, ListOf, PageQuery, Timestamp } from "../schema.ts";
import { toWorkspaceRecord, WorkspaceRecord } from "./workspaces.ts";

const AdminWorkspace = t.Composite([
  WorkspaceRecord,
  t.Object({ user_id: t.String(), docker_id: t.Union([t.String(), t.Null()]), volume: t.String(), updated_at: Timestamp }),
]);

const toAdmin = (r: WorkspaceRow) => ({ ...toWorkspaceRecord(r), user_id: r.user_id, docker_id: r.docker_id, volume: r.volume, updated_at: iso(r.updated_at) });
const detail = (summary: string) => ({ tags: ["Admin"], summary, security: ADMIN_SECURITY });

export const adminWorkspaceRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/workspaces" })
    .use(adminGuard(s.adminPassword))
    .get("/", ({ query }) => s.workspaces.listAll(query, toAdmin, { status: query.status, userId: query.user_id }), {
      query: t.Object({
        ...PageQuery,
        status: t.Optional(t.UnionEnum(["starting", "running", "stopped", "failed"], { default: undefined, "x-field": "status" })),
        user_id: t.Optional(t.String({ maxLength: 64, "x-field": "user_id" })),
      }),
      response: { 200: ListOf(AdminWorkspace), ...errorResponses(400, 401, 429) },
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
