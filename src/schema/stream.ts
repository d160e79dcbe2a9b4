/**
 * The /v1/stream protocol as data: every client message and every server frame, each one TypeBox
 * schema. The stream validates client messages with these (src/ws/messages.ts), the agent loop,
 * the task queue and the hub publish frames typed by the `ServerFrame` union, the tests read
 * frames through it, and /v1/asyncapi.json is generated from it (src/schema/asyncapi.ts).
 */
import { MODEL_PROVIDERS, STOP_REASONS, TASK_STATUSES } from "../db/schema.ts";
import { ERROR_CODES } from "../lib/errors.ts";
import { OneOf, type Static, T, type TSchema } from "./common.ts";
import { Answer, Prompt, SubmitFields } from "./task.ts";

// ---------------------------------------------------------------------------------------------
// Client → server

const RequestId = T.Optional(T.String({ maxLength: 200, description: "Echoed on the error frame this message causes" }));
const Id = (description: string) => T.String({ minLength: 1, description });

const message = <K extends string, P extends Record<string, TSchema>>(type: K, props: P, description: string) =>
  T.Object({ type: T.Literal(type), request_id: RequestId, ...props }, { title: type, description });

export const CLIENT_MESSAGES = {
  "task.submit": message("task.submit", SubmitFields, "Same as POST /v1/tasks: submits and streams the results over this socket. Without session_id a new session is created and session.ready is sent."),
  "task.cancel": message("task.cancel", { task_id: Id("The task to cancel") }, "Cancels the task (its task:done says cancelled)."),
  "task.answer": message(
    "task.answer",
    { task_id: Id("The task that asked"), answer: Answer },
    "Reply to a task:ask_user question; it becomes the AskUserQuestion tool's result.",
  ),
  "session.start": message("session.start", { profile_id: Id("The profile of the new session") }, "Creates a session (its workspace) without a task; the server replies with session.ready."),
  "session.resume": message(
    "session.resume",
    { session_id: Id("The session to re-attach to"), after: T.Optional(T.Integer({ minimum: 0, description: "Replay only frames with a greater seq (default 0: everything)" })) },
    "Re-attaches to a session: session.replay_start, the stored frames, session.replay_end, then live frames.",
  ),
  "session.turn": message("session.turn", { session_id: Id("The session to continue"), prompt: Prompt }, "A new user message in an existing session: task.submit with mode session and the session's profile."),
} as const;

export type ClientMessageType = keyof typeof CLIENT_MESSAGES;
export type ClientMessage = { [K in ClientMessageType]: Static<(typeof CLIENT_MESSAGES)[K]> }[ClientMessageType];

// ---------------------------------------------------------------------------------------------
// Server → client

const sessionId = T.String({ description: "sess_…" });
const taskId = T.String({ description: "task_…" });
const seq = T.Integer({ minimum: 1, description: "Position in the session's transcript; never given to two frames" });

/** A frame stored in the session's transcript (it carries `seq`; those of a task carry `task_id`). */
const stored = <K extends string, P extends Record<string, TSchema>>(type: K, props: P, description: string) =>
  T.Object({ type: T.Literal(type), session_id: sessionId, seq, ...props }, { title: type, description });
const ofTask = <K extends string, P extends Record<string, TSchema>>(type: K, props: P, description: string) =>
  T.Object({ type: T.Literal(type), session_id: sessionId, task_id: taskId, seq, ...props }, { title: type, description });

export const Question = T.Object({ question: T.String(), options: T.Array(T.Object({ label: T.String() })) });

export const SessionReady = stored(
  "session.ready",
  {
    container_id: T.Union([T.String(), T.Null()], { description: "ctr_…; null only when no Docker host could take the workspace of a task.submit (its task:failed follows)" }),
    container_name: T.Union([T.String(), T.Null()], { description: "null with container_id" }),
    profile_id: T.String(),
  },
  "A session was created (after session.start, or task.submit without a session_id); its workspace runs — unless it could not start for a task.submit, whose task:failed (CONTAINER_FAILED) follows.",
);
export const TaskToken = ofTask("task:token", { text: T.String() }, "One chunk of model text. Replace the accumulated text with turn.done's result_text.");
export const TaskToolUse = ofTask(
  "task:tool_use",
  { tool: T.String(), tool_use_id: T.String(), input: T.Record(T.String(), T.Unknown(), { description: "The tool's arguments" }) },
  "The agent called a tool; exactly one task:tool_result (or task:failed) follows.",
);
export const TaskToolResult = ofTask(
  "task:tool_result",
  { tool: T.String(), tool_use_id: T.String(), output: T.String(), is_error: T.Boolean() },
  "Result of a tool call (for AskUserQuestion: the user's answer).",
);
export const TaskAskUser = ofTask("task:ask_user", { questions: T.Array(Question) }, "The agent asks the user; answer with task.answer. The task waits (waiting_input).");
export const TurnContinuing = ofTask(
  "turn.continuing",
  { continuation: T.Integer({ minimum: 1 }), max_continuations: T.Integer({ minimum: 1 }) },
  "A multi-chain playbook run continues in a new chain (fresh model context, same workspace).",
);
export const TurnDone = ofTask(
  "turn.done",
  {
    result_text: T.String(),
    input_tokens: T.Integer(),
    output_tokens: T.Integer(),
    cost_usd: T.Number(),
    stop_reason: T.Optional(
      OneOf(STOP_REASONS, {
        description:
          "Why the model answer that ended the turn stopped: max_tokens means result_text was cut off at the model's output token limit, refusal that the model declined; tool_use when the turn ended on a tool call (a playbook run's last ContinueInNewChain). Absent on a cancelled turn's frame (no answer ended it), and on frames stored by a runcell from before this field (replayed as stored).",
      }),
    ),
  },
  "End of one agent turn: result_text is the final polished text (signed image URLs, normalized markdown); the token and cost figures are the task's totals. A cancelled turn ends with one too, just before its task:done: its result_text is what it had streamed of the answer it was writing (else its last text, else empty).",
);
export const TaskDone = ofTask("task:done", { status: OneOf(TASK_STATUSES.filter((s) => s === "completed" || s === "cancelled")) }, "End of a task (completed or cancelled).");
export const TaskFailed = ofTask("task:failed", { error: T.String(), code: OneOf(ERROR_CODES) }, "The task failed; code is one of the interface's error codes.");

/**
 * Admin-only debug frame. It is numbered in the session's sequence like every other frame
 * (API.md: every session frame carries `seq`), and is left out of what users without the admin
 * role are sent or read: they see a gap in `seq` there (a gap is allowed, a reuse never).
 */
export const TaskSystemPrompt = ofTask(
  "task:system_prompt",
  { system_prompt: T.String(), model: T.String(), provider: OneOf(MODEL_PROVIDERS), tools: T.Array(T.String()) },
  "The full system prompt of the turn; sent only to users with the admin role (others see a gap in seq where it is).",
);
export type TaskSystemPrompt = Static<typeof TaskSystemPrompt>;

/** Frames stored in a session's transcript, each with its seq (replayed by session.resume and GET /v1/sessions/:id/events). */
export const PERSISTED_FRAMES = [SessionReady, TaskToken, TaskToolUse, TaskToolResult, TaskAskUser, TurnContinuing, TurnDone, TaskDone, TaskFailed, TaskSystemPrompt] as const;
export const PersistedFrame = T.Union([...PERSISTED_FRAMES], { title: "PersistedFrame" });
export type PersistedFrame = Static<typeof PersistedFrame>;

export const ReplayStart = T.Object(
  { type: T.Literal("session.replay_start"), session_id: sessionId, after: T.Integer({ minimum: 0 }) },
  { title: "session.replay_start", description: "Start of the transcript replay after session.resume." },
);
export const ReplayEnd = T.Object(
  { type: T.Literal("session.replay_end"), session_id: sessionId, last_seq: T.Integer({ minimum: 0, description: "Highest seq replayed; live frames follow" }) },
  { title: "session.replay_end", description: "End of the replay. Live frames follow, strictly after it." },
);
export const ErrorFrame = T.Object(
  {
    type: T.Literal("error"),
    code: OneOf(ERROR_CODES),
    message: T.String(),
    request_id: T.Optional(T.String({ description: "The request_id of the client message that caused it" })),
    details: T.Optional(T.Record(T.String(), T.Unknown())),
  },
  {
    title: "error",
    description:
      "A client message was refused; the socket stays open. RATE_LIMITED: every client message takes a token from the caller's rate-limit bucket (shared with the REST API); details.retry_after says in how many seconds one is back. CONCURRENCY_LIMIT: no room for another workspace (details.limit max_concurrency or max_running_workspaces); details.retry_after is a fixed 10 s polling hint.",
  },
);

export const SERVER_FRAMES = [...PERSISTED_FRAMES, ReplayStart, ReplayEnd, ErrorFrame] as const;
export const ServerFrame = T.Union([...SERVER_FRAMES], { title: "ServerFrame" });
/** Every frame the server sends, discriminated by `type`. */
export type ServerFrame = Static<typeof ServerFrame>;
export type ServerFrameType = ServerFrame["type"];
export type FrameOf<K extends ServerFrameType> = Extract<ServerFrame, { type: K }>;

/** A transcript entry: a stored frame (task:system_prompt only for admins). */
export const TranscriptFrame = T.Union([...PERSISTED_FRAMES], { title: "TranscriptFrame" });

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** What a publisher hands the hub: a session frame without what the event log adds (`session_id`, `seq`). */
export type FrameInput = DistributiveOmit<PersistedFrame, "session_id" | "seq">;
/** What the agent loop emits: a task's frame, the loop adds `task_id`. */
export type TaskFrameInput = DistributiveOmit<Extract<FrameInput, { task_id: string }>, "task_id">;
