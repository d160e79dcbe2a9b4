/**
 * The workspace service (`s.workspaces`): one hardened Docker container per agent session
 * (`ctr_…`, Docker name `runcell-<ctr id>`) with a named volume at /workspace that outlives
 * container restarts and idle stops and is removed with the session. One module, split by
 * concern: the rows and the concurrency rule (store.ts), the container lifecycle (lifecycle.ts),
 * commands inside the container (exec.ts), files (files.ts, archive.ts), signed file URLs
 * (signing.ts) and the background work (idle.ts, reconcile.ts). This class composes them and is
 * what the rest of runcell calls.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type HoldingHook, withHolds } from "../lib/holds.ts";
import { type Box, ContainerNotRunning } from "./box.ts";
import { and, eq } from "drizzle-orm";
import type { Config } from "../config.ts";
import type { DB } from "../db/client.ts";
import { type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type RunningExec, type WorkspaceRow, type WorkspaceStatus } from "../db/schema.ts";
import { workspaces } from "../db/tables.ts";
import type { Settings } from "../db/settings.ts";
import { randomHex } from "../lib/crypto.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { Sealer } from "../lib/sealer.ts";
import { iso } from "../lib/time.ts";
import { intervalWorker, settledWithin, type Worker } from "../lib/worker.ts";
import type { Logger } from "../log.ts";
import type { AdminWorkspaceRecord, DirListing, WorkspaceRecord } from "../schema/workspace.ts";
import { checkChain, entryType, readAll } from "./archive.ts";
import { dockerMessage } from "./docker.ts";
import { type ExecOptions, type ExecProcess, type ExecResult, killLeftover, killMarked, runExec } from "./exec.ts";
import { type Download, listDirectory, openDownload, writeViaExec } from "./files.ts";
import { SpoolBudget } from "./spool.ts";
import { DISK_CHECK_EVERY_MS, DiskChecker, type DiskReport } from "./disk.ts";
import type { GateObserver } from "./gate.ts";
import { type DockerHost, DockerHosts, HEALTH_EVERY_MS } from "./hosts.ts";
import { idleCheckEveryMs, stopIdle } from "./idle.ts";
import { Lifecycle, type WorkspacePolicy } from "./lifecycle.ts";
import { KeyedMutex } from "./mutex.ts";
import { namesDirectory, relativePath, resolveWorkspacePath, WORKSPACE_ROOT } from "./paths.ts";
import { PeerMembers, type ReplicaView, SOLE_REPLICA } from "./peers.ts";
import { POOL_SYNC_EVERY_MS, type PoolMetrics, WarmPool } from "./pool.ts";
import { type AttachedProcess, openProcess, type ProcessOptions } from "./process.ts";
import { reconcile, type ReconcileReport } from "./reconcile.ts";
import { FileUrlSigner, loadSigningKey } from "./signing.ts";
import { INSTANCE_SETTING } from "./spec.ts";
import { WorkspaceStore } from "./store.ts";

export type { ProfileRow, WorkspaceRow } from "../db/schema.ts";

/** Largest file readFile / downloads hand out (bytes). */
export const MAX_FILE_BYTES = 100 * 1024 * 1024;
export const RECONCILE_EVERY_MS = 5 * 60_000;

export interface WorkspaceDeps {
  db: DB;
  /** Read from `settings` at start (loadWorkspaceSettings). */
  instanceId: string;
  fileUrlKey: Uint8Array;
  log: Logger;
  config: Pick<
    Config,
    "workspaceImage" | "workspaceIdleTimeoutMs" | "defaultMaxConcurrency" | "publicUrl" | "dockerHosts" | "maxWarmPool" | "maxWarmPoolTotal" | "workspaceStartParallelism" | "dockerTimeoutMs"
  > &
    Partial<Pick<Config, "dataDir" | "downloadSpoolMb">>;
  now: () => number;
  /**
   * The environment of a command in the workspace: its profile's env with vault secrets resolved
   * now (wired by the app). Called at every exec, so a changed or deleted secret applies at the
   * next tool call and the container itself never holds a value.
   */
  envFor?: (row: WorkspaceRow) => Promise<Record<string, string>>;
  /** The operator's policy (running workspaces per user, container ceilings, disk cap; wired by the app). */
  policy?: WorkspacePolicy & { diskCapBytes(userId: string): Promise<number | null> };
  /** /metrics: warm-pool takes, misses and refills; start-queue waits (wired by the app). */
  metrics?: PoolMetrics & GateObserver;
  /**
   * This server among the replicas sharing the database (wired by the app; peers.ts): its id
   * labels the warm-pool members it makes, and the registered replicas' members are left alone.
   * Absent: the only server.
   */
  replica?: ReplicaView;
}

/** This data dir's instance id (made and stored at the first start). */
async function loadInstanceId(settings: Settings): Promise<string> {
  const stored = await settings.get<string>(INSTANCE_SETTING);
  if (stored) return stored;
  const id = randomHex(8);
  await settings.set(INSTANCE_SETTING, id);
  return id;
}

/** What the workspaces read from `settings` at start: the instance id and the file-URL signing key. */
export async function loadWorkspaceSettings(settings: Settings, sealer: Sealer): Promise<{ instanceId: string; fileUrlKey: Uint8Array }> {
  return { instanceId: await loadInstanceId(settings), fileUrlKey: await loadSigningKey(settings, sealer) };
}

export function workspaceRecord(r: WorkspaceRow): WorkspaceRecord {
  return {
    id: r.id,
    name: r.name,
    session_id: r.session_id,
    profile_id: r.profile_id,
    image: r.image,
    status: r.status,
    error: r.error,
    last_active_at: iso(r.last_active_at),
    created_at: iso(r.created_at),
  };
}

export function adminWorkspaceRecord(r: WorkspaceRow): AdminWorkspaceRecord {
  return { ...workspaceRecord(r), user_id: r.user_id, host: r.host, docker_id: r.docker_id, volume: r.volume, updated_at: iso(r.updated_at) };
}

export class Workspaces {
  /** This data dir's id: the `runcell.instance` label of every container and volume it makes. */
  readonly instanceId: string;
  readonly store: WorkspaceStore;
  readonly locks = new KeyedMutex();
  /** Running execs per workspace: the idle stop never stops a container that is working. */
  readonly inflight = new Map<string, number>();
  maxFileBytes = MAX_FILE_BYTES;
  /** Where a download over 1 MiB is held while its client reads it (spool.ts): the data dir's tmp/, else the system's. */
  readonly spoolDir: string;
  /** The disk the downloads under way may hold there at once (--download-spool-mb; spool.ts). */
  readonly spoolBudget: SpoolBudget;
  /**
   * Run before a workspace is removed by DELETE /v1/workspaces/:id or /admin/workspaces/:id (the
   * app wires what a session delete does: its running task is cancelled, its MCP servers closed),
   * so no task is left working in a container that is gone. A hook may return a release, called
   * once the removal is over: the task queue holds the session's next task until then, so it
   * starts on a fresh workspace rather than on the one being removed.
   */
  onRemove: HoldingHook[] = [];
  /** The Docker hosts (hosts.ts): each with its engine, provisioner and start gate. */
  readonly hosts: DockerHosts;
  /** Started containers per profile for its next sessions (pool.ts). */
  readonly pool: WarmPool;
  /** This replica among those sharing the database and the Docker hosts (peers.ts). */
  readonly replica: ReplicaView;
  /** The other replicas' warm-pool members per host (placement). */
  private peers: PeerMembers;
  private lifecycle: Lifecycle;
  private disk: DiskChecker;
  private signer: FileUrlSigner;
  /** Whether tasks are running on this server (`paceRefills`, wired by the app): refills then go one at a time. */
  private serverBusy: () => boolean = () => false;
  private log: Logger;

  constructor(private d: WorkspaceDeps) {
    this.log = d.log.child({ component: "workspaces" });
    this.store = new WorkspaceStore(d.db, d.now);
    this.instanceId = d.instanceId;
    this.spoolDir = join(d.config.dataDir ?? tmpdir(), "tmp");
    this.spoolBudget = new SpoolBudget(d.config.downloadSpoolMb === undefined ? undefined : d.config.downloadSpoolMb * 1024 * 1024);
    this.replica = d.replica ?? SOLE_REPLICA;
    const parallelism = () => d.config.workspaceStartParallelism;
    // While tasks run here, warm-pool refills create one container at a time (gate.ts).
    const poolParallelism = () => (this.serverBusy() ? 1 : parallelism());
    this.hosts = new DockerHosts(d.config.dockerHosts, { log: this.log, instanceId: this.instanceId, parallelism, poolParallelism, observer: d.metrics, callTimeoutMs: d.config.dockerTimeoutMs });
    this.pool = new WarmPool({
      hosts: this.hosts,
      usage: () => this.hostUsage(),
      log: this.log.child({ component: "warm-pool" }),
      instanceId: this.instanceId,
      replica: this.replica,
      config: d.config,
      policy: d.policy,
      profile: (id) => this.store.poolProfile(id),
      pooledProfiles: () => this.store.pooledProfiles(),
      hasRow: async (id) => (await this.store.byId(id)) !== null,
      metrics: d.metrics,
    });
    this.peers = new PeerMembers({
      replica: this.replica,
      instanceId: this.instanceId,
      hosts: () => this.hosts.list,
      withRows: (ids) => this.store.withRows(ids),
      log: this.log.child({ component: "warm-pool" }),
    });
    this.lifecycle = new Lifecycle({ ...d, log: this.log, store: this.store, locks: this.locks, hosts: this.hosts, usage: () => this.hostUsage(), pool: this.pool });
    this.signer = new FileUrlSigner(d.fileUrlKey, d.config.publicUrl, d.now);
    this.disk = new DiskChecker({
      ...this.background(),
      now: d.now,
      hosts: () => this.hosts.list.filter((h) => h.up).map((h) => h.name),
      volumeSizes: (host) => this.hosts.get(host)!.boxes.volumeSizes(),
      capBytes: (userId) => (d.policy ? d.policy.diskCapBytes(userId) : Promise.resolve(null)),
    });
  }

  /** Tells the start gates whether this server is busy running tasks (the app wires the task queue's count). */
  paceRefills(busy: () => boolean) {
    this.serverBusy = busy;
  }


  /**
   * Each host's load for placement: its starting and running workspaces (every replica's: rows),
   * this replica's pool members (memory) and the other replicas' (Docker, peers.ts; none with one server).
   */
  private async hostUsage(): Promise<Map<string, number>> {
    // The members first: a taken member whose row is written meanwhile is then counted twice (as a member and as its row), never not at all.
    const peers = await this.peers.byHost();
    const members = this.pool.membersByHost();
    const usage = await this.store.activeByHost();
    for (const m of [members, peers]) for (const [host, n] of m) usage.set(host, (usage.get(host) ?? 0) + n);
    return usage;
  }

  /**
   * The row's box (box.ts: the runner interface) on its host, running or stopped
   * (CONTAINER_FAILED when it has none yet, or its host is unknown or down).
   */
  box(row: Pick<WorkspaceRow, "id" | "host" | "docker_id" | "error" | "status">): Box {
    if (!row.docker_id) throw new AppError("CONTAINER_FAILED", `Workspace ${row.id} has no container (${row.error ?? row.status}); it is created on the session's next turn`);
    return this.hosts.of(row).boxes.box(row.docker_id);
  }

  // ------------------------------------------------------------------------------------------
  // Lifecycle (lifecycle.ts)

  createForSession(input: Parameters<Lifecycle["createForSession"]>[0]): Promise<WorkspaceRow> {
    return this.lifecycle.createForSession(input);
  }

  ensureRunning(sessionId: string): Promise<WorkspaceRow> {
    return this.lifecycle.ensureRunning(sessionId);
  }

  stop(ctrId: string): Promise<WorkspaceRow | null> {
    return this.lifecycle.stop(ctrId);
  }

  async removeForSession(sessionId: string): Promise<void> {
    const row = await this.store.bySession(sessionId);
    if (row) await this.lifecycle.remove(row.id);
  }

  /** DELETE /v1/workspaces/:id: the caller's workspace, else NOT_FOUND. */
  async remove(userId: string, ctrId: string): Promise<void> {
    const row = await this.store.byIdForUser(userId, ctrId);
    if (!row) throw Errors.notFound("Workspace", ctrId);
    await this.removeRow(row);
  }

  /** Stops every running workspace of the user (a disabled account); volumes stay. Returns their ids. */
  async stopForUser(userId: string): Promise<string[]> {
    const stopped: string[] = [];
    for (const row of await this.store.activeForUser(userId)) {
      try {
        await this.lifecycle.stop(row.id);
        stopped.push(row.id);
      } catch (e) {
        this.log.warn("could not stop a workspace of a disabled user", { workspace: row.id, error: e instanceof Error ? e.message : String(e) });
      }
    }
    return stopped;
  }

  /** DELETE /admin/workspaces/:id. */
  async removeById(ctrId: string): Promise<void> {
    const row = await this.store.byId(ctrId);
    if (!row) throw Errors.notFound("Workspace", ctrId);
    await this.removeRow(row);
  }

  /**
   * The session's work stopped and held (`onRemove`), then the container, volume and record, then
   * the hold released; NOT_FOUND when removed meanwhile.
   */
  private async removeRow(row: WorkspaceRow): Promise<void> {
    await withHolds(this.onRemove, row.session_id, async () => {
      if (!(await this.lifecycle.remove(row.id))) throw Errors.notFound("Workspace", row.id);
    });
  }

  /** CONCURRENCY_LIMIT now if the session's next turn would start a container with no room. */
  async assertRoom(sessionId: string, profile: { id: string; user_id: string; limits: { max_concurrency: number } }): Promise<void> {
    await this.store.assertRoom(sessionId, profile.id, profile.user_id, await this.lifecycle.limitsOf(profile.user_id, profile));
  }

  // ------------------------------------------------------------------------------------------
  // Records

  async get(userId: string, ctrId: string): Promise<WorkspaceRow> {
    const row = await this.store.byIdForUser(userId, ctrId);
    if (!row) throw Errors.notFound("Workspace", ctrId);
    return row;
  }

  byId(ctrId: string): Promise<WorkspaceRow | null> {
    return this.store.byId(ctrId);
  }

  forSession(sessionId: string): Promise<WorkspaceRow | null> {
    return this.store.bySession(sessionId);
  }

  /** The user's workspaces, newest first. */
  async list(userId: string, p: PageParams): Promise<Page<WorkspaceRecord>> {
    const { rows, limit } = await this.store.page(eq(workspaces.user_id, userId), p);
    return toPage(rows, limit, workspaceRecord);
  }

  /** Every user's (GET /admin/workspaces), optionally by status and owner. */
  async listAll(p: PageParams, filter: { status?: WorkspaceStatus; userId?: string } = {}): Promise<Page<AdminWorkspaceRecord>> {
    const where = and(filter.status ? eq(workspaces.status, filter.status) : undefined, filter.userId ? eq(workspaces.user_id, filter.userId) : undefined);
    const { rows, limit } = await this.store.page(where, p);
    return toPage(rows, limit, adminWorkspaceRecord);
  }

  // ------------------------------------------------------------------------------------------
  // Work inside the container

  /**
   * Runs a command in the session's workspace. `onRunning`: once it runs, what a server restarted
   * meanwhile needs to kill what is left of it (`killLeftover`) — not given when the image's /proc
   * does not tell the process's start time.
   */
  async exec(sessionId: string, opts: ExecOptions & { onRunning?: (e: RunningExec) => void }): Promise<ExecResult> {
    if (!Array.isArray(opts.cmd) || opts.cmd.length === 0 || opts.cmd.some((a) => typeof a !== "string")) {
      throw Errors.validation("cmd", "cmd must be a non-empty array of strings");
    }
    let row = await this.runningRow(sessionId);
    this.inflight.set(row.id, (this.inflight.get(row.id) ?? 0) + 1);
    try {
      await this.store.touch(row.id);
      const env = await this.d.envFor?.(row);
      const { onRunning, ...rest } = opts;
      const onStart = onRunning && ((p: ExecProcess) => p.start !== null && onRunning({ workspace: row.id, pid: p.pid, start: p.start }));
      const withEnv: ExecOptions = { ...rest, onStart, ...(env && Object.keys(env).length ? { env: { ...env, ...opts.env } } : {}) };
      for (let attempt = 0; ; attempt++) {
        try {
          const r = await runExec(this.box(row), withEnv, (e) => this.log.warn("could not kill an exec", { workspace: row.id, error: dockerMessage(e) }));
          if (!r.timedOut && !r.cancelled && (r.exitCode === null || r.exitCode >= 128)) await this.assertAlive(row);
          return r;
        } catch (e) {
          if (!(e instanceof ContainerNotRunning)) throw this.lifecycle.toAppError(e, "Command could not run in the workspace");
          const fresh = await this.store.byId(row.id);
          // Stopped for idleness between our check and the exec: start it and run once more.
          if (attempt === 0 && fresh?.status === "stopped" && !fresh.error) {
            row = await this.ensureRunning(sessionId);
            continue;
          }
          throw await this.markDead(row, e.message);
        }
      }
    } finally {
      const n = (this.inflight.get(row.id) ?? 1) - 1;
      if (n > 0) this.inflight.set(row.id, n);
      else this.inflight.delete(row.id);
      await this.store.touch(row.id);
    }
  }

  /**
   * Kills what is left of a command a tool call started before this server restarted (see
   * `exec`'s `onRunning`): "stopped" when it was still running, "gone" when it had ended — or its
   * container was stopped or recreated since, which ended it too. Throws when the kill could not
   * be done (a paused container, an engine not answering).
   */
  async killLeftover(e: RunningExec): Promise<"stopped" | "gone"> {
    const row = await this.store.byId(e.workspace);
    if (!row?.docker_id || row.status !== "running") return "gone";
    try {
      return (await killLeftover(this.box(row), e)) ? "stopped" : "gone";
    } catch (err) {
      if (err instanceof ContainerNotRunning) return "gone";
      throw err;
    }
  }

  /**
   * Kills, in the session's workspace if it runs, every process whose environment has `name` set
   * to a value other than `keep` (values of one length), with its descendants: what an earlier
   * server process marked so (its stdio MCP servers) and left running when it was killed. How many
   * processes were marked; 0 when the workspace is not running.
   */
  async killMarked(sessionId: string, name: string, keep: string): Promise<number> {
    const row = await this.store.bySession(sessionId);
    if (!row?.docker_id || row.status !== "running") return 0;
    try {
      return await killMarked(this.box(row), name, keep);
    } catch (err) {
      if (err instanceof ContainerNotRunning) return 0;
      throw err;
    }
  }

  /**
   * Starts a long-lived process in the session's workspace with its streams attached (an MCP
   * server over stdio), with the profile's environment resolved now and `opts.env` on top.
   */
  async spawn(sessionId: string, opts: ProcessOptions): Promise<AttachedProcess> {
    const row = await this.runningRow(sessionId);
    await this.store.touch(row.id);
    const env = { ...(await this.d.envFor?.(row)), ...opts.env };
    try {
      return await openProcess(this.box(row), { ...opts, env });
    } catch (e) {
      if (e instanceof ContainerNotRunning) throw await this.markDead(row, e.message);
      throw this.lifecycle.toAppError(e, "The process could not start in the workspace");
    }
  }

  /** Marks the session's workspace as working (or done working): the idle stop leaves a busy one alone. */
  async busy(sessionId: string, delta: 1 | -1): Promise<void> {
    const row = await this.store.bySession(sessionId);
    if (!row) return;
    const n = (this.inflight.get(row.id) ?? 0) + delta;
    if (n > 0) this.inflight.set(row.id, n);
    else this.inflight.delete(row.id);
    await this.store.touch(row.id);
  }

  private async runningRow(sessionId: string): Promise<WorkspaceRow> {
    let row = await this.store.bySession(sessionId);
    // A lifecycle operation on it (a warm-pool member's check behind session.ready, a stop) first.
    if (row && this.locks.busy(row.id)) {
      await this.locks.idle(row.id);
      row = await this.store.bySession(sessionId);
    }
    if (!row) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    return row.status === "running" && row.docker_id ? row : this.ensureRunning(sessionId);
  }

  /**
   * After an exec that died of a signal: was it the container? Docker records a killed container's
   * state some tens of milliseconds after its processes die, so look a few times.
   */
  private async assertAlive(row: WorkspaceRow) {
    for (let i = 0; i < 5; i++) {
      const st = await this.lifecycle.guard(() => this.box(row).state());
      if (!st.running) throw await this.markDead(row, st.detail);
      await Bun.sleep(60);
    }
  }

  private async markDead(row: WorkspaceRow, detail: string): Promise<AppError> {
    // Stopped on purpose (the disk cap): its own message says why.
    const fresh = await this.store.byId(row.id);
    if (fresh?.status === "failed" && fresh.error) return new AppError("CONTAINER_FAILED", fresh.error);
    const message = `The workspace container stopped unexpectedly (${detail}); it is restarted on the session's next turn`;
    if (fresh) await this.store.update(row.id, { status: "failed", error: message });
    this.log.warn("workspace container died", { workspace: row.id, session: row.session_id, detail });
    return new AppError("CONTAINER_FAILED", message);
  }

  async readFile(sessionId: string, path: string): Promise<Uint8Array> {
    const abs = resolveWorkspacePath(path);
    const row = await this.store.bySession(sessionId);
    if (!row) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace`);
    const c = this.box(row);
    return this.lifecycle.guard(async () => {
      const r = await checkChain(c, abs, { asDir: namesDirectory(path) });
      if (!r.stat) throw Errors.notFound("File", abs);
      if (entryType(r.stat.mode) === "dir") throw Errors.validation("path", `${abs} is a directory, not a file`);
      return readAll(c, r.path, this.maxFileBytes);
    }, `Could not read ${abs}`);
  }

  async writeFile(sessionId: string, path: string, data: string | Uint8Array): Promise<void> {
    const abs = resolveWorkspacePath(path);
    if (abs === WORKSPACE_ROOT) throw Errors.validation("path", `${WORKSPACE_ROOT} is a directory, not a file`);
    if (namesDirectory(path)) throw Errors.validation("path", `${path} ends in "/", so it names a directory, not a file`);
    const row = await this.runningRow(sessionId);
    await this.lifecycle.guard(() => writeViaExec(this, row, abs, data), `Could not write ${abs}`);
    await this.store.touch(row.id);
  }

  /** Writes a file the platform made for the session (an MCP tool's image) and returns a signed URL for it. */
  async storeFile(sessionId: string, relPath: string, data: Uint8Array): Promise<string> {
    await this.writeFile(sessionId, relPath, data);
    const row = (await this.store.bySession(sessionId))!;
    return this.signedFileUrl(row.id, relPath);
  }

  async listDir(sessionId: string, path: string, page: { limit?: number; cursor?: string } = {}): Promise<DirListing> {
    const abs = resolveWorkspacePath(path);
    const row = await this.runningRow(sessionId);
    return this.lifecycle.guard(() => listDirectory(this, row, abs, page), `Could not list ${abs}`);
  }

  /** Opens a workspace file for streaming (downloads, signed URLs); never starts the container. */
  async openDownload(row: WorkspaceRow, path: string): Promise<Download> {
    const abs = resolveWorkspacePath(path);
    const c = this.box(row);
    return this.lifecycle.guard(() => openDownload(c, abs, this.maxFileBytes, { dir: this.spoolDir, budget: this.spoolBudget }, namesDirectory(path)), `Could not read ${abs}`);
  }

  /** Runs an exec for the file helpers (no activity bookkeeping; callers do it). */
  execIn(row: WorkspaceRow, opts: ExecOptions): Promise<ExecResult> {
    return runExec(this.box(row), opts).catch(async (e) => {
      throw e instanceof ContainerNotRunning ? await this.markDead(row, e.message) : e;
    });
  }

  // ------------------------------------------------------------------------------------------
  // Background work

  /** Stops workspaces idle longer than the configured timeout; returns their ids. */
  stopIdle(): Promise<string[]> {
    return stopIdle({ ...this.background(), inflight: this.inflight, shared: this.replica.shared, now: this.d.now, idleMs: this.d.config.workspaceIdleTimeoutMs });
  }

  /**
   * Reconciles the warm pool, then records, with each answering Docker host (this instance's
   * labels only); the report sums the hosts'.
   */
  async reconcile(): Promise<ReconcileReport> {
    const total: ReconcileReport = { removed_containers: [], removed_volumes: [], marked_stopped: [], marked_failed: [] };
    for (const host of this.hosts.list) {
      if (!host.up) continue;
      const r = await this.reconcileHost(host);
      if (r) for (const k of Object.keys(total) as (keyof ReconcileReport)[]) total[k].push(...r[k]);
    }
    await this.pool.refillAll();
    return total;
  }

  /** One host's pool members, then its workspaces; null (logged) when the host could not be listed. */
  private async reconcileHost(host: DockerHost): Promise<ReconcileReport | null> {
    try {
      await this.pool.reconcile(host);
    } catch (e) {
      this.log.warn("warm pool could not be reconciled", { docker_host: host.name, error: dockerMessage(e) });
    }
    try {
      return await reconcile({
        boxes: host.boxes, host: host.name, store: this.store, locks: this.locks, log: this.log, instanceId: this.instanceId,
        pooled: (id) => this.pool.holds(id), replica: this.replica, now: this.d.now,
      });
    } catch (e) {
      this.log.warn("workspaces could not be reconciled with a Docker host", { docker_host: host.name, error: dockerMessage(e) });
      return null;
    }
  }

  /**
   * One health round over the hosts (every HEALTH_EVERY_MS): a host down marks its workspaces
   * `unavailable` and its pool members unusable; a host back has them `stopped` and is reconciled.
   */
  async checkHosts(): Promise<{ down: string[]; back: string[] }> {
    const { down, back } = await this.hosts.check();
    for (const h of down) {
      const ids = await this.store.markHostUnavailable(h.name, `Docker host "${h.name}" is not answering (${h.lastError ?? "unreachable"}); the workspace's files are there`);
      this.pool.hostDown(h.name);
      this.log.error("Docker host not answering: its workspaces are unavailable", { docker_host: h.name, error: h.lastError, workspaces: ids.length });
    }
    for (const h of back) {
      const ids = await this.store.markHostBack(h.name);
      this.pool.hostBack();
      this.log.info("Docker host answers again: its workspaces are stopped until their next turn", { docker_host: h.name, workspaces: ids.length });
      await this.reconcileHost(h);
      await this.pool.refillAll();
    }
    return { down: down.map((h) => h.name), back: back.map((h) => h.name) };
  }

  /**
   * Measures running workspaces' volumes; stops those over their owner's disk cap (disk.ts).
   * `skipBusy`: a host whose last check still runs is left to it (the minute worker).
   */
  checkDisk(opts: { skipBusy?: boolean } = {}): Promise<DiskReport> {
    if (!this.d.policy) return Promise.resolve({ checked: 0, stopped: [] });
    return this.disk.check(opts);
  }

  /**
   * The minute disk check. A tick does not wait for its checks (each host's runs on its own, and a
   * slow host's is skipped until it ends), so a host slow to size its volumes delays no other's;
   * `stop` waits for the checks still running (up to the shutdown timeout).
   */
  private diskWorker(): Worker {
    const ticks = intervalWorker(this.log, "workspace-disk-check", DISK_CHECK_EVERY_MS, () => {
      this.checkDisk({ skipBusy: true }).catch((e) => this.log.warn("workspace-disk-check failed", { err: e }));
    });
    return {
      name: ticks.name,
      start: () => ticks.start(),
      stop: async (waitMs?: number) => {
        await ticks.stop(waitMs);
        if (!(await settledWithin(this.disk.idle(), waitMs))) this.log.warn("workspace-disk-check still running at shutdown; not waited for", { waited_ms: waitMs });
      },
    };
  }

  private background() {
    return { box: (row: WorkspaceRow) => this.box(row), store: this.store, locks: this.locks, log: this.log };
  }

  /** The reconcile (at start, then every 5 min) and idle-stop workers (started by the app). */
  workers() {
    return [
      intervalWorker(this.log, "workspace-reconcile", RECONCILE_EVERY_MS, () => this.reconcile(), { runAtStart: true }),
      intervalWorker(this.log, "workspace-idle-stop", idleCheckEveryMs(this.d.config.workspaceIdleTimeoutMs), () => this.stopIdle()),
      this.diskWorker(),
      // At start too: /healthz answers from each engine's last ping.
      intervalWorker(this.log, "docker-host-health", HEALTH_EVERY_MS, () => this.checkHosts(), { runAtStart: true }),
      // Replicas: profile changes made through another replica reach this one's pools.
      ...(this.replica.shared ? [intervalWorker(this.log, "warm-pool-sync", POOL_SYNC_EVERY_MS, () => this.pool.sync())] : []),
      { name: "warm-pool", start() {}, stop: () => this.pool.stop() },
    ];
  }

  // ------------------------------------------------------------------------------------------
  // Signed URLs

  signedFileUrl(ctrId: string, path: string, ttlSec = 3600): string {
    return this.signer.url(ctrId, relativePath(resolveWorkspacePath(path)), ttlSec);
  }

  /**
   * Whether `path` (relative, as the URL holds it) is exactly the path a URL was signed for: its
   * normalised form (signedFileUrl signs that), so `chart.png/` or `./chart.png` with chart.png's
   * signature is 404 like any other path, never a different answer about the same file.
   */
  verifyFileUrl(ctrId: string, path: string, exp: string | undefined, sig: string | undefined): boolean {
    let rel: string;
    try {
      rel = relativePath(resolveWorkspacePath(path));
    } catch {
      return false;
    }
    return rel === path && this.signer.verify(ctrId, rel, exp, sig);
  }
}
