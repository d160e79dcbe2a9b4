/**
 * Task lifecycle. Tasks run one at a time per session, in submission order; the queue is the
 * `tasks` table itself (status queued → running → waiting_input ⇄ running → completed | failed |
 * cancelled), so a restart loses nothing: `recover` resumes running tasks from their last stored
 * step and starts queued ones. REST and WebSocket handlers both call these methods.
 */
import type { DB } from "../db/client.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { ProfileRow, ProfilesDep, WorkspaceRow } from "./deps.ts";
import { AgentLoop, type LoopDeps, type Outcome } from "./loop.ts";
import { type SessionRow, titleFrom } from "./sessions.ts";
import { FINAL_STATUSES, type TaskRow } from "./tasks.ts";
import { ASK_USER } from "./tools/index.ts";

export interface OrchestratorDeps extends LoopDeps {
  db: DB;
  profiles: ProfilesDep;
}

export interface SubmitInput {
  mode?: string;
  profile_id?: string;
  session_id?: string;
  prompt: string;
  max_turns?: number;
  max_budget_usd?: number;
  playbook_id?: string | null;
}

export interface SubmitHooks {
  /** Called synchronously once a new session exists, before `session.ready` is published. */
  onSession?: (sessionId: string) => void;
}

interface Running {
  taskId: string;
  ctl: AbortController;
  done: Promise<void>;
}

const STOP_WAIT_MS = 5000;

export class Orchestrator {
  private running = new Map<string, Running>();
  private stopped = false;
  private loop: AgentLoop;

  constructor(private d: OrchestratorDeps) {
    this.loop = new AgentLoop(d);
  }

  private publish(sessionId: string, frame: { type: string } & Record<string, unknown>) {
    this.d.hub.publish(sessionId, frame);
  }

  private limits(profile: ProfileRow, input: SubmitInput) {
    const maxTurns = input.max_turns ?? profile.limits.max_turns;
    const maxBudgetUsd = input.max_budget_usd ?? profile.limits.max_budget_usd;
    if (maxTurns <= 0) throw new AppError("TURN_LIMIT_EXCEEDED", "max_turns is 0: the task could not make a single model request", { field: "max_turns", max_turns: maxTurns });
    if (maxBudgetUsd <= 0) throw new AppError("BUDGET_EXCEEDED", "max_budget_usd is 0: the task has no budget to spend", { field: "max_budget_usd", max_budget_usd: maxBudgetUsd });
    return { maxTurns, maxBudgetUsd };
  }

  /** Creates a session with its running workspace and publishes `session.ready`. */
  private async newSession(userId: string, profile: ProfileRow, title: string | null, hooks: SubmitHooks, withTask?: (tx: DB, session: SessionRow) => TaskRow) {
    const env = this.d.secrets.resolveEnv(userId, profile.env);
    let task: TaskRow | undefined;
    const session = this.d.db.transaction((tx) => {
      const s = this.d.sessions.create(userId, profile.id, title, tx);
      if (withTask) task = withTask(tx, s);
      return s;
    });
    hooks.onSession?.(session.id);
    let ws: WorkspaceRow;
    try {
      ws = await this.d.workspaces.createForSession({ userId, sessionId: session.id, profile, env });
    } catch (e) {
      if (task && e instanceof AppError && e.code === "CONTAINER_FAILED") return { session, task, workspace: null, error: e };
      await this.purge(session.id, { tolerateWorkspaceError: true });
      throw e;
    }
    this.publish(session.id, { type: "session.ready", container_id: ws.id, container_name: ws.name, profile_id: profile.id });
    return { session, task, workspace: ws, error: null };
  }

  async startSession(userId: string, profileId: string, hooks: SubmitHooks = {}) {
    const profile = this.d.profiles.get(userId, profileId);
    const r = await this.newSession(userId, profile, null, hooks);
    return { session: r.session, workspace: r.workspace! };
  }

  async submit(userId: string, input: SubmitInput, hooks: SubmitHooks = {}): Promise<{ task: TaskRow; session: SessionRow; created: boolean }> {
    if (input.mode !== undefined && input.mode !== "session") throw Errors.validation("mode", `mode "${input.mode}" is not supported; use "session"`);
    if (input.session_id) {
      const session = this.d.sessions.get(userId, input.session_id);
      if (input.profile_id && input.profile_id !== session.profile_id) {
        throw Errors.validation("profile_id", `Session ${session.id} belongs to profile ${session.profile_id}; omit profile_id or use that one`);
      }
      const profile = this.d.profiles.get(userId, session.profile_id);
      const { maxTurns, maxBudgetUsd } = this.limits(profile, input);
      this.d.workspaces.assertRoom(session.id, profile);
      const task = this.d.tasks.create({ userId, sessionId: session.id, profileId: profile.id, prompt: input.prompt, maxTurns, maxBudgetUsd, playbookId: input.playbook_id });
      this.d.sessions.setTitleIfEmpty(session.id, titleFrom(input.prompt));
      this.pump(session.id);
      return { task, session, created: false };
    }
    if (!input.profile_id) throw Errors.validation("profile_id", "profile_id is required when no session_id is given");
    const profile = this.d.profiles.get(userId, input.profile_id);
    const { maxTurns, maxBudgetUsd } = this.limits(profile, input);
    const r = await this.newSession(userId, profile, titleFrom(input.prompt), hooks, (tx, s) =>
      this.d.tasks.create({ userId, sessionId: s.id, profileId: profile.id, prompt: input.prompt, maxTurns, maxBudgetUsd, playbookId: input.playbook_id }, tx),
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
    if (outcome === "waiting" || outcome === "interrupted") return;
    if (outcome === "completed") {
      this.d.tasks.update(task.id, { status: "completed", finished_at: this.d.now(), pending_tool_use_id: null });
      this.publish(task.session_id, { type: "task:done", task_id: task.id, status: "completed" });
    } else if (outcome === "cancelled") this.finishCancelled(task);
    else this.fail(task, outcome.failed.code, outcome.failed.message);
  }

  private finishCancelled(task: TaskRow) {
    this.d.tasks.update(task.id, { status: "cancelled", finished_at: this.d.now(), pending_tool_use_id: null });
    this.publish(task.session_id, { type: "task:done", task_id: task.id, status: "cancelled" });
  }

  /** Marks the task failed and queues the platform notification in the same transaction. */
  private fail(task: TaskRow, code: string, message: string) {
    this.d.db.transaction((tx) => {
      this.d.tasks.update(task.id, { status: "failed", error_code: code, error_message: message, finished_at: this.d.now(), pending_tool_use_id: null }, tx);
      this.d.notifications.taskFailed({ userId: task.user_id, taskId: task.id, playbookId: task.playbook_id, code, error: message }, tx);
    });
    this.publish(task.session_id, { type: "task:failed", task_id: task.id, error: message, code });
  }

  cancel(userId: string, taskId: string): TaskRow {
    const task = this.d.tasks.get(userId, taskId);
    if (FINAL_STATUSES.includes(task.status)) return task;
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
    this.finishCancelled(task);
    this.pump(task.session_id);
    return this.d.tasks.byId(task.id)!;
  }

  answer(userId: string, taskId: string, answer: string): TaskRow {
    const task = this.d.tasks.get(userId, taskId);
    if (task.status !== "waiting_input" || !task.pending_tool_use_id) {
      throw Errors.validation("task_id", `Task ${task.id} is not waiting for an answer (status ${task.status})`, { status: task.status });
    }
    this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: task.pending_tool_use_id, content: answer });
    this.d.tasks.update(task.id, { status: "running", pending_tool_use_id: null });
    this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: task.pending_tool_use_id, output: answer, is_error: false });
    this.pump(task.session_id);
    return this.d.tasks.byId(task.id)!;
  }

  /** Cancels the session's work, removes its workspace (container and volume) and its records. */
  async deleteSession(userId: string, sessionId: string) {
    this.d.sessions.get(userId, sessionId);
    const entry = this.running.get(sessionId);
    if (entry) {
      entry.ctl.abort("cancel");
      await Promise.race([entry.done, Bun.sleep(STOP_WAIT_MS)]);
    }
    await this.purge(sessionId);
  }

  /**
   * Removes a session's workspace, then its subscribers and rows (tasks, transcript and events
   * cascade). A workspace that cannot be removed keeps the session (the caller can retry), unless
   * the session is being rolled back anyway.
   */
  private async purge(sessionId: string, opts: { tolerateWorkspaceError?: boolean } = {}) {
    try {
      await this.d.workspaces.removeForSession(sessionId);
    } catch (e) {
      if (!opts.tolerateWorkspaceError) throw e;
    }
    this.d.hub.closeSession(sessionId);
    this.d.hub.log.forget(sessionId);
    this.d.sessions.delete(sessionId);
  }

  /** At start: resume running tasks from their last step and start queued ones. */
  recover() {
    const sessions = this.d.tasks.sessionsWithWork();
    if (sessions.length) this.d.log.info("resuming tasks", { sessions: sessions.length });
    for (const sid of sessions) this.pump(sid);
  }

  /** On shutdown: stop every loop, leaving its task `running` for `recover` at the next start. */
  async stop() {
    this.stopped = true;
    const entries = [...this.running.values()];
    for (const e of entries) e.ctl.abort("shutdown");
    await Promise.race([Promise.allSettled(entries.map((e) => e.done)), Bun.sleep(STOP_WAIT_MS)]);
    this.d.hub.log.flush();
  }

  /** Resolves once no task of the session is running in this process (tests, shutdown). */
  async idle(sessionId: string) {
    while (this.running.has(sessionId)) await this.running.get(sessionId)!.done;
  }
}
