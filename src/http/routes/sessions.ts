/** /v1/sessions: conversations, their persisted transcript, and deletion (with the workspace). */
import { Errors } from "../../lib/errors.ts";
import { Elysia, t } from "elysia";
import { isAdmin } from "../../auth/principal.ts";
import { ListOf } from "../../schema/common.ts";
import { GitPushBody, GitPushResult, SessionCreateBody, SessionRecord } from "../../schema/session.ts";
import { TranscriptFrame } from "../../schema/stream.ts";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { jsonResponse } from "../json.ts";
import { errorResponses, jsonBody, PageQuery, QueryInteger, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Sessions"], summary, description, security: USER_SECURITY });

export const sessionRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/sessions" })
    .use(userGuard())
    .post(
      "/",
      async ({ user, body, set }) => {
        const { session } = await s.sessionLifecycle.start(user.id, body.profile_id);
        set.status = 201;
        return s.agentSessions.record((await s.agentSessions.byId(session.id))!);
      },
      {
        ...jsonBody(SessionCreateBody),
        response: { 201: SessionRecord, ...errorResponses(400, 401, 404, 429, 502) },
        detail: detail("Start a session (its workspace container) without a task; like session.start"),
      },
    )
    .get("/", ({ user, query }) => s.agentSessions.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(SessionRecord), ...errorResponses(400, 401) },
      detail: detail("List your sessions, newest first"),
    })
    .get("/:id", async ({ user, params }) => s.agentSessions.record(await s.agentSessions.get(user.id, params.id)), {
      response: { 200: SessionRecord, ...errorResponses(401, 404) },
      detail: detail("A session"),
    })
    .get(
      "/:id/events",
      async ({ user, params, query, principal, request }) => {
        // Both name the position to read on from: which one was meant is unknown.
        if (query.after !== undefined && query.cursor !== undefined) throw Errors.validation("cursor", "Give after or cursor, not both (they name the same position)", { reason: "conflict", in: "query" });
        return jsonResponse(await s.agentSessions.eventsJson(user.id, params.id, isAdmin(principal), query.after ?? query.cursor ?? 0, query.limit ?? 100), 200, request);
      },
      {
        query: queryOf({
          after: t.Optional(QueryInteger({ minimum: 0, "x-field": "after", description: "Only frames with a greater seq" })),
          cursor: t.Optional(QueryInteger({ minimum: 0, "x-field": "cursor", description: "next_cursor of the previous page (same as after)" })),
          limit: t.Optional(QueryInteger({ minimum: 1, maximum: 1000, "x-field": "limit", description: "Page size (1–1000, default 100)" })),
        }),
        response: { 200: ListOf(TranscriptFrame), ...errorResponses(400, 401, 404) },
        detail: detail(
          "The persisted transcript: the frames the stream sent, each with its seq, oldest first",
          "The frames are the stream's server events (see /v1/asyncapi.json), stored exactly as they were sent.",
        ),
      },
    )
    .post("/:id/git/push", ({ user, params, body }) => s.runSetup.push(user.id, params.id, body), {
      ...jsonBody(GitPushBody),
      response: { 200: GitPushResult, ...errorResponses(400, 401, 404, 502) },
      detail: detail(
        "Push a branch of one of the session's repositories to its remote",
        "runcell copies the repository's objects and refs out of the workspace and pushes them with the repository's credential_secret; the credential never enters the workspace.",
      ),
    })
    .delete(
      "/:id",
      async ({ user, params, set }) => {
        await s.sessionLifecycle.delete(user.id, params.id);
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404) }, detail: detail("Delete a session, its transcript and its workspace (container and volume)") },
    );
