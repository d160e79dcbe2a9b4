/**
 * /v1/workspaces: the caller's session containers, their files and their removal. Logic lives in
 * src/workspaces/service.ts.
 */
import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { ListOf } from "../../schema/common.ts";
import { DirListing, WorkspaceRecord } from "../../schema/workspace.ts";
import { workspaceRecord } from "../../workspaces/service.ts";
import { decodeWildcard, fileResponse } from "../file-response.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, FileBytes, PageQuery, QueryInteger, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Workspaces"], summary, description, security: USER_SECURITY });

export const workspaceRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/workspaces" })
    .use(userGuard())
    .get("/", ({ user, query }) => s.workspaces.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(WorkspaceRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your workspaces, newest first"),
    })
    .get("/:id", async ({ user, params }) => workspaceRecord(await s.workspaces.get(user.id, params.id)), {
      response: { 200: WorkspaceRecord, ...errorResponses(401, 404, 429) },
      detail: detail("Get a workspace"),
    })
    .delete(
      "/:id",
      async ({ user, params, set }) => {
        await s.workspaces.remove(user.id, params.id);
        set.status = 204;
      },
      {
        response: { 204: t.Void(), ...errorResponses(401, 404, 429) },
        detail: detail(
          "Stop and remove a workspace",
          "Removes the container and its /workspace volume (the files are gone). The session keeps its transcript; its next turn gets a fresh workspace.",
        ),
      },
    )
    .get(
      "/:id/files",
      async ({ user, params, query }) => {
        const row = await s.workspaces.get(user.id, params.id);
        return s.workspaces.listDir(row.session_id, query.path ?? "", { limit: query.limit, cursor: query.cursor });
      },
      {
        query: t.Object({
          path: t.Optional(t.String({ maxLength: 4096, "x-field": "path", description: "Directory relative to /workspace (default: /workspace itself)" })),
          limit: t.Optional(QueryInteger({ minimum: 1, maximum: 1000, default: 100, "x-field": "limit", description: "Entries per page (1–1000)" })),
          cursor: t.Optional(t.String({ maxLength: 4096, "x-field": "cursor", description: "next_cursor of the previous page" })),
        }),
        response: { 200: DirListing, ...errorResponses(400, 401, 404, 429, 502) },
        detail: detail(
          "List a directory of a workspace",
          "Entries sorted by name. Starts the workspace if it was stopped for idleness (subject to the profile's concurrency limit).",
        ),
      },
    )
    .get(
      "/:id/files/*",
      async ({ user, params }) => {
        const row = await s.workspaces.get(user.id, params.id);
        return fileResponse(await s.workspaces.openDownload(row, decodeWildcard(params["*"])));
      },
      {
        response: { 200: FileBytes("The file's bytes; Content-Type from the extension"), ...errorResponses(400, 401, 404, 429, 502) },
        detail: detail(
          "Download a workspace file",
          "Path relative to /workspace. Streamed; works while the workspace is stopped. Files over 100 MiB, directories and paths leaving /workspace (.., symlinks out) answer 400.",
        ),
      },
    );
