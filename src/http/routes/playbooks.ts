/**
 * /v1/playbooks: CRUD, runs on demand (202, a new run every call), the run list, and rotating the
 * trigger URL. Logic in src/playbooks/, shapes in src/schema/playbook.ts.
 */
import { Elysia, t } from "elysia";
import { ListOf } from "../../schema/common.ts";
import { PlaybookCreateBody, PlaybookPatchBody, PlaybookRecord, PlaybookRun, RunAccepted, RunBody } from "../../schema/playbook.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Playbooks"], summary, description, security: USER_SECURITY });

export const playbookRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/playbooks" })
    .use(userGuard())
    .post(
      "/",
      ({ user, body, set }) => {
        set.status = 201;
        return s.playbooks.create(user.id, body);
      },
      {
        ...jsonBody(PlaybookCreateBody),
        response: { 201: PlaybookRecord, ...errorResponses(400, 401, 404, 429) },
        detail: detail("Create a playbook", "profile_id must be one of your profiles (404 otherwise). A schedule is a croner expression in timezone (default UTC); its first slot is next_run_at."),
      },
    )
    .get("/", ({ user, query }) => s.playbooks.list(user.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(PlaybookRecord), ...errorResponses(400, 401, 429) },
      detail: detail("List your playbooks, newest first"),
    })
    .get("/:id", ({ user, params }) => s.playbooks.get(user.id, params.id), {
      response: { 200: PlaybookRecord, ...errorResponses(401, 404, 429) },
      detail: detail("Get a playbook, with its trigger URL, next run and last runs"),
    })
    .patch("/:id", ({ user, params, body }) => s.playbooks.update(user.id, params.id, body), {
      ...jsonBody(PlaybookPatchBody),
      response: { 200: PlaybookRecord, ...errorResponses(400, 401, 404, 429) },
      detail: detail("Change a playbook", "The fields given replace; null clears schedule, max_turns, max_budget_usd and answer_timeout. Disabling stops the schedule and the trigger URL at once."),
    })
    .delete(
      "/:id",
      async ({ user, params, set }) => {
        await s.playbooks.delete(user.id, params.id);
        set.status = 204;
      },
      { response: { 204: t.Void(), ...errorResponses(401, 404, 429) }, detail: detail("Delete a playbook (its schedule stops at once; its runs' tasks stay)") },
    )
    .post(
      "/:id/run",
      async ({ user, params, body, set }) => {
        const r = await s.playbooks.run(user.id, params.id, body?.input);
        set.status = 202;
        return r;
      },
      {
        ...jsonBody(RunBody, { optional: true }),
        response: { 202: RunAccepted, ...errorResponses(400, 401, 402, 404, 422, 429, 502) },
        detail: detail(
          "Run a playbook now",
          "Every call starts a separate run (no idempotency): a task with playbook_id, in a new session, streamed and persisted like any other, subject to the profile's concurrency and the run's turn and budget limits. input is appended to the prompt in a <run_input> block. The body may be empty.",
        ),
      },
    )
    .get("/:id/runs", ({ user, params, query }) => s.playbooks.runs(user.id, params.id, query), {
      query: queryOf(PageQuery),
      response: { 200: ListOf(PlaybookRun), ...errorResponses(400, 401, 404, 429) },
      detail: detail("A playbook's runs, newest first", "Runs are tasks; a schedule slot that did not start a task shows as skipped (the previous run was still going) or failed (refused by a limit), with task_id null."),
    })
    .post("/:id/rotate-trigger", ({ user, params, request }) => s.playbooks.rotateTrigger(user.id, params.id, { ip: requestContext(request).ip }), {
      response: { 200: PlaybookRecord, ...errorResponses(401, 404, 429) },
      detail: detail("Replace the trigger URL's secret", "The old trigger URL answers 404 from now on."),
    });
