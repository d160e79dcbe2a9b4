/**
 * Tasks: the record, the status enum, and the submit shape — written once here and used by
 * `POST /v1/tasks`, the stream's `task.submit` and `session.turn` (src/schema/stream.ts) and the
 * task queue's input type.
 */
import { RUN_TRIGGERS, STOP_REASONS, TASK_STATUSES, tasks } from "../db/schema.ts";
import { Repositories } from "./profile.ts";
import { Body, CostUsd, NULL_AS_ABSENT, Nullable, NullableTimestamp, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

export const TaskStatus = OneOf(TASK_STATUSES);

export const PROMPT_MAX = 100_000;
/** Not blank: a model provider refuses a message of only whitespace (Anthropic: 400), which would fail the turn. */
export const Prompt = T.String({ minLength: 1, maxLength: PROMPT_MAX, pattern: "\\S", "x-hint": "not blank" });

/** The fields of a submission (POST /v1/tasks body; task.submit adds `type` and `request_id`). */
export const SubmitFields = {
  mode: T.Optional(OneOf(["session"], { ...NULL_AS_ABSENT, description: 'Only "session" is supported' })),
  profile_id: T.Optional(T.String({ ...NULL_AS_ABSENT, description: "Required when session_id is absent" })),
  session_id: T.Optional(T.String({ ...NULL_AS_ABSENT, description: "Continue this session; absent: a new session is created" })),
  prompt: Prompt,
  max_turns: T.Optional(T.Integer({ ...NULL_AS_ABSENT, minimum: 0, maximum: 10_000, description: "Defaults to the profile's limits.max_turns" })),
  max_budget_usd: T.Optional(T.Number({ ...NULL_AS_ABSENT, minimum: 0, maximum: 100_000, description: "Defaults to the profile's limits.max_budget_usd" })),
  repositories: T.Optional(
    T.Array(Repositories.items, { ...Repositories, ...NULL_AS_ABSENT, description: "Repositories for the new session only (besides the profile's; one with the same path replaces the profile's); not with session_id" }),
  ),
};
export const SubmitBody = Body(SubmitFields, { title: "TaskSubmit" });
export type Submit = Static<typeof SubmitBody>;

export const TaskAccepted = T.Object({ task_id: T.String(), session_id: T.String(), status: TaskStatus }, { title: "TaskAccepted" });

/** Why a model answer ended (runcell's names for every provider; docs/providers.md "Stop reasons"). */
export const StopReason = OneOf(STOP_REASONS);

export const TaskError = Nullable(T.Object({ code: T.String(), message: T.String() }), { description: "Why it failed (null unless failed)" });

export const TaskRecord = T.Object(
  {
    ...recordColumns(tasks, ["id", "session_id", "profile_id", "playbook_id", "prompt"]),
    trigger: Nullable(OneOf(RUN_TRIGGERS), { description: "How a playbook run started (manual, schedule, hook); null for other tasks" }),
    status: TaskStatus,
    error: TaskError,
    ...recordColumns(tasks, ["result_text"]),
    stop_reason: Nullable(StopReason, {
      description:
        "Why the model answer that ended the task stopped: max_tokens means result_text was cut off at the model's output token limit, refusal that the model declined. Null while the task runs, and when no model answer ended it (failed, cancelled, or a task from before this field).",
    }),
    ...recordColumns(tasks, ["input_tokens", "output_tokens"]),
    cost_usd: CostUsd,
    ...recordColumns(tasks, ["turns", "max_turns", "max_budget_usd"]),
    created_at: Timestamp,
    started_at: NullableTimestamp,
    finished_at: NullableTimestamp,
  },
  { title: "Task" },
);
export type TaskRecord = Static<typeof TaskRecord>;

/** An answer to an ask-user question (REST and the stream's task.answer): not blank, like a prompt. */
export const Answer = T.String({ minLength: 1, maxLength: PROMPT_MAX, pattern: "\\S", "x-hint": "not blank" });
export const AnswerBody = Body({ answer: Answer });
