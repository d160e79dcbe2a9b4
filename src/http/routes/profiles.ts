/** /v1/profiles: CRUD over the caller's agent profiles. Logic in src/agents/profiles.ts, shapes in src/schema/profile.ts. */
import { Elysia, t } from "elysia";
import { ListOf } from "../../schema/common.ts";
import { ProfileCreateBody, ProfilePatchBody, ProfileRecord } from "../../schema/profile.ts";
import type { Services } from "../../services.ts";
import { requirePrincipal, USER_SECURITY, userGuard } from "../guards.ts";
import { jsonAnswer } from "../json.ts";
import { errorResponses, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Profiles"], summary, description, security: USER_SECURITY });

export const profileRoutes = (s: Services) => {
  const p = s.profiles;
  return new Elysia({ prefix: "/v1/profiles" })
    .use(userGuard())
    .post(
      "/",
      async ({ user, body, set }) => {
        const row = await p.create(user.id, body);
        set.status = 201;
        return p.toApi(row);
      },
      {
        body: ProfileCreateBody,
        // The schema and the rules a schema cannot state, with the exact field, before Elysia's own pass.
        transform({ body }) {
          p.validateCreate(body);
        },
        response: { 201: ProfileRecord, ...errorResponses(400, 401, 413, 429) },
        detail: detail("Create a profile", "Every field is optional; omitted fields get the documented defaults."),
      },
    )
    // The read routes send each record's stored JSON (src/lib/versioned-json.ts): checked against
    // ProfileRecord once per version there, so Elysia's per-request check of a Response is not needed.
    .get("/", ({ user, query, request }) => jsonAnswer(p.listJson(user.id, query), request), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(ProfileRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your profiles, newest first"),
    })
    .get("/:id", ({ user, params, request }) => jsonAnswer(p.getJson(user.id, params.id), request), {
      response: { 200: ProfileRecord, ...errorResponses(401, 404, 429) },
      detail: detail("Get a profile"),
    })
    .patch("/:id", async ({ user, params, body }) => p.toApi(await p.update(user.id, params.id, body)), {
      body: ProfilePatchBody,
      async transform({ body, request, params }) {
        await p.validatePatch(requirePrincipal(request).user.id, params.id, body);
      },
      response: { 200: ProfileRecord, ...errorResponses(400, 401, 404, 413, 429) },
      detail: detail(
        "Update a profile",
        "Top-level fields replace (env and tools as a whole); limits merge shallowly; model merges shallowly while the provider stays the same (null removes base_url, api_key_secret or pricing), and starts over when the provider changes.",
      ),
    })
    .delete(
      "/:id",
      async ({ user, params, set }) => {
        await p.delete(user.id, params.id);
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404, 429) }, detail: detail("Delete a profile (its sessions' transcripts stay readable)") },
    );
};
