/**
 * GET /files/<ctr_id>/<path>?exp=<unix>&sig=<hex>: a workspace file through a signed URL
 * (Workspaces.signedFileUrl), with no credential until it expires. A wrong or expired signature,
 * or a workspace that no longer exists, answers 404 like any unknown path.
 */
import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { Errors } from "../../lib/errors.ts";
import { decodeWildcard, fileResponse } from "../file-response.ts";
import { errorResponses, FileBytes } from "../schema.ts";

export const signedFileRoutes = (s: Services) =>
  new Elysia({ prefix: "/files" }).get(
    "/:ctr/*",
    async ({ params, query }) => {
      let path: string;
      try {
        path = decodeWildcard(params["*"]);
      } catch {
        throw Errors.notFound("File");
      }
      const row = s.workspaces.verifyFileUrl(params.ctr, path, query.exp, query.sig) ? await s.workspaces.byId(params.ctr) : null;
      if (!row) throw Errors.notFound("File");
      return fileResponse(await s.workspaces.openDownload(row, path));
    },
    {
      query: t.Object({ exp: t.Optional(t.String({ maxLength: 20 })), sig: t.Optional(t.String({ maxLength: 128 })) }),
      response: { 200: FileBytes("The file's bytes; Content-Type from the extension"), ...errorResponses(400, 404, 429, 502) },
      detail: {
        tags: ["Workspaces"],
        summary: "Download a workspace file through a signed URL (no credential)",
        description: "URLs come from turn.done result_text (image references) and expire after 1 hour by default.",
        security: [],
      },
    },
  );
