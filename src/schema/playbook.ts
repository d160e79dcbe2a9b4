/**
 * Playbooks: saved prompts run on demand, on a cron schedule, or from a secret inbound URL. The
 * record, its runs (a run is an ordinary task carrying `playbook_id`; a slot that never became a
 * task shows as `skipped` or `failed`), and the bodies that create, change and run one.
 */
import { playbooks, RUN_TRIGGERS, TASK_STATUSES } from "../db/schema.ts";
import { Body, CostUsd, Label, Nullable, NullableTimestamp, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";
import { LIMIT_BOUNDS } from "./profile.ts";
import { Prompt, TaskError } from "./task.ts";

export const MAX_CONTINUATIONS = 10;
/** Largest run input (a string, or JSON that is serialized into one), in UTF-8 bytes. */
export const INPUT_MAX_BYTES = 64 * 1024;
/** Longest answer_timeout: 30 days, in seconds. */
export const ANSWER_TIMEOUT_MAX = 30 * 24 * 3600;
/** How many recent runs a playbook record carries. */
export const LAST_RUNS = 5;

export const RUN_STATUSES = [...TASK_STATUSES, "skipped"] as const;
export const RunTrigger = OneOf(RUN_TRIGGERS, { description: "manual: POST /run; schedule: the cron; hook: the trigger URL" });

export const PlaybookRun = T.Object(
  {
    task_id: Nullable(T.String(), { description: "The run's task (null when the slot never became one)" }),
    session_id: Nullable(T.String()),
    trigger: RunTrigger,
    status: OneOf(RUN_STATUSES, { description: "The task's status, or skipped (the previous run was still going)" }),
    error: TaskError,
    input_tokens: T.Integer(),
    output_tokens: T.Integer(),
    cost_usd: CostUsd,
    scheduled_for: Nullable(Timestamp, { description: "The schedule slot (schedule runs)" }),
    created_at: Timestamp,
    started_at: NullableTimestamp,
    ended_at: NullableTimestamp,
  },
  { title: "PlaybookRun" },
);
export type PlaybookRun = Static<typeof PlaybookRun>;

const MaxContinuations = T.Integer({ minimum: 0, maximum: MAX_CONTINUATIONS, description: "Fresh-context chains a run may continue into (0–10)" });
const MaxTurns = T.Integer({ minimum: LIMIT_BOUNDS.max_turns.min, maximum: LIMIT_BOUNDS.max_turns.max, description: "Model requests per run, across chains (default: the profile's)" });
const MaxBudget = T.Number({ exclusiveMinimum: 0, maximum: LIMIT_BOUNDS.max_budget_usd.max, description: "Cost cap per run in USD, across chains (default: the profile's)" });
const Schedule = T.String({ minLength: 1, maxLength: 200, description: 'Cron expression (croner syntax; 5 or 6 fields, seconds allowed; "@daily"…)', examples: ["0 3 * * *", "*/30 * * * * *"] });
const Timezone = T.String({ minLength: 1, maxLength: 64, description: "IANA time zone of the schedule (DST handled), stored as the tz database spells it; UTC offsets such as +02:00 are refused", examples: ["UTC", "Europe/Berlin"] });
const AnswerTimeout = T.Integer({ minimum: 1, maximum: ANSWER_TIMEOUT_MAX, description: "Seconds an unattended run waits for an answer before it fails" });
const Name = Label;

export const PlaybookRecord = T.Object(
  {
    ...recordColumns(playbooks, ["id", "name", "profile_id", "prompt"]),
    max_continuations: MaxContinuations,
    max_turns: Nullable(MaxTurns),
    max_budget_usd: Nullable(MaxBudget),
    schedule: Nullable(Schedule),
    timezone: Timezone,
    enabled: T.Boolean({ description: "A disabled playbook fires neither on its schedule nor from its trigger URL" }),
    answer_timeout: Nullable(AnswerTimeout),
    trigger_url: T.String({ description: "{public_url}/hooks/playbooks/<id>/<secret>: POST to it to run the playbook; treat it as a credential" }),
    next_run_at: Nullable(Timestamp, { description: "The next schedule slot (null without an enabled schedule)" }),
    last_runs: T.Array(PlaybookRun, { description: `The ${LAST_RUNS} most recent runs, newest first` }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Playbook" },
);
export type PlaybookRecord = Static<typeof PlaybookRecord>;

/** The optional fields a create may set and a patch may change (Body clones them: each body has its own copy). */
const Settable = {
  max_continuations: T.Optional(MaxContinuations),
  max_turns: T.Optional(Nullable(MaxTurns)),
  max_budget_usd: T.Optional(Nullable(MaxBudget)),
  schedule: T.Optional(Nullable(Schedule)),
  timezone: T.Optional(Timezone),
  enabled: T.Optional(T.Boolean()),
  answer_timeout: T.Optional(Nullable(AnswerTimeout)),
};

export const PlaybookCreateBody = Body({ name: Name, profile_id: T.String({ description: "One of your profiles" }), prompt: Prompt, ...Settable }, { title: "PlaybookCreate" });
export type PlaybookCreate = Static<typeof PlaybookCreateBody>;

export const PlaybookPatchBody = Body({ name: T.Optional(Name), profile_id: T.Optional(T.String()), prompt: T.Optional(Prompt), ...Settable }, { title: "PlaybookPatch" });
export type PlaybookPatch = Static<typeof PlaybookPatchBody>;

export const RunBody = Body(
  { input: T.Optional(T.Unknown({ description: `Appended to the prompt in a delimited block: a string, or any JSON (serialized); at most ${INPUT_MAX_BYTES / 1024} KiB` })) },
  { title: "PlaybookRunInput" },
);
export type RunInput = Static<typeof RunBody>;

export const RunAccepted = T.Object({ task_id: T.String(), session_id: T.String(), playbook_id: T.String() }, { title: "PlaybookRunAccepted" });
export const HookAccepted = T.Object({ task_id: T.String() }, { title: "PlaybookTriggerAccepted" });
