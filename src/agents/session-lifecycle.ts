/**
 * Sessions as things with a container: opening one (the row, its running workspace, the
 * `session.ready` frame) and deleting one (its running work stopped through `onDelete`, then the
 * workspace, the subscribers and the rows). The task queue (orchestrator.ts) opens a session when
 * a task arrives without one; REST and the stream open one for `session.start`.
 */
import { type HoldingHook, withHolds } from "../lib/holds.ts";
import type { DB } from "../db/client.ts";
import type { RepositoryConfig } from "../db/schema.ts";
import { transact, type Unit } from "../db/unit.ts";
import type { EventStore } from "../events/log.ts";
import type { Hub } from "../events/hub.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { AgentMetricsDep, ProfileRow, ProfilesDep, SecretsDep, WorkspaceRow, WorkspacesDep } from "./deps.ts";
import type { AgentSessions, SessionRow } from "./sessions.ts";
import type { TaskRow } from "./tasks.ts";

export interface SessionHooks {
  /**
   * Called synchronously once a new session exists (its transaction committed, with its first
   * task when it has one), before its workspace is created and `session.ready` is published.
   */
  onSession?: (sessionId: string, firstTask?: TaskRow) => void;
}

export interface OpenedSession {
  session: SessionRow;
  task: TaskRow | undefined;
  workspace: WorkspaceRow | null;
  /** Set when the workspace could not start and a task was created with the session: the caller fails that task. */
  error: AppError | null;
}

export interface SessionLifecycleDeps {
  db: DB;
  hub: Hub;
  eventLog: EventStore;
  sessions: AgentSessions;
  profiles: ProfilesDep;
  secrets: SecretsDep;
  workspaces: WorkspacesDep;
  /** /metrics: session.ready latency (wired by the app). */
  metrics?: Pick<AgentMetricsDep, "sessionReady">;
}

export class SessionLifecycle {
  /**
   * Run before a session is purged (the task queue stops the session's running task). A hook may
   * return a release, called once the purge is over: the queue holds the session meanwhile, so a
   * queued task does not start on the workspace being removed (it goes with the session's rows).
   */
  onDelete: HoldingHook[] = [];
  /** Sessions known to hold their `session.ready` (ensureRunning's check), until deleted. */
  private announced = new Set<string>();
  /** Deletes under way here, by session id. */
  private deleting = new Map<string, Promise<void>>();

  constructor(private d: SessionLifecycleDeps) {}

  /**
   * Creates a session (and, with `withTask`, its first task in the same transaction) with its
   * running workspace, and publishes `session.ready`. A workspace that cannot start rolls the
   * session back — unless a task came with it: then the session stays, `session.ready` names its
   * workspace record (failed), and the task fails with the error (`error`).
   */
  async open(
    userId: string,
    profile: ProfileRow,
    title: string | null,
    hooks: SessionHooks = {},
    withTask?: (tx: DB, session: SessionRow) => Unit<TaskRow>,
    repositories: RepositoryConfig[] | null = null,
  ): Promise<OpenedSession> {
    const started = performance.now();
    // The env reaches the workspace per exec; a secret it names that is missing is refused now.
    await this.d.secrets.resolveEnv(userId, profile.env);
    const { session, task } = await transact(this.d.db, (tx) => this.createIn(tx, userId, profile, title, withTask, repositories));
    hooks.onSession?.(session.id, task);
    let ws: WorkspaceRow;
    try {
      ws = await this.d.workspaces.createForSession({ userId, sessionId: session.id, profile });
    } catch (e) {
      if (task && e instanceof AppError && e.code === "CONTAINER_FAILED") {
        // The session stays (its task fails with the error; a later turn starts the workspace
        // again), so it is announced like any new session, with the workspace record it has.
        // With no host to place it on there is no record: the session is still announced.
        const failed = await this.d.workspaces.forSession(session.id).catch(() => null);
        this.publishReady(session.id, failed, profile.id);
        return { session, task, workspace: null, error: e };
      }
      await this.purge(session.id, { rollback: true });
      throw e;
    }
    this.publishReady(session.id, ws, profile.id);
    this.d.metrics?.sessionReady((performance.now() - started) / 1000);
    return { session, task, workspace: ws, error: null };
  }

  /**
   * The session's workspace, running, for its next task. A session never announced — its opening
   * was cut off by a crash or kill -9 before `session.ready`, whether a task came with it or not —
   * is announced once its workspace starts here (or, when it cannot start, with the workspace
   * record it has, as `open` does); one that was is not announced again.
   */
  async ensureRunning(sessionId: string, profileId: string): Promise<WorkspaceRow> {
    let ws: WorkspaceRow | null = null;
    let failed: AppError | null = null;
    try {
      ws = await this.d.workspaces.ensureRunning(sessionId);
    } catch (e) {
      if (!(e instanceof AppError && e.code === "CONTAINER_FAILED")) throw e;
      failed = e;
    }
    if (!(await this.wasAnnounced(sessionId))) this.publishReady(sessionId, ws ?? (await this.d.workspaces.forSession(sessionId).catch(() => null)), profileId);
    if (failed) throw failed;
    return ws!;
  }

  /** Whether `session.ready` is in the session's log: asked of the log once per session here, not at every task. */
  private async wasAnnounced(sessionId: string): Promise<boolean> {
    if (this.announced.has(sessionId)) return true;
    if (!(await this.d.eventLog.has(sessionId, "session.ready"))) return false;
    this.announced.add(sessionId);
    return true;
  }

  private publishReady(sessionId: string, ws: WorkspaceRow | null, profileId: string) {
    this.announced.add(sessionId);
    this.d.hub.publish(sessionId, { type: "session.ready", container_id: ws?.id ?? null, container_name: ws?.name ?? null, profile_id: profileId });
  }

  /** The session's row and, with `withTask`, its first task: they commit together. */
  private *createIn(
    tx: DB,
    userId: string,
    profile: ProfileRow,
    title: string | null,
    withTask: ((tx: DB, session: SessionRow) => Unit<TaskRow>) | undefined,
    repositories: RepositoryConfig[] | null,
  ): Unit<{ session: SessionRow; task: TaskRow | undefined }> {
    const session = yield* this.d.sessions.createIn(tx, userId, profile.id, title, repositories);
    const task = withTask ? yield* withTask(tx, session) : undefined;
    return { session, task };
  }

  /** `session.start` / `POST /v1/sessions`: a session and its workspace, without a task. */
  async start(userId: string, profileId: string, hooks: SessionHooks = {}): Promise<{ session: SessionRow; workspace: WorkspaceRow }> {
    const profile = await this.d.profiles.get(userId, profileId);
    const r = await this.open(userId, profile, null, hooks);
    return { session: r.session, workspace: r.workspace! };
  }

  /**
   * Stops the session's work, then removes its workspace (container and volume) and its records.
   * Exactly one of several deletes at once answers as the one that deleted: the others here wait
   * for it and then find no session (404) — or, should it have failed, try again; on another
   * replica, whoever does not remove the row is told NOT_FOUND.
   */
  async delete(userId: string, sessionId: string): Promise<void> {
    await this.d.sessions.get(userId, sessionId);
    const earlier = this.deleting.get(sessionId);
    if (earlier) {
      await earlier.catch(() => {});
      return this.delete(userId, sessionId);
    }
    const deleting = withHolds(this.onDelete, sessionId, () => this.purge(sessionId));
    this.deleting.set(sessionId, deleting);
    try {
      await deleting;
    } finally {
      this.deleting.delete(sessionId);
    }
  }

  /**
   * Removes a session's workspace, then its subscribers and rows (its tasks' usage kept: sessions.ts
   * `delete`; transcript and events cascade). A workspace that cannot be removed keeps the session
   * (the caller can retry), unless the session is being rolled back anyway.
   */
  private async purge(sessionId: string, opts: { rollback?: boolean } = {}) {
    try {
      await this.d.workspaces.removeForSession(sessionId);
    } catch (e) {
      if (!opts.rollback) throw e;
    }
    this.d.hub.closeSession(sessionId);
    this.d.eventLog.forget(sessionId);
    this.announced.delete(sessionId);
    // A session rolled back as it opened had no task the caller was told of: its usage is not kept.
    if (!(await this.d.sessions.delete(sessionId, !opts.rollback)) && !opts.rollback) throw Errors.notFound("Session", sessionId);
  }
}
