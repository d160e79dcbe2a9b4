/**
 * The task queue. Tasks run one at a time per session, in submission order; the queue is the
 * `tasks` table itself (status queued → running → waiting_input ⇄ running → completed | failed |
 * cancelled), so a restart loses nothing: `recover` resumes running tasks from their last stored
 * step and starts queued ones. A task without a session opens one (session-lifecycle.ts). REST and
 * WebSocket handlers both call these methods.
 */
import type { DB } from "../db/client.ts";
import { FINAL_TASK_STATUSES, type RepositoryConfig } from "../db/schema.ts";
import { checkRepositories } from "../git/repository.ts";
import type { FrameInput } from "../schema/stream.ts";
import type { Submit } from "../schema/task.ts";
import { DueTimer } from "../lib/due-timer.ts";
import { AppError, type ErrorCode, Errors } from "../lib/errors.ts";
import type { ProfileRow, ProfilesDep } from "./deps.ts";
import { AgentLoop, type LoopDeps, type Outcome } from "./loop.ts";
import type { SessionHooks, SessionLifecycle } from "./session-lifecycle.ts";
import { type SessionRow, titleFrom } from "./sessions.ts";
import { roundUsd, type RunOptions, type TaskRow } from "./tasks.ts";

export type { RunOptions };
import { ASK_USER } from "./tools/index.ts";

export interface OrchestratorDeps extends LoopDeps {
  db: DB;
  profiles: ProfilesDep;
  lifecycle: SessionLifecycle;
  /** The operator's policy: task limits within the ceilings, the monthly spend (wired by the app). */
  policy?: {
    checkSubmit(userId: string, explicit: { max_turns?: number; max_budget_usd?: number }, serverPaid: boolean): void;
    clampTask(userId: string, t: { maxTurns: number; maxBudgetUsd: number }): { maxTurns: number; maxBudgetUsd: number };
  };
  /** Where a session's own repositories may point (the network rule of src/agents/outbound.ts; wired by the app). */
  repositoriesAllowed?: (userId: string, repositories: RepositoryConfig[]) => Promise<void>;
  /** A playbook's name for the notification at the end of its runs (wired by the app). */
  playbookName?: (playbookId: string) => string | null;
}

/** A submission (schema/task.ts: POST /v1/tasks, task.submit, session.turn), and the playbook run it is, if any. */
export type SubmitInput = Submit & { run?: RunOptions | null };

export interface SubmitHooks extends SessionHooks {
  /** Runs inside the transaction that creates a new session and its task (a scheduler claims its slot there). */
  inTransaction?: (tx: DB, task: TaskRow) => void;
}

interface Running {
  taskId: string;
  ctl: AbortController;
  done: Promise<void>;
}

const STOP_WAIT_MS = 5000;

/** Whether a profile's model requests are paid with the server's own provider key (the monthly spend cap counts them). */
export const serverPaid = (p: ProfileRow) => p.model.provider !== "demo" && !p.model.api_key_secret && !p.model.base_url;

export class Orchestrator {
  private running = new Map<string, Running>();
  private stopped = false;
  private loop: AgentLoop;
  /** Wakes at the earliest answer_due_at of a waiting task. */
  private answerTimer: DueTimer;

  constructor(private d: OrchestratorDeps) {
    this.loop = new AgentLoop(d);
    this.answerTimer = new DueTimer(() => this.expireAnswers(), d.now);
  }

  private publish(sessionId: string, frame: FrameInput) {
    this.d.hub.publish(sessionId, frame);
  }

  /** The task's limits (the request's or the profile's, within the operator's ceilings), after the policy's checks. */
  private limits(userId: string, profile: ProfileRow, input: SubmitInput) {
    this.d.policy?.checkSubmit(userId, { max_turns: input.max_turns, max_budget_usd: input.max_budget_usd }, serverPaid(profile));
    const asked = { maxTurns: input.max_turns ?? profile.limits.max_turns, maxBudgetUsd: input.max_budget_usd ?? profile.limits.max_budget_usd };
    const { maxTurns, maxBudgetUsd } = this.d.policy?.clampTask(userId, asked) ?? asked;
    if (maxTurns <= 0) throw new AppError("TURN_LIMIT_EXCEEDED", "max_turns is 0: the task could not make a single model request", { field: "max_turns", max_turns: maxTurns });
    if (maxBudgetUsd <= 0) throw new AppError("BUDGET_EXCEEDED", "max_budget_usd is 0: the task has no budget to spend", { field: "max_budget_usd", max_budget_usd: maxBudgetUsd });
    return { maxTurns, maxBudgetUsd };
  }

  async submit(userId: string, input: SubmitInput, hooks: SubmitHooks = {}): Promise<{ task: TaskRow; session: SessionRow; created: boolean }> {
    if (input.mode !== undefined && input.mode !== "session") throw Errors.validation("mode", `mode "${input.mode}" is not supported; use "session"`);
    if (input.session_id) {
      if (input.repositories) throw Errors.validation("repositories", "repositories can only be given when a new session is created (without session_id)");
      const session = this.d.sessions.get(userId, input.session_id);
      if (input.profile_id && input.profile_id !== session.profile_id) {
        throw Errors.validation("profile_id", `Session ${session.id} belongs to profile ${session.profile_id}; omit profile_id or use that one`);
      }
      const profile = this.d.profiles.get(userId, session.profile_id);
      const { maxTurns, maxBudgetUsd } = this.limits(userId, profile, input);
      this.d.workspaces.assertRoom(session.id, profile);
      const task = this.d.tasks.create({ userId, sessionId: session.id, profileId: profile.id, prompt: input.prompt, maxTurns, maxBudgetUsd, run: input.run, serverPaid: serverPaid(profile) });
      this.d.sessions.setTitleIfEmpty(session.id, titleFrom(input.prompt));
      this.pump(session.id);
      return { task, session, created: false };
    }
    if (!input.profile_id) throw Errors.validation("profile_id", "profile_id is required when no session_id is given");
    const profile = this.d.profiles.get(userId, input.profile_id);
    const { maxTurns, maxBudgetUsd } = this.limits(userId, profile, input);
    const repositories = input.repositories?.length ? checkRepositories(input.repositories) : null;
    if (repositories) await this.d.repositoriesAllowed?.(userId, repositories);
    const r = await this.d.lifecycle.open(
      userId,
      profile,
      titleFrom(input.prompt),
      hooks,
      (tx, s) => {
        const task = this.d.tasks.create({ userId, sessionId: s.id, profileId: profile.id, prompt: input.prompt, maxTurns, maxBudgetUsd, run: input.run, serverPaid: serverPaid(profile) }, tx);
        hooks.inTransaction?.(tx, task);
        return task;
      },
      repositories,
    );
    if (r.error) {
      this.fail(r.task!, r.error.code, r.error.message);
      return { task: this.d.tasks.byId(r.task!.id)!, session: r.session, created: true };
    }
    this.pump(r.session.id);
    // The task as accepted (queued); the queue may already have started it.
    return { task: r.task!, session: r.session, created: true };
  }

  /** Starts the session's next task unless one is running or waiting for input. */
  pump(sessionId: string) {
    if (this.stopped || this.running.has(sessionId)) return;
    const next = this.d.tasks.nextActive(sessionId);
    if (!next || next.status === "waiting_input") return;
    const ctl = new AbortController();
    const entry: Running = { taskId: next.id, ctl, done: Promise.resolve() };
    this.running.set(sessionId, entry);
    entry.done = this.execute(next, ctl).finally(() => {
      this.running.delete(sessionId);
      if (!this.stopped) this.pump(sessionId);
    });
  }

  private async execute(task: TaskRow, ctl: AbortController) {
    let outcome: Outcome;
    try {
      const profile = this.d.profiles.get(task.user_id, task.profile_id);
      if (task.status === "queued") {
        this.d.tasks.update(task.id, { status: "running", started_at: this.d.now() });
        task = this.d.tasks.byId(task.id)!;
      }
      outcome = await this.loop.run(task, profile, ctl.signal);
    } catch (e) {
      outcome =
        e instanceof AppError
          ? { failed: { code: e.code, message: e.code === "NOT_FOUND" ? `Profile ${task.profile_id} no longer exists` : e.message } }
          : { failed: { code: "INTERNAL_ERROR", message: "Internal error while starting the task" } };
      if (!(e instanceof AppError)) this.d.log.error("task failed to start", { task_id: task.id, err: e });
    }
    this.settle(task, outcome);
  }

  private settle(task: TaskRow, outcome: Outcome) {
    if (outcome === "interrupted") return;
    if (outcome === "waiting") return this.answerTimer.arm(this.d.tasks.byId(task.id)?.answer_due_at ?? null);
    if (outcome === "completed") this.finish(task, "completed");
    else if (outcome === "cancelled") this.finish(task, "cancelled");
    else this.fail(task, outcome.failed.code, outcome.failed.message);
  }

  /** Ends the task completed or cancelled (a playbook run also notifies its owner, in the same transaction). */
  private finish(task: TaskRow, status: "completed" | "cancelled") {
    this.d.db.transaction((tx) => {
      this.d.tasks.update(task.id, { status, finished_at: this.d.now(), pending_tool_use_id: null, answer_due_at: null }, tx);
      if (task.playbook_id) this.runEnded(task, status, null, tx);
    });
    this.ended(task, status);
    this.publish(task.session_id, { type: "task:done", task_id: task.id, status });
  }

  /** Marks the task failed and queues the platform notification in the same transaction. */
  private fail(task: TaskRow, code: ErrorCode, message: string) {
    this.d.db.transaction((tx) => {
      this.d.tasks.update(task.id, { status: "failed", error_code: code, error_message: message, finished_at: this.d.now(), pending_tool_use_id: null, answer_due_at: null }, tx);
      if (task.playbook_id) this.runEnded(task, "failed", `${code}: ${message}`, tx);
      else this.d.notifications.taskFailed({ userId: task.user_id, taskId: task.id, code, error: message }, tx);
    });
    this.ended(task, "failed");
    this.publish(task.session_id, { type: "task:failed", task_id: task.id, error: message, code });
  }

  /** /metrics: the task's duration from its start (never started: its submission) to now. */
  private ended(task: TaskRow, status: "completed" | "cancelled" | "failed") {
    this.d.metrics?.taskEnded(status, (this.d.now() - (task.started_at ?? task.created_at)) / 1000);
  }

  /** The platform notification at the end of every playbook run: status, cost and (failed) why. */
  private runEnded(task: TaskRow, status: "completed" | "cancelled" | "failed", why: string | null, tx: DB) {
    const t = this.d.tasks.byId(task.id) ?? task;
    const cost = `cost $${roundUsd(t.cost_usd)}, ${t.turns} model request${t.turns === 1 ? "" : "s"}`;
    this.d.notifications.playbookRunEnded(
      { userId: t.user_id, playbookId: t.playbook_id!, taskId: t.id, playbookName: this.d.playbookName?.(t.playbook_id!) ?? null, status, detail: why ? `${why} (${cost})` : cost },
      tx,
    );
  }

  /** Fails the tasks whose question waited past their answer_timeout; re-arms for the next one. */
  expireAnswers() {
    const now = this.d.now();
    for (const task of this.d.tasks.answersDue(now)) {
      const message = `No answer within the playbook's answer_timeout (${Math.round((task.answer_timeout_ms ?? 0) / 1000)} s): the run ends`;
      if (task.pending_tool_use_id) {
        this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: task.pending_tool_use_id, content: `[${message}]`, is_error: true });
        this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: task.pending_tool_use_id, output: `[${message}]`, is_error: true });
      }
      this.fail(task, "TURN_LIMIT_EXCEEDED", message);
      this.pump(task.session_id);
    }
    this.answerTimer.reset(this.d.tasks.nextAnswerDue());
  }

  cancel(userId: string, taskId: string): TaskRow {
    const task = this.d.tasks.get(userId, taskId);
    if ((FINAL_TASK_STATUSES as readonly string[]).includes(task.status)) return task;
    if (task.status === "running") {
      const entry = this.running.get(task.session_id);
      if (entry?.taskId === task.id) {
        entry.ctl.abort("cancel");
        return this.d.tasks.byId(task.id)!;
      }
    }
    if (task.status === "waiting_input" && task.pending_tool_use_id) {
      this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: task.pending_tool_use_id, content: "[cancelled by the user]", is_error: true });
      this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: task.pending_tool_use_id, output: "[cancelled by the user]", is_error: true });
    }
    this.finish(task, "cancelled");
    this.pump(task.session_id);
    return this.d.tasks.byId(task.id)!;
  }

  answer(userId: string, taskId: string, answer: string): TaskRow {
    const task = this.d.tasks.get(userId, taskId);
    if (task.status !== "waiting_input" || !task.pending_tool_use_id) {
      throw Errors.validation("task_id", `Task ${task.id} is not waiting for an answer (status ${task.status})`, { status: task.status });
    }
    this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: task.pending_tool_use_id, content: answer });
    this.d.tasks.update(task.id, { status: "running", pending_tool_use_id: null, answer_due_at: null });
    this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: task.pending_tool_use_id, output: answer, is_error: false });
    this.pump(task.session_id);
    return this.d.tasks.byId(task.id)!;
  }

  /** Stops the session's running task (it ends cancelled), waiting a few seconds for it; before a session is deleted. */
  async stopSession(sessionId: string) {
    const entry = this.running.get(sessionId);
    if (!entry) return;
    entry.ctl.abort("cancel");
    await Promise.race([entry.done, Bun.sleep(STOP_WAIT_MS)]);
  }

  /**
   * A disabled account: its queued tasks fail (FORBIDDEN), questions waiting for an answer are
   * cancelled, running tasks are cancelled (waiting a few seconds for each to end). Returns how
   * many tasks it ended.
   */
  async stopUser(userId: string, reason = "The account was disabled"): Promise<number> {
    const active = this.d.tasks.activeForUser(userId);
    // Queued first, so a cancelled task's session does not start its next one.
    for (const t of active.filter((t) => t.status === "queued")) this.fail(t, "FORBIDDEN", `${reason}: the task did not run`);
    const waits: Promise<unknown>[] = [];
    for (const t of active) {
      if (t.status === "waiting_input") this.cancel(userId, t.id);
      else if (t.status === "running") {
        const entry = this.running.get(t.session_id);
        if (entry?.taskId === t.id) {
          entry.ctl.abort("cancel");
          waits.push(entry.done);
        } else this.finish(t, "cancelled");
      }
    }
    await Promise.race([Promise.allSettled(waits), Bun.sleep(STOP_WAIT_MS)]);
    return active.length;
  }

  /** At start: resume running tasks from their last step and start queued ones; watch answer timeouts. */
  recover() {
    const sessions = this.d.tasks.sessionsWithWork();
    if (sessions.length) this.d.log.info("resuming tasks", { sessions: sessions.length });
    for (const sid of sessions) this.pump(sid);
    this.answerTimer.reset(this.d.tasks.nextAnswerDue());
  }

  /** On shutdown: stop every loop, leaving its task `running` for `recover` at the next start. */
  async stop() {
    this.stopped = true;
    this.answerTimer.stop();
    const entries = [...this.running.values()];
    for (const e of entries) e.ctl.abort("shutdown");
    await Promise.race([Promise.allSettled(entries.map((e) => e.done)), Bun.sleep(STOP_WAIT_MS)]);
    this.d.eventLog.flush();
  }

  /** Resolves once no task of the session is running in this process (tests, shutdown). */
  async idle(sessionId: string) {
    while (this.running.has(sessionId)) await this.running.get(sessionId)!.done;
  }
}
