/** /v1/tasks: submit (202), read, list, cancel, answer. Logic lives in the orchestrator. */
import { createSelectSchema } from "drizzle-typebox";
import { Elysia, t } from "elysia";
import { taskRecord } from "../../agents/tasks.ts";
import { tasks } from "../../db/schema.ts";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, ListOf, NullableTimestamp, PageQuery, Timestamp } from "../schema.ts";

const TaskRow = createSelectSchema(tasks, { created_at: Timestamp, started_at: NullableTimestamp, finished_at: NullableTimestamp });
export const TaskRecord = t.Composite(
  [
    t.Pick(TaskRow, ["id", "session_id", "profile_id", "playbook_id", "prompt", "status", "result_text", "input_tokens", "output_tokens", "cost_usd", "turns", "max_turns", "max_budget_usd", "created_at", "started_at", "finished_at"]),
    t.Object({ error: t.Union([t.Object({ code: t.String(), message: t.String() }), t.Null()]) }),
  ],
  { title: "Task" },
);
const TaskStatus = TaskRow.properties.status;

export const SubmitBody = t.Object({
  mode: t.Optional(t.String({ description: 'Only "session" is supported' })),
  profile_id: t.Optional(t.String({ description: "Required when session_id is absent" })),
  session_id: t.Optional(t.String({ description: "Continue this session; absent: a new session is created" })),
  prompt: t.String({ minLength: 1, maxLength: 100_000 }),
  max_turns: t.Optional(t.Integer({ minimum: 0, maximum: 10_000, description: "Defaults to the profile's limits.max_turns" })),
  max_budget_usd: t.Optional(t.Number({ minimum: 0, maximum: 100_000, description: "Defaults to the profile's limits.max_budget_usd" })),
});

const detail = (summary: string) => ({ tags: ["Tasks"], summary, security: USER_SECURITY });

export const taskRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/tasks" })
    .use(userGuard())
    .post(
      "/",
      async ({ user, body, set }) => {
        const { task, session } = await s.orchestrator.submit(user.id, body);
        set.status = 202;
        return { task_id: task.id, session_id: session.id, status: task.status };
      },
      {
        ...jsonBody(SubmitBody),
        response: { 202: t.Object({ task_id: t.String(), session_id: t.String(), status: TaskStatus }), ...errorResponses(400, 401, 402, 404, 422, 429, 502) },
        detail: detail("Submit a prompt; creates a session when none is given"),
      },
    )
    .get("/", ({ user, query }) => s.tasks.list(user.id, query), {
      query: t.Object({ ...PageQuery, session_id: t.Optional(t.String({ "x-field": "session_id" })), status: t.Optional(TaskStatus) }),
      response: { 200: ListOf(TaskRecord), ...errorResponses(400, 401) },
      detail: detail("List your tasks, newest first"),
    })
    .get("/:id", ({ user, params }) => taskRecord(s.tasks.get(user.id, params.id)), {
      response: { 200: TaskRecord, ...errorResponses(401, 404) },
      detail: detail("A task's status, result, usage and error"),
    })
    .post(
      "/:id/cancel",
      ({ user, params, set }) => {
        set.status = 202;
        return taskRecord(s.orchestrator.cancel(user.id, params.id));
      },
      { response: { 202: TaskRecord, ...errorResponses(401, 404) }, detail: detail("Cancel a task (idempotent; a finished task is returned unchanged)") },
    )
    .post(
      "/:id/answer",
      ({ user, params, body, set }) => {
        set.status = 202;
        return taskRecord(s.orchestrator.answer(user.id, params.id, body.answer));
      },
      {
        ...jsonBody(t.Object({ answer: t.String({ minLength: 1, maxLength: 100_000 }) })),
        response: { 202: TaskRecord, ...errorResponses(400, 401, 404) },
        detail: detail("Answer the agent's question (task:ask_user)"),
      },
    );
