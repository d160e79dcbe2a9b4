/** /v1/tasks: submit (202), read, list, cancel, answer. Logic lives in the task queue (src/agents/orchestrator.ts). */
import { Elysia, t } from "elysia";
import { taskRecord } from "../../agents/tasks.ts";
import { AppError, type ErrorCode } from "../../lib/errors.ts";
import { ListOf } from "../../schema/common.ts";
import { AnswerBody, SubmitBody, TaskAccepted, TaskRecord, TaskStatus } from "../../schema/task.ts";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses, jsonBody, PageQuery, queryOf } from "../schema.ts";

const detail = (summary: string) => ({ tags: ["Tasks"], summary, security: USER_SECURITY });

export const taskRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/tasks" })
    .use(userGuard())
    .post(
      "/",
      async ({ user, body, set }) => {
        const { task, session } = await s.orchestrator.submit(user.id, body);
        // Its new session's workspace could not start (the engine is down, the image missing): not
        // accepted, but answered as that error (CONTAINER_FAILED 502), naming the records it left.
        if (task.status === "failed") {
          throw new AppError((task.error_code as ErrorCode | null) ?? "CONTAINER_FAILED", task.error_message ?? "The task could not start", { task_id: task.id, session_id: session.id });
        }
        set.status = 202;
        return { task_id: task.id, session_id: session.id, status: task.status };
      },
      {
        ...jsonBody(SubmitBody),
        response: { 202: TaskAccepted, ...errorResponses(400, 401, 402, 404, 422, 429, 502) },
        detail: detail("Submit a prompt; creates a session when none is given"),
      },
    )
    .get("/", ({ user, query }) => s.tasks.list(user.id, query), {
      query: queryOf({ ...PageQuery, session_id: t.Optional(t.String({ "x-field": "session_id" })), status: t.Optional(TaskStatus) }),
      response: { 200: ListOf(TaskRecord), ...errorResponses(400, 401) },
      detail: detail("List your tasks, newest first"),
    })
    .get("/:id", async ({ user, params }) => taskRecord(await s.tasks.get(user.id, params.id)), {
      response: { 200: TaskRecord, ...errorResponses(401, 404) },
      detail: detail("A task's status, result, usage and error"),
    })
    .post(
      "/:id/cancel",
      async ({ user, params, set }) => {
        set.status = 202;
        return taskRecord(await s.orchestrator.cancel(user.id, params.id));
      },
      { response: { 202: TaskRecord, ...errorResponses(401, 404) }, detail: detail("Cancel a task (idempotent; a finished task is returned unchanged)") },
    )
    .post(
      "/:id/answer",
      async ({ user, params, body, set }) => {
        set.status = 202;
        return taskRecord(await s.orchestrator.answer(user.id, params.id, body.answer));
      },
      {
        ...jsonBody(AnswerBody),
        response: { 202: TaskRecord, ...errorResponses(400, 401, 404) },
        detail: detail("Answer the agent's question (task:ask_user)"),
      },
    );
