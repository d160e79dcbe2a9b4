/**
 * Workspaces: one hardened Docker container per agent session (`ctr_…`, Docker name
 * `runcell-<ctr id>`) with a named volume at /workspace that outlives container restarts and idle
 * stops and is removed with the session. The runtime calls createForSession / ensureRunning /
 * exec / readFile / writeFile / removeForSession; the HTTP routes call get / list / remove /
 * listDir / openDownload; the workers call stopIdle and reconcile. Lifecycle operations on one
 * workspace are serialised (KeyedMutex); the per-profile concurrency rule is enforced by the row
 * reservation in store.ts before any Docker object is created.
 */
import type Docker from "dockerode";
import { eq } from "drizzle-orm";
import type { Config } from "../config.ts";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type EnvValue, type profiles, workspaces, type WorkspaceSpec } from "../db/schema.ts";
import { ApiError, Errors } from "../http/errors.ts";
import type { Sealer } from "../lib/sealer.ts";
import type { Settings } from "../lib/settings.ts";
import type { Logger } from "../log.ts";
import { randomHex } from "../lib/crypto.ts";
import { checkChain, readAll } from "./archive.ts";
import { type DockerEngine, dockerMessage, dockerStatus, isUnreachable } from "./docker.ts";
import { ContainerNotRunning, type ExecOptions, type ExecResult, isRunning, runExec } from "./exec.ts";
import { listDirectory, openDownload, type DirListing, type Download, writeViaExec } from "./files.ts";
import { idleCheckEveryMs, stopIdle } from "./idle.ts";
import { ImagePuller } from "./image.ts";
import { KeyedMutex } from "./mutex.ts";
import { relativePath, resolveWorkspacePath, WORKSPACE_ROOT } from "./paths.ts";
import { reconcile, type ReconcileReport } from "./reconcile.ts";
import { FileUrlSigner, loadSigningKey } from "./signing.ts";
import { Provisioner } from "./provision.ts";
import { type WorkspaceRow, WorkspaceStore } from "./store.ts";

export type { WorkspaceRow } from "./store.ts";
export type ProfileRow = typeof profiles.$inferSelect;

export const INSTANCE_SETTING = "workspaces.instance_id";
/** Largest file readFile / downloads hand out (bytes). */
export const MAX_FILE_BYTES = 100 * 1024 * 1024;
export const RECONCILE_EVERY_MS = 5 * 60_000;

export interface WorkspaceDeps {
  db: DB;
  docker: DockerEngine;
  settings: Settings;
  sealer: Sealer;
  log: Logger;
  config: Pick<Config, "workspaceImage" | "workspaceIdleTimeoutMs" | "defaultMaxConcurrency" | "publicUrl" | "dockerHost">;
  now: () => number;
  /** Resolves a profile's env (secrets included) when a deleted workspace must be recreated. */
  resolveEnv?: (userId: string, env: Record<string, EnvValue>) => Record<string, string>;
}

export class Workspaces {
  readonly instanceId: string;
  readonly store: WorkspaceStore;
  readonly locks = new KeyedMutex();
  /** Running execs per workspace: the idle stop never stops a container that is working. */
  readonly inflight = new Map<string, number>();
  maxFileBytes = MAX_FILE_BYTES;
  private signer: FileUrlSigner;
  private provisioner: Provisioner;
  private client: Docker;
  private log: Logger;

  constructor(private d: WorkspaceDeps) {
    this.client = d.docker.client;
    this.log = d.log.child({ component: "workspaces" });
    this.store = new WorkspaceStore(d.db, d.now);
    this.instanceId = d.settings.get<string>(INSTANCE_SETTING) ?? this.newInstanceId();
    this.signer = new FileUrlSigner(loadSigningKey(d.settings, d.sealer), d.config.publicUrl, d.now);
    this.provisioner = new Provisioner(this.client, new ImagePuller(this.client, this.log), this.log, this.instanceId);
  }

  private newInstanceId(): string {
    const id = randomHex(8);
    this.d.settings.set(INSTANCE_SETTING, id);
    return id;
  }

  get config() {
    return this.d.config;
  }

  container(dockerId: string): Docker.Container {
    return this.client.getContainer(dockerId);
  }

  // ------------------------------------------------------------------------------------------
  // Lifecycle

  async createForSession(input: { userId: string; sessionId: string; profile: ProfileRow; env: Record<string, string> }): Promise<WorkspaceRow> {
    const { profile } = input;
    const id = newId("container");
    const now = this.d.now();
    const spec: WorkspaceSpec = { network: profile.network, memory_mb: profile.limits.memory_mb, cpus: profile.limits.cpus, pids: profile.limits.pids };
    const { row, created } = this.store.reserveNew(
      {
        id,
        user_id: input.userId,
        session_id: input.sessionId,
        profile_id: profile.id,
        name: `runcell-${id}`,
        image: profile.image || this.d.config.workspaceImage,
        docker_id: null,
        volume: `runcell-${id}`,
        spec,
        env_ciphertext: this.d.sealer.seal(JSON.stringify(input.env), `workspace-env:${id}`),
        status: "starting",
        error: null,
        last_active_at: now,
        created_at: now,
        updated_at: now,
      },
      this.limitOf(profile),
    );
    if (!created) return this.ensureRunning(input.sessionId);
    return this.locks.run(row.id, () => this.provision(row, input.env));
  }

  async ensureRunning(sessionId: string): Promise<WorkspaceRow> {
    const found = this.store.bySession(sessionId);
    if (!found) return this.recreateForSession(sessionId);
    return this.locks.run(found.id, async () => {
      let row = this.store.byId(found.id);
      if (!row) throw new ApiError("CONTAINER_FAILED", `The workspace of session ${sessionId} was removed`);
      if (row.status === "running" && row.docker_id) {
        const st = await this.guard(() => isRunning(this.container(row!.docker_id!)));
        if (st.running) {
          this.store.touch(row.id);
          return this.store.byId(row.id)!;
        }
        row = this.store.update(row.id, { status: "stopped", error: `container was not running (${st.detail})` })!;
      }
      row = this.store.reserveRestart(row.id, row.profile_id, this.limitOf(this.store.profile(row.profile_id)));
      return this.bringUp(row);
    });
  }

  /** The session has no workspace (it was deleted): make a new one from its profile. */
  private async recreateForSession(sessionId: string): Promise<WorkspaceRow> {
    const session = this.store.session(sessionId);
    if (!session) throw Errors.notFound("Session", sessionId);
    const profile = this.store.profile(session.profile_id);
    if (!profile || profile.user_id !== session.user_id) {
      throw new ApiError("CONTAINER_FAILED", `Session ${sessionId} has no workspace and its profile ${session.profile_id} no longer exists`);
    }
    if (!this.d.resolveEnv && Object.keys(profile.env).length) {
      throw new ApiError("CONTAINER_FAILED", `Session ${sessionId} has no workspace and its environment cannot be resolved here`);
    }
    const env = this.d.resolveEnv ? this.d.resolveEnv(session.user_id, profile.env) : {};
    return this.createForSession({ userId: session.user_id, sessionId, profile, env });
  }

  private limitOf(profile: ProfileRow | null): number {
    return profile?.limits.max_concurrency ?? this.d.config.defaultMaxConcurrency;
  }

  /** Starts the row's container, or recreates it (same volume) when it vanished. Row is `starting`. */
  private async bringUp(row: WorkspaceRow): Promise<WorkspaceRow> {
    if (row.docker_id) {
      try {
        await this.container(row.docker_id).start();
        return this.store.update(row.id, { status: "running", error: null, last_active_at: this.d.now() })!;
      } catch (e) {
        if (dockerStatus(e) === 304) return this.store.update(row.id, { status: "running", error: null, last_active_at: this.d.now() })!;
        if (dockerStatus(e) !== 404) throw this.fail(row, e);
        this.log.warn("workspace container vanished; recreating it on the same volume", { workspace: row.id, session: row.session_id });
        this.store.update(row.id, { docker_id: null });
      }
    }
    return this.provision(row);
  }

  /** Creates volume + container and starts it. The row is reserved (`starting`). */
  private async provision(row: WorkspaceRow, env?: Record<string, string>): Promise<WorkspaceRow> {
    const started = Date.now();
    try {
      env ??= row.env_ciphertext ? (JSON.parse(this.d.sealer.open(row.env_ciphertext, `workspace-env:${row.id}`)) as Record<string, string>) : {};
      const c = await this.provisioner.up(row, env);
      const up = this.store.update(row.id, { docker_id: c.id, status: "running", error: null, last_active_at: this.d.now() })!;
      this.log.info("workspace started", { workspace: row.id, session: row.session_id, image: row.image, ms: Date.now() - started });
      return up;
    } catch (e) {
      throw this.fail(row, e);
    }
  }

  /** Marks the row failed and turns any error into CONTAINER_FAILED (ApiErrors pass through). */
  private fail(row: WorkspaceRow, e: unknown): ApiError {
    const err = this.toApiError(e, `Workspace container for image "${row.image}" could not start`);
    this.store.update(row.id, { status: "failed", error: err.message });
    this.log.warn("workspace failed to start", { workspace: row.id, session: row.session_id, error: err.message });
    return err;
  }

  toApiError(e: unknown, what: string): ApiError {
    if (e instanceof ApiError) return e;
    if (isUnreachable(e)) {
      return new ApiError("CONTAINER_FAILED", `Docker is not reachable at ${this.d.config.dockerHost} (${(e as Error).message}); start the engine or pass --docker-host (runcell doctor checks it)`);
    }
    return new ApiError("CONTAINER_FAILED", `${what}: ${dockerMessage(e)}`);
  }

  /** Runs a Docker call, mapping engine failures to CONTAINER_FAILED. */
  private async guard<T>(fn: () => Promise<T>, what = "Docker call failed"): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw this.toApiError(e, what);
    }
  }

  async stop(ctrId: string): Promise<WorkspaceRow | null> {
    return this.locks.run(ctrId, async () => {
      const row = this.store.byId(ctrId);
      if (!row) return null;
      if (row.docker_id) {
        await this.guard(async () => {
          try {
            await this.container(row.docker_id!).stop({ t: 2 });
          } catch (e) {
            if (dockerStatus(e) !== 304 && dockerStatus(e) !== 404) throw e;
          }
        }, "Could not stop the workspace container");
      }
      return row.status === "running" || row.status === "starting" ? this.store.update(row.id, { status: "stopped" }) : row;
    });
  }

  /** Removes container, volume and row. Docker failures are logged; reconciliation finishes them. */
  private async removeRow(id: string): Promise<boolean> {
    return this.locks.run(id, async () => {
      const row = this.store.byId(id);
      if (!row) return false;
      try {
        await this.client
          .getContainer(row.docker_id ?? row.name)
          .remove({ force: true })
          .catch((e) => {
            if (dockerStatus(e) !== 404) throw e;
          });
        await this.client
          .getVolume(row.volume)
          .remove()
          .catch((e) => {
            if (dockerStatus(e) !== 404) throw e;
          });
      } catch (e) {
        this.log.warn("could not remove workspace container or volume; reconciliation will retry", { workspace: id, error: dockerMessage(e) });
      }
      this.store.delete(id);
      this.log.info("workspace removed", { workspace: id, session: row.session_id });
      return true;
    });
  }

  async removeForSession(sessionId: string): Promise<void> {
    const row = this.store.bySession(sessionId);
    if (row) await this.removeRow(row.id);
  }

  /** DELETE /v1/workspaces/:id: the caller's workspace, else NOT_FOUND. */
  async remove(userId: string, ctrId: string): Promise<void> {
    const row = this.store.byIdForUser(userId, ctrId);
    if (!row || !(await this.removeRow(row.id))) throw Errors.notFound("Workspace", ctrId);
  }

  /** DELETE /admin/workspaces/:id. */
  async removeById(ctrId: string): Promise<void> {
    if (!(await this.removeRow(ctrId))) throw Errors.notFound("Workspace", ctrId);
  }

  // ------------------------------------------------------------------------------------------
  // Queries

  get(userId: string, ctrId: string): WorkspaceRow {
    const row = this.store.byIdForUser(userId, ctrId);
    if (!row) throw Errors.notFound("Workspace", ctrId);
    return row;
  }

  byId(ctrId: string): WorkspaceRow | null {
    return this.store.byId(ctrId);
  }

  forSession(sessionId: string): WorkspaceRow | null {
    return this.store.bySession(sessionId);
  }

  list<T>(userId: string, p: PageParams, map: (r: WorkspaceRow) => T): Page<T> {
    const { rows, limit } = this.store.page(eq(workspaces.user_id, userId), p);
    return toPage(rows, limit, map);
  }

  listAll<T>(p: PageParams, map: (r: WorkspaceRow) => T): Page<T> {
    const { rows, limit } = this.store.page(undefined, p);
    return toPage(rows, limit, map);
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
    if (!row) throw new ApiError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    return row.status === "running" && row.docker_id ? row : this.ensureRunning(sessionId);
  }

  private async assertAlive(row: WorkspaceRow) {
    const st = await this.guard(() => isRunning(this.container(row.docker_id!)));
    if (!st.running) throw this.markDead(row, st.detail);
  }

  private markDead(row: WorkspaceRow, detail: string): ApiError {
    const message = `The workspace container stopped unexpectedly (${detail}); it is restarted on the session's next turn`;
    if (this.store.byId(row.id)) this.store.update(row.id, { status: "failed", error: message });
    this.log.warn("workspace container died", { workspace: row.id, session: row.session_id, detail });
    return new ApiError("CONTAINER_FAILED", message);
  }

  /** The row's container for archive access (running or stopped). */
  private containerOf(row: WorkspaceRow): Docker.Container {
    if (!row.docker_id) throw new ApiError("CONTAINER_FAILED", `Workspace ${row.id} has no container (${row.error ?? row.status}); it is created on the session's next turn`);
    return this.container(row.docker_id);
  }

  async readFile(sessionId: string, path: string): Promise<Uint8Array> {
    const abs = resolveWorkspacePath(path);
    const row = this.store.bySession(sessionId);
    if (!row) throw new ApiError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    const c = this.containerOf(row);
    return this.guard(async () => {
      const r = await checkChain(c, abs);
      if (!r.stat) throw Errors.notFound("File", abs);
      if (r.stat.mode >= 2 ** 31) throw Errors.validation("path", `${abs} is a directory, not a file`);
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
  workers(): { name: string; start(): void; stop(): Promise<void> }[] {
    const loop = (name: string, everyMs: number, runNow: boolean, fn: () => Promise<unknown>) => {
      let timer: Timer | null = null;
      let running: Promise<unknown> | null = null;
      const tick = () => {
        if (running) return;
        running = fn()
          .catch((e) => this.log.warn(`${name} failed`, { error: dockerMessage(e) }))
          .finally(() => (running = null));
      };
      return {
        name,
        start() {
          if (runNow) tick();
          timer = setInterval(tick, everyMs);
          timer.unref?.();
        },
        async stop() {
          if (timer) clearInterval(timer);
          await running;
        },
      };
    };
    return [
      loop("workspace-reconcile", RECONCILE_EVERY_MS, true, () => this.reconcile()),
      loop("workspace-idle-stop", idleCheckEveryMs(this.d.config.workspaceIdleTimeoutMs), false, () => this.stopIdle()),
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
