/**
 * The lifecycle half of the workspace service: reserving a row under the per-profile concurrency
 * rule (store.ts), making and starting the Docker objects (provision.ts), restarting a stopped or
 * vanished container on its volume, stopping, removing, and the record queries. Lifecycle
 * operations on one workspace are serialised by a KeyedMutex. service.ts adds exec, files, signed
 * URLs and the background workers on top.
 */
import type Docker from "dockerode";
import { and, eq } from "drizzle-orm";
import type { Config } from "../config.ts";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type EnvValue, type profiles, workspaces, type WorkspaceSpec } from "../db/schema.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { randomHex } from "../lib/crypto.ts";
import type { Sealer } from "../lib/sealer.ts";
import type { Settings } from "../db/settings.ts";
import type { Logger } from "../log.ts";
import { type DockerEngine, dockerMessage, dockerStatus, isUnreachable } from "./docker.ts";
import { isRunning } from "./exec.ts";
import { ImagePuller } from "./image.ts";
import { KeyedMutex } from "./mutex.ts";
import { Provisioner } from "./provision.ts";
import { type WorkspaceRow, WorkspaceStore } from "./store.ts";

export type { WorkspaceRow } from "./store.ts";
export type ProfileRow = typeof profiles.$inferSelect;

export const INSTANCE_SETTING = "workspaces.instance_id";

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

export class WorkspaceLifecycle {
  readonly instanceId: string;
  readonly store: WorkspaceStore;
  readonly locks = new KeyedMutex();
  protected provisioner: Provisioner;
  protected log: Logger;

  constructor(protected d: WorkspaceDeps) {
    this.log = d.log.child({ component: "workspaces" });
    this.store = new WorkspaceStore(d.db, d.now);
    this.instanceId = d.settings.get<string>(INSTANCE_SETTING) ?? this.newInstanceId();
    this.provisioner = new Provisioner(d.docker, new ImagePuller(d.docker, this.log), this.log, this.instanceId);
  }

  private newInstanceId(): string {
    const id = randomHex(8);
    this.d.settings.set(INSTANCE_SETTING, id);
    return id;
  }

  /** The dockerode client (loaded on first use by DockerEngine). */
  protected get client(): Docker {
    return this.d.docker.client;
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
      if (!row) throw new AppError("CONTAINER_FAILED", `The workspace of session ${sessionId} was removed`);
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
      throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace and its profile ${session.profile_id} no longer exists`);
    }
    if (!this.d.resolveEnv && Object.keys(profile.env).length) {
      throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace and its environment cannot be resolved here`);
    }
    const env = this.d.resolveEnv ? this.d.resolveEnv(session.user_id, profile.env) : {};
    return this.createForSession({ userId: session.user_id, sessionId, profile, env });
  }

  protected limitOf(profile: ProfileRow | null): number {
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
  protected fail(row: WorkspaceRow, e: unknown): AppError {
    const err = this.toApiError(e, `Workspace container for image "${row.image}" could not start`);
    this.store.update(row.id, { status: "failed", error: err.message });
    this.log.warn("workspace failed to start", { workspace: row.id, session: row.session_id, error: err.message });
    return err;
  }

  toApiError(e: unknown, what: string): AppError {
    if (e instanceof AppError) return e;
    if (isUnreachable(e)) {
      return new AppError("CONTAINER_FAILED", `Docker is not reachable at ${this.d.config.dockerHost} (${(e as Error).message}); start the engine or pass --docker-host (runcell doctor checks it)`);
    }
    return new AppError("CONTAINER_FAILED", `${what}: ${dockerMessage(e)}`);
  }

  /** Runs a Docker call, mapping engine failures to CONTAINER_FAILED. */
  protected async guard<T>(fn: () => Promise<T>, what = "Docker call failed"): Promise<T> {
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

  /** The user's workspaces, newest first; `map` turns rows into records (default: the rows). */
  list<T = WorkspaceRow>(userId: string, p: PageParams, map: (r: WorkspaceRow) => T = (r) => r as T): Page<T> {
    const { rows, limit } = this.store.page(eq(workspaces.user_id, userId), p);
    return toPage(rows, limit, map);
  }

  listAll<T = WorkspaceRow>(p: PageParams, map: (r: WorkspaceRow) => T = (r) => r as T, filter: { status?: WorkspaceRow["status"]; userId?: string } = {}): Page<T> {
    const where = and(filter.status ? eq(workspaces.status, filter.status) : undefined, filter.userId ? eq(workspaces.user_id, filter.userId) : undefined);
    const { rows, limit } = this.store.page(where, p);
    return toPage(rows, limit, map);
  }
}
