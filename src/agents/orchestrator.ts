/**
 * The task queue. Tasks run one at a time per session, in submission order; the queue is the
 * `tasks` table itself (status queued → running → waiting_input ⇄ running → completed | failed |
 * cancelled), so a restart loses nothing: `recover` resumes running tasks from their last stored
 * step and starts queued ones. A task without a session opens one (session-lifecycle.ts). REST and
 * WebSocket handlers both call these methods.
 */
import type { DB } from "../db/client.ts";
import { FINAL_TASK_STATUSES, type RepositoryConfig } from "../db/schema.ts";
import { transact, type Unit } from "../db/unit.ts";
import { checkBesideProfile, checkRepositories } from "../git/repository.ts";
import type { FrameInput } from "../schema/stream.ts";
import type { Submit } from "../schema/task.ts";
import { DueTimer } from "../lib/due-timer.ts";
import { type Bus, CHANNELS } from "../replicas/bus.ts";
import { AppError, type ErrorCode, Errors } from "../lib/errors.ts";
import { formatUsd, roundUsd } from "../lib/usd.ts";
import { settledWithin } from "../lib/worker.ts";
import type { ProfileRow, ProfilesDep } from "./deps.ts";
import { TaskLeases } from "./leases.ts";
import { endedResult, type LeftoverFate, stopLeftover } from "./leftover-exec.ts";
import { AgentLoop, type LoopDeps, type Outcome } from "./loop.ts";
import { CANCELLED_BY_USER, type StopReason, stopOutcome } from "./stop.ts";
import type { OpenedSession, SessionHooks, SessionLifecycle } from "./session-lifecycle.ts";
import { type SessionRow, titleFrom } from "./sessions.ts";
import { type NewTask, type RunOptions, type TaskRow } from "./tasks.ts";

export type { RunOptions };
import { ASK_USER } from "./tools/index.ts";
import { makeScrubber } from "./scrub.ts";

export interface OrchestratorDeps extends LoopDeps {
  db: DB;
  profiles: ProfilesDep;
  lifecycle: SessionLifecycle;
  /** The operator's policy: task limits within the ceilings, the monthly spend (wired by the app). */
  policy?: {
    checkSubmit(userId: string, explicit: { max_turns?: number; max_budget_usd?: number }, serverPaid: boolean): Promise<void>;
    clampTask(userId: string, t: { maxTurns: number; maxBudgetUsd: number }): Promise<{ maxTurns: number; maxBudgetUsd: number }>;
  };
  /** Where a session's own repositories may point (the network rule of src/agents/outbound.ts; wired by the app). */
  repositoriesAllowed?: (userId: string, repositories: RepositoryConfig[]) => Promise<void>;
  /** A playbook's name for the notification at the end of its runs: a unit of that transaction (wired by the app). */
  playbookName?: (playbookId: string, tx: DB) => Unit<string | null>;
  /** This replica: its id and lease length (the task leases of leases.ts). */
  replica: { id: string; leaseMs: number };
  /** Cancels sent to the replica running a task (PostgreSQL); `shared` says whether other replicas may exist. */
  bus: Bus;
}

/** A submission (schema/task.ts: POST /v1/tasks, task.submit, session.turn), and the playbook run it is, if any. */
export type SubmitInput = Submit & { run?: RunOptions | null };

export interface SubmitHooks extends SessionHooks {
  /** A unit of the transaction that creates a new session and its task (a scheduler claims its slot there). */
  inTransaction?: (tx: DB, task: TaskRow) => Unit<void>;
}

/** A session the queue has taken: it is picking its next task, or running it. */
interface Running {
  /** The task run; null while the next one is being picked (or when there was none). */
  taskId: string | null;
  /** While the next task is being picked: settles once it is (its id then in `taskId`). */
  picking: Promise<unknown> | null;
  ctl: AbortController;
  done: Promise<void>;
  /** Pumped while taken: look for a next task once done. */
  again: boolean;
}

const STOP_WAIT_MS = 5000;
/** After a lease could not be taken because the database failed, when the session is looked at again. */
const ACQUIRE_RETRY_MS = 1000;
/** How often a cancel waiting on another replica reads the task again. */
const REMOTE_POLL_MS = 100;
/** How often a local cancel looks whether the task's loop has ended it. */
const LOCAL_POLL_MS = 20;

const isFinal = (t: TaskRow) => (FINAL_TASK_STATUSES as readonly string[]).includes(t.status);

export class Orchestrator {
  private running = new Map<string, Running>();
  private stopped = false;
  /**
   * Sessions whose last ended task was a playbook run: once their queue is empty their workspace
   * is stopped, so finished runs do not hold the profile's concurrency until the idle timeout
   * (a schedule every minute would otherwise find its slots taken by its own earlier runs).
   */
  private finishedRuns = new Set<string>();
  /**
   * Sessions whose queue is held (`holdSession`: their workspace is being removed), with how many
   * holds each: no task of theirs starts here until the last hold is released.
   */
  private held = new Map<string, number>();
  private loop: AgentLoop;
  /** Which replica runs each task (PostgreSQL replicas; always this one on SQLite). */
  readonly leases: TaskLeases;
  /** Wakes at the earliest answer_due_at of a waiting task. */
  private answerTimer: DueTimer;

  /** Sessions whose task queue is running here (a task, or picking the next one). */
  get busySessions(): number {
    return this.running.size;
  }

  /** Whether the session's task queue is running here. */
  isRunning(sessionId: string): boolean {
    return this.running.has(sessionId);
  }

  constructor(private d: OrchestratorDeps) {
    this.loop = new AgentLoop(d);
    this.leases = new TaskLeases(d.db, d.now, d.replica.id, d.replica.leaseMs, d.bus.shared);
    this.answerTimer = new DueTimer(() => void this.expireAnswers().catch((e) => d.log.error("answer timeouts not checked", { err: e })), d.now);
  }

  private publish(sessionId: string, frame: FrameInput) {
    this.d.hub.publish(sessionId, frame);
  }

  /** The task's limits (the request's or the profile's, within the operator's ceilings), after the policy's checks. */
  private async limits(userId: string, profile: ProfileRow, input: SubmitInput) {
    // The spend cap, when the profile would send its requests on the server's key now. Whether the task
    // counts toward the spend is decided by its requests (the loop), not here: the profile or the
    // server's key may change before it runs.
    await this.d.policy?.checkSubmit(userId, { max_turns: input.max_turns, max_budget_usd: input.max_budget_usd }, this.d.secrets.paidByServer(profile.model));
    const asked = { maxTurns: input.max_turns ?? profile.limits.max_turns, maxBudgetUsd: input.max_budget_usd ?? profile.limits.max_budget_usd };
    const { maxTurns, maxBudgetUsd } = (await this.d.policy?.clampTask(userId, asked)) ?? asked;
    if (maxTurns <= 0) throw new AppError("TURN_LIMIT_EXCEEDED", "max_turns is 0: the task could not make a single model request", { field: "max_turns", max_turns: maxTurns });
    if (maxBudgetUsd <= 0) throw new AppError("BUDGET_EXCEEDED", "max_budget_usd is 0: the task has no budget to spend", { field: "max_budget_usd", max_budget_usd: maxBudgetUsd });
    return { maxTurns, maxBudgetUsd };
  }

  /**
   * What the user typed, with the values of their vault's secrets replaced (SCRUBBED), as everything
   * the task stores and streams is: a secret pasted into a prompt or an answer is not kept in the
   * task, the transcript or the events, nor sent to the model (the agent reaches it as its
   * environment variable).
   */
  private async scrubTyped(userId: string, text: string): Promise<string> {
    const values = await this.d.secrets.valuesFor(userId);
    return values.length ? makeScrubber(values)(text) : text;
  }

  async submit(userId: string, input: SubmitInput, hooks: SubmitHooks = {}): Promise<{ task: TaskRow; session: SessionRow; created: boolean }> {
    if (input.mode !== undefined && input.mode !== "session") throw Errors.validation("mode", `mode "${input.mode}" is not supported; use "session"`);
    if (input.session_id) {
      if (input.repositories) throw Errors.validation("repositories", "repositories can only be given when a new session is created (without session_id)");
      const session = await this.d.sessions.get(userId, input.session_id);
      if (input.profile_id && input.profile_id !== session.profile_id) {
        throw Errors.validation("profile_id", `Session ${session.id} belongs to profile ${session.profile_id}; omit profile_id or use that one`);
      }
      const profile = await this.d.profiles.get(userId, session.profile_id);
      const { maxTurns, maxBudgetUsd } = await this.limits(userId, profile, input);
      await this.d.workspaces.assertRoom(session.id, profile);
      // (Scrubbed once the submission is known to be valid: a refused one costs no vault read.)
      const prompt = await this.scrubTyped(userId, input.prompt);
      const task = await this.d.tasks.create({ userId, sessionId: session.id, profileId: profile.id, prompt, maxTurns, maxBudgetUsd, run: input.run });
      await this.d.sessions.setTitleIfEmpty(session.id, titleFrom(prompt));
      this.pump(session.id);
      return { task, session, created: false };
    }
    if (!input.profile_id) throw Errors.validation("profile_id", "profile_id is required when no session_id is given");
    const profile = await this.d.profiles.get(userId, input.profile_id);
    const { maxTurns, maxBudgetUsd } = await this.limits(userId, profile, input);
    const repositories = input.repositories?.length ? checkRepositories(input.repositories) : null;
    if (repositories) checkBesideProfile(profile.repositories ?? [], repositories);
    if (repositories) await this.d.repositoriesAllowed?.(userId, repositories);
    const prompt = await this.scrubTyped(userId, input.prompt);
    // The first task is stored under this replica's lease and held while the workspace is created
    // (leases.ts `opening`): another replica's takeover would otherwise start it meanwhile, and
    // create the same container.
    const lease = this.leases.opening();
    let stopHold = () => {};
    const opening: SubmitHooks = {
      ...hooks,
      onSession: (sessionId, first) => {
        if (first) stopHold = this.holdOpening(first);
        hooks.onSession?.(sessionId, first);
      },
    };
    let r: OpenedSession;
    try {
      r = await this.d.lifecycle.open(
        userId,
        profile,
        titleFrom(prompt),
        opening,
        (tx, s) => this.firstTaskIn(tx, { userId, sessionId: s.id, profileId: profile.id, prompt, maxTurns, maxBudgetUsd, run: input.run, lease }, hooks),
        repositories,
      );
    } finally {
      stopHold();
    }
    if (r.error) {
      await this.fail(r.task!, r.error.code, r.error.message);
      return { task: (await this.d.tasks.byId(r.task!.id))!, session: r.session, created: true };
    }
    this.pump(r.session.id);
    // The task as accepted (queued); the queue may already have started it.
    return { task: r.task!, session: r.session, created: true };
  }

  /** A new session's first task, and what the submitter does in the same transaction (`inTransaction`). */
  private *firstTaskIn(tx: DB, input: NewTask, hooks: SubmitHooks): Unit<TaskRow> {
    const task = yield* this.d.tasks.createIn(tx, input);
    if (hooks.inTransaction) yield* hooks.inTransaction(tx, task);
    return task;
  }

  /**
   * Renews the lease of a new session's first task while its workspace is created (nothing to
   * renew on one server). Lost (this replica stalled past it): another replica may start the task;
   * this one's pump then finds it taken.
   */
  private holdOpening(task: TaskRow): () => void {
    return this.leases.hold(
      task.id,
      () => this.d.log.warn("lease of a new session's first task lost while its workspace was created", { task_id: task.id, session_id: task.session_id }),
      (err) => this.d.log.warn("task lease not renewed", { task_id: task.id, err }),
    );
  }

  /**
   * Starts the session's next task unless one is running or waiting for input. The session is
   * taken at once (before the next task is read), so two pumps never both start one of its tasks;
   * a pump while it is taken looks again once it is done.
   */
  pump(sessionId: string) {
    // Held: the release pumps it.
    if (this.stopped || this.held.has(sessionId)) return;
    const taken = this.running.get(sessionId);
    if (taken) {
      taken.again = true;
      return;
    }
    const entry: Running = { taskId: null, picking: null, ctl: new AbortController(), done: Promise.resolve(), again: false };
    this.running.set(sessionId, entry);
    entry.done = this.runNext(sessionId, entry)
      .catch((e) => this.d.log.error("task queue failed", { session_id: sessionId, err: e }))
      .finally(() => {
        this.running.delete(sessionId);
        if (!this.stopped && (entry.taskId || entry.again)) this.pump(sessionId);
      });
  }

  private async runNext(sessionId: string, entry: Running) {
    const picking = this.d.tasks.nextActive(sessionId);
    entry.picking = picking.catch(() => {});
    const next = await picking;
    entry.picking = null;
    if (!next && this.finishedRuns.delete(sessionId) && !entry.ctl.signal.aborted) return this.stopRunWorkspace(sessionId);
    // Nothing to run, or stopped while picking (shutdown, the session being deleted): the task stays queued.
    if (!next || next.status === "waiting_input" || entry.ctl.signal.aborted) return;
    entry.taskId = next.id;
    if (await this.execute(next, entry.ctl)) return;
    // Not taken: another replica runs the session's queue (it picks the next task when done).
    entry.taskId = null;
    // A cancel that reached this replica while it tried to take the task: for the one that has it.
    if (entry.ctl.signal.reason === ("cancel" satisfies StopReason)) {
      await this.d.bus.notify(CHANNELS.tasks, { cancel: next.id }).catch((err) => this.d.log.warn("cancel not sent to the replica running the task", { task_id: next.id, err }));
    }
  }

  /** A finished playbook run's workspace, stopped (its files stay; a follow-up turn starts it again). */
  private async stopRunWorkspace(sessionId: string) {
    try {
      const ws = await this.d.workspaces.forSession(sessionId);
      if (ws && (ws.status === "running" || ws.status === "starting")) await this.d.workspaces.stop(ws.id);
    } catch (err) {
      this.d.log.warn("a finished playbook run's workspace was not stopped (the idle timeout will)", { session_id: sessionId, err });
    }
  }

  /**
   * Takes the task (its lease, leases.ts) and runs it to its outcome. False when it could not be
   * leased: another replica holds it (running it, or opening its session), or ended it.
   */
  private async execute(task: TaskRow, ctl: AbortController): Promise<boolean> {
    const resumed = task.status === "running";
    // A running task is resumed only under this replica's lease, before anything else is done with it.
    if (resumed) {
      let leased: TaskRow | undefined;
      try {
        leased = await this.leases.acquire(task.id);
      } catch (err) {
        // The database failed the take: not taken now. Looked at again shortly, not in a tight loop.
        this.d.log.warn("task lease not taken; trying again in a second", { task_id: task.id, err });
        setTimeout(() => this.pump(task.session_id), ACQUIRE_RETRY_MS).unref?.();
        return false;
      }
      if (!leased) return false;
      task = this.took(leased, task.lease_owner);
    }
    let outcome: Outcome;
    let stopHold = () => {};
    try {
      const profile = await this.d.profiles.forTask(task.user_id, task.profile_id);
      if (task.status === "queued") {
        const now = this.d.now();
        const claimed = await this.d.tasks.claim(task.id, now, this.leases.terms(now));
        // Ended meanwhile (cancelled, or failed by a disabled account): nothing to run. Still
        // queued: another replica holds it while it opens the session, and runs it itself.
        if (!claimed) return (await this.d.tasks.byId(task.id))?.status !== "queued";
        task = this.took(claimed, null);
      }
      // Renewed while it runs; lost (taken over after a stall, or ended elsewhere): the loop stops, writing nothing more.
      stopHold = this.leases.hold(
        task.id,
        () => {
          this.d.log.warn("task lease lost: another replica continues it, or it ended elsewhere", { task_id: task.id, session_id: task.session_id });
          ctl.abort("lease-lost" satisfies StopReason);
        },
        (err) => this.d.log.warn("task lease not renewed", { task_id: task.id, err }),
      );
      // Cancelled (or the server stopping) while it was being started: the loop does not begin.
      const { signal } = ctl;
      outcome = signal.aborted ? stopOutcome(signal.reason) : await this.loop.run(task, profile, signal, resumed);
    } catch (e) {
      outcome =
        e instanceof AppError
          ? { failed: { code: e.code, message: e.message } }
          : { failed: { code: "INTERNAL_ERROR", message: "Internal error while starting the task" } };
      if (!(e instanceof AppError)) this.d.log.error("task failed to start", { task_id: task.id, err: e });
    } finally {
      stopHold();
    }
    // Lost meanwhile, whatever the loop answered: another replica has the task (or ended it); this one writes nothing more.
    if (ctl.signal.reason === ("lease-lost" satisfies StopReason)) outcome = "interrupted";
    await this.settle(task, outcome, ctl.signal.reason);
    return true;
  }

  /**
   * The task as just leased. On PostgreSQL the session's cached transcript is dropped first:
   * another replica may have added steps since this one last read them.
   */
  private took(task: TaskRow, previousOwner: string | null): TaskRow {
    if (!this.leases.shared) return task;
    this.d.transcript.release(task.session_id);
    if (previousOwner && previousOwner !== this.leases.owner) {
      this.d.log.info("task taken over from another replica", { task_id: task.id, session_id: task.session_id, from_replica: previousOwner });
    }
    return task;
  }

  private async settle(task: TaskRow, outcome: Outcome, reason: unknown) {
    // Lease lost: someone else has the task now. Shutdown: its lease is given up, so that another
    // replica continues it at once rather than after the lease.
    if (outcome === "interrupted") return reason === "shutdown" ? this.handOver(task) : undefined;
    if (outcome === "waiting") {
      // Whichever replica takes the answer resumes it.
      await this.release(task);
      return this.answerTimer.arm((await this.d.tasks.byId(task.id))?.answer_due_at ?? null);
    }
    // As the lease's holder: a replica that lost the lease without noticing yet (stalled past it)
    // does not end a task another replica has taken over.
    if (outcome === "completed" || outcome === "cancelled") await this.end(task, outcome, null, undefined, true);
    else await this.end(task, "failed", outcome.failed, undefined, true);
  }

  private async release(task: TaskRow) {
    await this.leases.release(task.id).catch((err) => this.d.log.warn("task lease not released", { task_id: task.id, err }));
  }

  /**
   * A clean stop: the task's lease is released and the other replicas are told (`{ resume:
   * session id }`), so one of them continues it now rather than at its next takeover round.
   */
  private async handOver(task: TaskRow) {
    await this.release(task);
    if (this.leases.shared) await this.d.bus.notify(CHANNELS.tasks, { resume: task.session_id }).catch((err) => this.d.log.warn("stopped task not announced to the other replicas", { task_id: task.id, err }));
  }

  /** Ends the task completed or cancelled (a playbook run also notifies its owner, in the same transaction). See `end`. */
  private finish(task: TaskRow, status: "completed" | "cancelled", question?: string): Promise<boolean> {
    return this.end(task, status, null, question);
  }

  /** Marks the task failed and queues the platform notification in the same transaction. See `end`. */
  private fail(task: TaskRow, code: ErrorCode, message: string, question?: string): Promise<boolean> {
    return this.end(task, "failed", { code, message }, question);
  }

  /**
   * Ends the task, if its status is still the one read (`task.status`): a task that moved on
   * meanwhile (taken by the queue, answered, ended) is left alone, and false returned. In the same
   * transaction: the result of the question it waited on (`question`, for its pending tool call),
   * and the platform notification (a playbook run's end; a failed task's). Its frames follow.
   * `asHolder` (the loop that ran it ends it): only while this replica still holds its lease.
   */
  private async end(task: TaskRow, status: "completed" | "cancelled" | "failed", error: { code: ErrorCode; message: string } | null, question?: string, asHolder = false): Promise<boolean> {
    const toolUseId = question !== undefined ? task.pending_tool_use_id : null;
    const patch: Partial<TaskRow> = { status, finished_at: this.d.now(), pending_tool_use_id: null, running_exec: null, answer_due_at: null, lease_owner: null, lease_expires_at: null };
    if (error) Object.assign(patch, { error_code: error.code, error_message: error.message });
    // (A queued task that failed before it was claimed holds no lease: ended as read.)
    const holder = asHolder && this.leases.shared && task.lease_owner === this.leases.owner ? this.leases.owner : undefined;
    const leftover = toolUseId ? null : await this.stopLeftover(task, asHolder);
    // A cancelled turn ends with its turn.done too (the interface: task:done "fires alongside
    // turn.done" for session tasks): its result_text is what the client was shown of it.
    if (status === "cancelled") patch.result_text = await this.cancelledText(task);
    const ended = await transact(this.d.db, (tx) => this.endIn(tx, task, status, patch, error, toolUseId, question, holder, leftover));
    if (!ended) return false;
    if (task.playbook_id) this.finishedRuns.add(task.session_id);
    else this.finishedRuns.delete(task.session_id);
    if (toolUseId) this.d.transcript.release(task.session_id);
    if (task.playbook_id || error) this.d.notifications.wake();
    this.ended(task, status);
    if (toolUseId) this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: toolUseId, output: question!, is_error: true });
    if (error) this.publish(task.session_id, { type: "task:failed", task_id: task.id, error: error.message, code: error.code });
    else {
      if (status === "cancelled") {
        const row = (await this.d.tasks.byId(task.id)) ?? task;
        this.publish(task.session_id, {
          type: "turn.done",
          task_id: task.id,
          result_text: patch.result_text ?? "",
          input_tokens: row.input_tokens,
          output_tokens: row.output_tokens,
          cost_usd: roundUsd(row.cost_usd),
        });
      }
      this.publish(task.session_id, { type: "task:done", task_id: task.id, status: status as "completed" | "cancelled" });
    }
    return true;
  }

  /**
   * A cancelled task's result: the answer it was streaming when cancelled (its trailing text in the
   * log: what a client shows of it), else its last complete text, else "" (cancelled before any).
   */
  private async cancelledText(task: TaskRow): Promise<string> {
    const streaming = await this.d.eventLog.trailingText(task.session_id, task.id);
    if (streaming) return streaming;
    return this.d.transcript.lastText(await this.d.transcript.steps(task.session_id), task.id);
  }

  /**
   * A task ending while its in-flight call's command runs on without a server watching it (one
   * stopped by kill -9 or a crash; a replica that no longer answers), before the task resumed —
   * cancelled, or failed by a resumed run before it reached the call: what is left of the command
   * is killed first (only if its process is still the one recorded), so it has no effect after the
   * task ended. Not when the task has moved on since it was read, nor (`asHolder`) once this
   * replica no longer holds its lease: its command would then be another run's.
   */
  private async stopLeftover(task: TaskRow, asHolder: boolean): Promise<{ toolUseId: string; fate: LeftoverFate } | null> {
    const row = await this.d.tasks.byId(task.id);
    if (!row?.running_exec || !row.pending_tool_use_id || row.status !== task.status) return null;
    if (asHolder && this.leases.shared && row.lease_owner !== this.leases.owner) return null;
    const fate = await stopLeftover(this.d.workspaces, row.running_exec, (err) => this.d.log.warn("leftover command of an ending task not stopped", { task_id: task.id, err }));
    if (fate === "stopped") this.d.log.info("leftover command of an ending task stopped", { task_id: task.id, workspace: row.running_exec.workspace });
    return { toolUseId: row.pending_tool_use_id, fate };
  }

  /**
   * `end`'s transaction: the conditional status change, the question's result and the platform
   * notification commit together (or, the task having moved on, nothing is written).
   */
  private *endIn(
    tx: DB,
    task: TaskRow,
    status: "completed" | "cancelled" | "failed",
    patch: Partial<TaskRow>,
    error: { code: ErrorCode; message: string } | null,
    toolUseId: string | null,
    question: string | undefined,
    holder: string | undefined,
    leftover: { toolUseId: string; fate: LeftoverFate } | null,
  ): Unit<boolean> {
    // A tool call still marked in flight (it had started: the workspace died under it, the task
    // failed before a resumed run reached it): its result says so, not "not run" — the model must
    // not take a command that may have had its effects for one that never ran.
    // The row as this transaction reads it: the call in flight, and a playbook run's cost and turns.
    const current = toolUseId && !task.playbook_id ? null : yield* this.d.tasks.byIdIn(tx, task.id);
    const inFlight = toolUseId ? null : (current?.pending_tool_use_id ?? null);
    if (!(yield* this.d.tasks.updateIn(tx, task.id, patch, task.status, holder))) return false;
    if (toolUseId) yield* this.d.transcript.addToolResultIn(tx, task.session_id, task.id, { type: "tool_result", tool_use_id: toolUseId, content: question!, is_error: true });
    else if (inFlight) {
      const why = error ? `the task failed while this tool was running (${error.code}: ${error.message})` : "the task ended while this tool was running";
      const content = endedResult(why, leftover?.toolUseId === inFlight ? leftover.fate : null);
      yield* this.d.transcript.addToolResultIn(tx, task.session_id, task.id, { type: "tool_result", tool_use_id: inFlight, content, is_error: true });
    }
    if (task.playbook_id) yield* this.runEnded(current ?? task, status, error && `${error.code}: ${error.message}`, tx);
    else if (error) yield* this.d.notifications.taskFailed({ userId: task.user_id, taskId: task.id, code: error.code, error: error.message }, tx);
    return true;
  }

  /** /metrics: the task's duration from its start (never started: its submission) to now. */
  private ended(task: TaskRow, status: "completed" | "cancelled" | "failed") {
    this.d.metrics?.taskEnded(status, (this.d.now() - (task.started_at ?? task.created_at)) / 1000);
  }

  /**
   * The platform notification at the end of every playbook run: status, cost and (failed) why (a
   * unit of `end`'s transaction; `t` as that transaction read it, its cost and turns final).
   */
  private *runEnded(t: TaskRow, status: "completed" | "cancelled" | "failed", why: string | null, tx: DB): Unit<void> {
    const cost = `cost $${formatUsd(t.cost_usd)}, ${t.turns} model request${t.turns === 1 ? "" : "s"}`;
    const playbookName = this.d.playbookName ? yield* this.d.playbookName(t.playbook_id!, tx) : null;
    yield* this.d.notifications.playbookRunEnded({ userId: t.user_id, playbookId: t.playbook_id!, taskId: t.id, playbookName, status, detail: why ? `${why} (${cost})` : cost }, tx);
  }

  /** Fails the tasks whose question waited past their answer_timeout; re-arms for the next one. */
  async expireAnswers() {
    const now = this.d.now();
    for (const task of await this.d.tasks.answersDue(now)) {
      const message = `No answer within the playbook's answer_timeout (${Math.round((task.answer_timeout_ms ?? 0) / 1000)} s): the run ends`;
      // Answered or cancelled meanwhile: nothing to end.
      if (await this.fail(task, "TURN_LIMIT_EXCEEDED", message, `[${message}]`)) this.pump(task.session_id);
    }
    this.answerTimer.reset(await this.d.tasks.nextAnswerDue());
  }

  async cancel(userId: string, taskId: string): Promise<TaskRow> {
    let asked = false;
    for (;;) {
      const task = await this.d.tasks.get(userId, taskId);
      if (isFinal(task)) return task;
      const entry = this.running.get(task.session_id);
      if (entry?.picking) {
        // The queue is picking the session's next task, maybe this one: look again once it has.
        await entry.picking;
        continue;
      }
      if (entry?.taskId === task.id && task.status !== "waiting_input") {
        // Taken by the queue (running, or being started): its loop ends it cancelled — answered
        // once it has (a process tree killed within ~2 s), so the 202 says `cancelled` and a crash
        // before it cannot lose a cancel the caller was told of. Not ended within STOP_WAIT_MS:
        // answered as it stands, the loop still ending it.
        entry.ctl.abort("cancel" satisfies StopReason);
        return (await this.waitEnded(task.id, LOCAL_POLL_MS)).row ?? (await this.d.tasks.byId(task.id))!;
      }
      if (!asked && this.leases.heldElsewhere(task)) {
        // Running on another replica: its loop ends it cancelled. Not ended while its lease held
        // (or within STOP_WAIT_MS): ended here, below — its replica then loses the lease.
        asked = true;
        const ended = await this.cancelElsewhere(task);
        if (ended) return ended;
        continue;
      }
      const question = task.status === "waiting_input" && task.pending_tool_use_id ? CANCELLED_BY_USER : undefined;
      if (await this.finish(task, "cancelled", question)) {
        this.pump(task.session_id);
        return (await this.d.tasks.byId(task.id))!;
      }
      // Its status changed meanwhile (the queue took it, an answer came): look again.
    }
  }

  async answer(userId: string, taskId: string, typed: string): Promise<TaskRow> {
    const task = await this.d.tasks.get(userId, taskId);
    const notWaiting = (t: TaskRow) => Errors.validation("task_id", `Task ${t.id} is not waiting for an answer (status ${t.status})`, { status: t.status });
    const toolUseId = task.pending_tool_use_id;
    if (task.status !== "waiting_input" || !toolUseId) throw notWaiting(task);
    const answer = await this.scrubTyped(userId, typed);
    // The answer stored and the task running again, only if it still waits (not cancelled,
    // expired or answered meanwhile).
    const answered = await transact(this.d.db, (tx) => this.answerIn(tx, task, toolUseId, answer));
    if (!answered) throw notWaiting((await this.d.tasks.byId(task.id)) ?? task);
    this.d.transcript.release(task.session_id);
    this.publish(task.session_id, { type: "task:tool_result", task_id: task.id, tool: ASK_USER, tool_use_id: toolUseId, output: answer, is_error: false });
    this.pump(task.session_id);
    return (await this.d.tasks.byId(task.id))!;
  }

  /** `answer`'s transaction: the task running again and the answer stored, together, only while it still waits. */
  private *answerIn(tx: DB, task: TaskRow, toolUseId: string, answer: string): Unit<boolean> {
    if (!(yield* this.d.tasks.updateIn(tx, task.id, { status: "running", pending_tool_use_id: null, answer_due_at: null }, "waiting_input"))) return false;
    yield* this.d.transcript.addToolResultIn(tx, task.session_id, task.id, { type: "tool_result", tool_use_id: toolUseId, content: answer });
    return true;
  }

  /**
   * A task running on another replica: asks it to cancel the task (`{ cancel }` on the bus; its
   * loop stops as a local cancel does) and waits for the task to end. The task as ended, or null
   * when it has not ended within STOP_WAIT_MS or its lease ran out meanwhile (the replica is gone).
   */
  private async cancelElsewhere(task: TaskRow): Promise<TaskRow | null> {
    try {
      await this.d.bus.notify(CHANNELS.tasks, { cancel: task.id });
    } catch (err) {
      this.d.log.warn("cancel not sent to the replica running the task", { task_id: task.id, replica: task.lease_owner, err });
      return null;
    }
    const { row, timedOut } = await this.waitEnded(task.id, REMOTE_POLL_MS, (row) => !this.leases.heldElsewhere(row));
    if (timedOut) this.d.log.warn("the replica running the task did not cancel it in time: ending it here", { task_id: task.id, replica: task.lease_owner });
    return row;
  }

  /**
   * The task once it has ended (read every `pollMs`), or null: when it is gone, when `giveUp` says
   * so, or — `timedOut` — when it has not ended within STOP_WAIT_MS.
   */
  private async waitEnded(taskId: string, pollMs: number, giveUp?: (row: TaskRow) => boolean): Promise<{ row: TaskRow | null; timedOut: boolean }> {
    const deadline = performance.now() + STOP_WAIT_MS;
    while (performance.now() < deadline) {
      await Bun.sleep(pollMs);
      const row = await this.d.tasks.byId(taskId);
      if (!row || isFinal(row)) return { row: row ?? null, timedOut: false };
      if (giveUp?.(row)) return { row: null, timedOut: false };
    }
    return { row: null, timedOut: true };
  }

  /**
   * A message from another replica: `cancel` (a task id): the task's loop, if it runs here, stops
   * as for a local cancel; `resume` (a session id): a replica stopping cleanly gave the session's
   * task up, pumped here (whichever replica takes its lease first continues it).
   */
  private onRequest(message: Record<string, unknown>) {
    if (typeof message.resume === "string") {
      this.d.log.info("resuming a task another replica gave up as it stopped", { session_id: message.resume, from_replica: message._from });
      return this.pump(message.resume);
    }
    const taskId = message.cancel;
    if (typeof taskId !== "string") return;
    for (const entry of this.running.values()) {
      if (entry.taskId !== taskId) continue;
      this.d.log.info("task cancelled through another replica", { task_id: taskId, from_replica: message._from });
      entry.ctl.abort("cancel" satisfies StopReason);
    }
  }

  /**
   * Stops the session's running task (it ends cancelled), waiting a few seconds for it; before a
   * session is deleted. Running on another replica: that one is asked to cancel it.
   */
  async stopSession(sessionId: string) {
    this.finishedRuns.delete(sessionId);
    const entry = this.running.get(sessionId);
    entry?.ctl.abort("cancel" satisfies StopReason);
    const elsewhere = this.leases.shared ? (await this.d.tasks.activeInSession(sessionId)).filter((t) => this.leases.heldElsewhere(t)) : [];
    if (!entry && !elsewhere.length) return;
    await settledWithin(Promise.allSettled([entry?.done, ...elsewhere.map((t) => this.cancelElsewhere(t))]), STOP_WAIT_MS);
  }

  /**
   * Stops the session's running task as `stopSession` does, and holds the session's queue until
   * the returned release is called: a queued (or newly submitted) task does not start meanwhile —
   * it stays queued and starts at the release. Around a workspace removal, so the session's next
   * task runs on a fresh workspace, not on the one being removed (it would fail there).
   */
  async holdSession(sessionId: string): Promise<() => void> {
    this.held.set(sessionId, (this.held.get(sessionId) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = this.held.get(sessionId)! - 1;
      if (n > 0) this.held.set(sessionId, n);
      else this.held.delete(sessionId);
      this.pump(sessionId);
    };
    try {
      await this.stopSession(sessionId);
    } catch (e) {
      release();
      throw e;
    }
    return release;
  }

  /**
   * A disabled account: its queued tasks fail (FORBIDDEN), questions waiting for an answer are
   * cancelled, running tasks are cancelled (waiting a few seconds for each to end). Returns how
   * many tasks it ended.
   */
  async stopUser(userId: string, reason = "The account was disabled"): Promise<number> {
    const active = await this.d.tasks.activeForUser(userId);
    // Queued first, so a cancelled task's session does not start its next one.
    const failed = new Set<string>();
    for (const t of active.filter((t) => t.status === "queued")) {
      if (await this.fail(t, "FORBIDDEN", `${reason}: the task did not run`)) failed.add(t.id);
    }
    const waits: Promise<unknown>[] = [];
    for (const t of active) {
      // A queued task the queue took meanwhile is cancelled like a running one.
      if (failed.has(t.id)) continue;
      const entry = this.running.get(t.session_id);
      if (entry?.taskId === t.id && t.status !== "waiting_input") {
        entry.ctl.abort("cancel" satisfies StopReason);
        waits.push(entry.done);
      } else if (this.leases.heldElsewhere(t)) {
        // On another replica: cancelled there (or here once that one does not answer), all in parallel.
        waits.push(this.cancel(userId, t.id).catch((err) => this.d.log.warn("task not cancelled", { task_id: t.id, err })));
      } else await this.cancel(userId, t.id);
    }
    await settledWithin(Promise.allSettled(waits), STOP_WAIT_MS);
    return active.length;
  }

  /**
   * Before the server listens: the running tasks this start will resume that were cut off in a
   * model request have that request's streamed text removed from the log (AgentLoop.dropCutAnswer)
   * — a client resuming in the first milliseconds must not replay it and then get the answer again.
   * On PostgreSQL, only this replica's own tasks (another replica's are not its to touch). A failure
   * is logged: the resumed loop removes the text itself a moment later.
   */
  async prepareResume() {
    try {
      for (const task of await this.d.tasks.runningTasks(this.leases.shared ? this.leases.owner : undefined)) {
        // Only a task whose log ends in streamed text can have an answer to remove: the others'
        // transcripts are not read before the server listens.
        if (!(await this.d.eventLog.endsInText(task.session_id, task.id))) continue;
        await this.loop.dropCutAnswer(task);
        this.d.transcript.release(task.session_id);
      }
    } catch (err) {
      this.d.log.warn("interrupted answers not removed before listening (their tasks remove them when they resume)", { err });
    }
  }

  /**
   * At start: resume running tasks from their last step and start queued ones; watch answer
   * timeouts. One server (SQLite) takes every task; a replica (PostgreSQL) only those no live
   * replica holds (`takeOver`), and listens for cancels sent by the others.
   */
  async recover() {
    if (this.leases.shared) await this.d.bus.listen(CHANNELS.tasks, (m) => this.onRequest(m));
    const sessions = this.leases.shared ? await this.leases.orphaned({ ours: true }) : await this.d.tasks.sessionsWithWork();
    if (sessions.length) this.d.log.info("resuming tasks", { sessions: sessions.length });
    for (const sid of sessions) this.pump(sid);
    this.answerTimer.reset(await this.d.tasks.nextAnswerDue());
  }

  /**
   * PostgreSQL replicas, every heartbeat: sessions whose work no live replica holds (a replica died
   * or stopped; leases.ts `orphaned`) are pumped here. Several replicas may try at once; the lease
   * decides which one runs each task. The answer timer is re-armed from the table too.
   */
  async takeOver() {
    if (!this.leases.shared || this.stopped) return;
    const sessions = (await this.leases.orphaned()).filter((sid) => !this.running.has(sid));
    if (sessions.length) this.d.log.debug("looking at sessions no replica holds", { sessions: sessions.length });
    for (const sid of sessions) this.pump(sid);
    // Questions asked on a replica that has gone time out here (the timer keeps the earliest).
    this.answerTimer.arm(await this.d.tasks.nextAnswerDue());
  }

  /**
   * On shutdown: stop every loop, leaving its task `running` for `recover` at the next start (or,
   * its lease released, for another replica at once).
   */
  async stop() {
    this.stopped = true;
    this.answerTimer.stop();
    const entries = [...this.running.values()];
    for (const e of entries) e.ctl.abort("shutdown");
    await settledWithin(Promise.allSettled(entries.map((e) => e.done)), STOP_WAIT_MS);
    await this.d.eventLog.flush();
  }

  /** Resolves once no task of the session is running in this process (tests, shutdown). */
  async idle(sessionId: string) {
    while (this.running.has(sessionId)) await this.running.get(sessionId)!.done;
  }
}
