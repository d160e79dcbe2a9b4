/**
 * The workspace service (`s.workspaces`): one hardened Docker container per agent session
 * (`ctr_…`, Docker name `runcell-<ctr id>`) with a named volume at /workspace that outlives
 * container restarts and idle stops and is removed with the session. Lifecycle and queries come
 * from lifecycle.ts; this adds what runs inside the container (exec, files), signed file URLs and
 * the background workers (idle stop, reconciliation).
 */
import type Docker from "dockerode";
import { AppError, Errors } from "../lib/errors.ts";
import { checkChain, entryType, readAll } from "./archive.ts";
import { dockerMessage } from "./docker.ts";
import { ContainerNotRunning, type ExecOptions, type ExecResult, isRunning, runExec } from "./exec.ts";
import { type DirListing, type Download, listDirectory, openDownload, writeViaExec } from "./files.ts";
import { idleCheckEveryMs, stopIdle } from "./idle.ts";
import { WorkspaceLifecycle, type WorkspaceDeps } from "./lifecycle.ts";
import { relativePath, resolveWorkspacePath, WORKSPACE_ROOT } from "./paths.ts";
import { reconcile, type ReconcileReport } from "./reconcile.ts";
import { FileUrlSigner, loadSigningKey } from "./signing.ts";
import type { WorkspaceRow } from "./store.ts";
import { intervalWorker } from "../lib/worker.ts";

export type { ProfileRow, WorkspaceDeps, WorkspaceRow } from "./lifecycle.ts";

/** Largest file readFile / downloads hand out (bytes). */
export const MAX_FILE_BYTES = 100 * 1024 * 1024;
export const RECONCILE_EVERY_MS = 5 * 60_000;

export class Workspaces extends WorkspaceLifecycle {
  /** Running execs per workspace: the idle stop never stops a container that is working. */
  readonly inflight = new Map<string, number>();
  maxFileBytes = MAX_FILE_BYTES;
  private signer: FileUrlSigner;

  constructor(d: WorkspaceDeps) {
    super(d);
    this.signer = new FileUrlSigner(loadSigningKey(d.settings, d.sealer), d.config.publicUrl, d.now);
  }

  /** CONCURRENCY_LIMIT now if the session's next turn would start a container with no room. */
  assertRoom(sessionId: string, profile: { id: string; limits: { max_concurrency: number } }) {
    this.store.assertRoom(sessionId, profile.id, profile.limits.max_concurrency);
  }

  // ------------------------------------------------------------------------------------------
  // Work inside the container

  async exec(sessionId: string, opts: ExecOptions): Promise<ExecResult> {
    if (!Array.isArray(opts.cmd) || opts.cmd.length === 0 || opts.cmd.some((a) => typeof a !== "string")) {
      throw Errors.validation("cmd", "cmd must be a non-empty array of strings");
    }
    let row = await this.runningRow(sessionId);
    this.inflight.set(row.id, (this.inflight.get(row.id) ?? 0) + 1);
    this.store.touch(row.id);
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const r = await runExec(this.container(row.docker_id!), opts, (e) => this.log.warn("could not kill an exec", { workspace: row.id, error: dockerMessage(e) }));
          if (!r.timedOut && !r.cancelled && (r.exitCode === null || r.exitCode >= 128)) await this.assertAlive(row);
          return r;
        } catch (e) {
          if (!(e instanceof ContainerNotRunning)) throw this.toApiError(e, "Command could not run in the workspace");
          const fresh = this.store.byId(row.id);
          // Stopped for idleness between our check and the exec: start it and run once more.
          if (attempt === 0 && fresh?.status === "stopped" && !fresh.error) {
            row = await this.ensureRunning(sessionId);
            continue;
          }
          throw this.markDead(row, e.message);
        }
      }
    } finally {
      const n = (this.inflight.get(row.id) ?? 1) - 1;
      if (n > 0) this.inflight.set(row.id, n);
      else this.inflight.delete(row.id);
      this.store.touch(row.id);
    }
  }

  private async runningRow(sessionId: string): Promise<WorkspaceRow> {
    const row = this.store.bySession(sessionId);
    if (!row) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    return row.status === "running" && row.docker_id ? row : this.ensureRunning(sessionId);
  }

  /**
   * After an exec that died of a signal: was it the container? Docker records a killed container's
   * state some tens of milliseconds after its processes die, so look a few times.
   */
  private async assertAlive(row: WorkspaceRow) {
    for (let i = 0; i < 5; i++) {
      const st = await this.guard(() => isRunning(this.container(row.docker_id!)));
      if (!st.running) throw this.markDead(row, st.detail);
      await Bun.sleep(60);
    }
  }

  private markDead(row: WorkspaceRow, detail: string): AppError {
    const message = `The workspace container stopped unexpectedly (${detail}); it is restarted on the session's next turn`;
    if (this.store.byId(row.id)) this.store.update(row.id, { status: "failed", error: message });
    this.log.warn("workspace container died", { workspace: row.id, session: row.session_id, detail });
    return new AppError("CONTAINER_FAILED", message);
  }

  /** The row's container for archive access (running or stopped). */
  private containerOf(row: WorkspaceRow): Docker.Container {
    if (!row.docker_id) throw new AppError("CONTAINER_FAILED", `Workspace ${row.id} has no container (${row.error ?? row.status}); it is created on the session's next turn`);
    return this.container(row.docker_id);
  }

  async readFile(sessionId: string, path: string): Promise<Uint8Array> {
    const abs = resolveWorkspacePath(path);
    const row = this.store.bySession(sessionId);
    if (!row) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    const c = this.containerOf(row);
    return this.guard(async () => {
      const r = await checkChain(c, abs);
      if (!r.stat) throw Errors.notFound("File", abs);
      if (entryType(r.stat.mode) === "dir") throw Errors.validation("path", `${abs} is a directory, not a file`);
      return readAll(c, r.path, this.maxFileBytes);
    }, `Could not read ${abs}`);
  }

  async writeFile(sessionId: string, path: string, data: string | Uint8Array): Promise<void> {
    const abs = resolveWorkspacePath(path);
    if (abs === WORKSPACE_ROOT) throw Errors.validation("path", `${WORKSPACE_ROOT} is a directory, not a file`);
    const row = await this.runningRow(sessionId);
    await this.guard(() => writeViaExec(this, row, abs, data), `Could not write ${abs}`);
    this.store.touch(row.id);
  }

  async listDir(sessionId: string, path: string, page: { limit?: number; cursor?: string } = {}): Promise<DirListing> {
    const abs = resolveWorkspacePath(path);
    const row = await this.runningRow(sessionId);
    return this.guard(() => listDirectory(this, row, abs, page), `Could not list ${abs}`);
  }

  /** Opens a workspace file for streaming (downloads, signed URLs); never starts the container. */
  async openDownload(row: WorkspaceRow, path: string): Promise<Download> {
    const abs = resolveWorkspacePath(path);
    const c = this.containerOf(row);
    return this.guard(() => openDownload(c, abs, this.maxFileBytes), `Could not read ${abs}`);
  }

  /** Runs an exec for the file helpers (no activity bookkeeping; callers do it). */
  execIn(row: WorkspaceRow, opts: ExecOptions): Promise<ExecResult> {
    return runExec(this.containerOf(row), opts).catch((e) => {
      throw e instanceof ContainerNotRunning ? this.markDead(row, e.message) : e;
    });
  }

  // ------------------------------------------------------------------------------------------
  // Background work

  /** Stops workspaces idle longer than the configured timeout; returns their ids. */
  stopIdle(): Promise<string[]> {
    return stopIdle({ ...this.bg(), inflight: this.inflight, now: this.d.now, idleMs: this.d.config.workspaceIdleTimeoutMs });
  }

  /** Reconciles records with Docker (this instance's labels only). */
  reconcile(): Promise<ReconcileReport> {
    return reconcile({ ...this.bg(), instanceId: this.instanceId });
  }

  private bg() {
    return { client: this.client, store: this.store, locks: this.locks, log: this.log };
  }

  /** The reconcile (at start, then every 5 min) and idle-stop workers for services.ts. */
  workers() {
    return [
      intervalWorker(this.log, "workspace-reconcile", RECONCILE_EVERY_MS, () => this.reconcile(), { runAtStart: true }),
      intervalWorker(this.log, "workspace-idle-stop", idleCheckEveryMs(this.d.config.workspaceIdleTimeoutMs), () => this.stopIdle()),
    ];
  }

  // ------------------------------------------------------------------------------------------
  // Signed URLs

  signedFileUrl(ctrId: string, path: string, ttlSec = 3600): string {
    return this.signer.url(ctrId, relativePath(resolveWorkspacePath(path)), ttlSec);
  }

  verifyFileUrl(ctrId: string, path: string, exp: string | undefined, sig: string | undefined): boolean {
    let rel: string;
    try {
      rel = relativePath(resolveWorkspacePath(path));
    } catch {
      return false;
    }
    return this.signer.verify(ctrId, rel, exp, sig);
  }
}
