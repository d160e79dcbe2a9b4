/**
 * The lifecycle of workspace containers: reserving a row under the per-profile concurrency rule
 * (store.ts), placing it on a Docker host (hosts.ts), making and starting the Docker objects
 * there (provision.ts), restarting a stopped or vanished container on its volume (on its own
 * host), stopping and removing. Operations on one workspace are serialised by a KeyedMutex. The
 * Workspaces service (service.ts) owns one Lifecycle.
 */
import { type Box, BoxGone, EngineTimeout } from "./box.ts";
import type { Config } from "../config.ts";
import { newId } from "../db/ids.ts";
import type { ProfileRow, WorkspaceRow, WorkspaceSpec } from "../db/schema.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { Logger } from "../log.ts";
import { dockerMessage, isUnreachable } from "./docker.ts";
import type { DockerHosts, HostUsage } from "./hosts.ts";
import type { KeyedMutex } from "./mutex.ts";
import type { PoolMember, WarmPool } from "./pool.ts";
import type { RoomLimits, WorkspaceStore } from "./store.ts";
import { nextTurn } from "../lib/turns.ts";

export interface LifecycleDeps {
  store: WorkspaceStore;
  locks: KeyedMutex;
  /** Where containers run: placement, and each host's provisioner and start gate (hosts.ts). */
  hosts: DockerHosts;
  /** Each host's load now (placement). */
  usage: () => Promise<HostUsage>;
  log: Logger;
  config: Pick<Config, "workspaceImage" | "defaultMaxConcurrency">;
  now: () => number;
  /** The operator's policy: the user's running-workspace cap and the container ceilings (wired by the app). */
  policy?: WorkspacePolicy;
  /** Started containers a new session takes (pool.ts). */
  pool: WarmPool;
}

export interface WorkspacePolicy {
  runningLimit(userId: string): Promise<number | null>;
  clampSpec(userId: string, spec: WorkspaceSpec): Promise<WorkspaceSpec>;
}

export class Lifecycle {
  constructor(private d: LifecycleDeps) {}

  /** The box of a row (or pool member) on its host; CONTAINER_FAILED when the host is unknown or down. */
  private box(row: { id: string; host: string }, dockerId: string): Box {
    return this.d.hosts.of(row).boxes.box(dockerId);
  }

  /**
   * The session's container (its environment comes per exec: the container itself carries none):
   * a warm-pool member when the profile's pool has one ready, else a new container.
   */
  async createForSession(input: { userId: string; sessionId: string; profile: ProfileRow }): Promise<WorkspaceRow> {
    const { profile } = input;
    const member = input.userId === profile.user_id ? await this.d.pool.take(profile) : null;
    if (member) return this.takeMember(member, input);
    const id = newId("container");
    const now = this.d.now();
    const asked: WorkspaceSpec = { network: profile.network, memory_mb: profile.limits.memory_mb, cpus: profile.limits.cpus, pids: profile.limits.pids };
    const spec = (await this.d.policy?.clampSpec(input.userId, asked)) ?? asked;
    const existing = await this.d.store.bySession(input.sessionId);
    if (existing) return this.ensureRunning(input.sessionId);
    // The caller's own limit first: when both refuse, CONCURRENCY_LIMIT says what the caller can
    // change (reserveNew below decides again, atomically with the insert).
    const limits = await this.limitsOf(input.userId, profile);
    await this.d.store.assertRoom(input.sessionId, profile.id, input.userId, limits);
    // Placed and reserved as one: no other start counts the hosts' usage in between.
    const { row, created } = await this.d.hosts.placeAndRecord(profile.host_labels, () => this.d.usage(), (host) =>
      this.d.store.reserveNew(
        {
          id,
          user_id: input.userId,
          session_id: input.sessionId,
          profile_id: profile.id,
          name: `runcell-${id}`,
          image: profile.image || this.d.config.workspaceImage,
          host: host.name,
          docker_id: null,
          volume: `runcell-${id}`,
          spec,
          disk_bytes: null,
          disk_checked_at: null,
          status: "starting",
          error: null,
          last_active_at: now,
          created_at: now,
          updated_at: now,
        },
        limits,
      ),
    );
    if (!created) return this.ensureRunning(input.sessionId);
    return this.d.locks.run(row.id, () => this.provision(row));
  }

  /**
   * A warm-pool member becomes the session's workspace: its row is inserted running (the
   * concurrency rule decides here, as for a new container); behind session.ready the container
   * is checked alive and renamed `runcell-<ctr id>`, or, if it died in the pool, replaced by a new
   * container on its volume.
   */
  private async takeMember(m: PoolMember, input: { userId: string; sessionId: string; profile: ProfileRow }): Promise<WorkspaceRow> {
    const now = this.d.now();
    let reserved: { row: WorkspaceRow; created: boolean };
    try {
      reserved = await this.d.store.reserveNew(
        {
          id: m.ctrId,
          user_id: input.userId,
          session_id: input.sessionId,
          profile_id: input.profile.id,
          name: `runcell-${m.ctrId}`,
          image: m.image,
          host: m.host,
          docker_id: m.dockerId,
          volume: m.volume,
          spec: m.spec,
          disk_bytes: null,
          disk_checked_at: null,
          status: "running",
          error: null,
          last_active_at: now,
          created_at: now,
          updated_at: now,
        },
        await this.limitsOf(input.userId, input.profile),
      );
    } catch (e) {
      await this.d.pool.giveBack(m);
      throw e;
    }
    if (!reserved.created) {
      await this.d.pool.giveBack(m);
      return this.ensureRunning(input.sessionId);
    }
    this.d.pool.settled(m);
    // session.ready waits on nothing here: the member is checked and renamed behind it, under the
    // workspace's lock, which the session's first exec waits for (Workspaces.runningRow). The
    // Engine API calls wait for their turn (src/lib/turns.ts) behind the other starts of a burst
    // (read together, each waiting for its own turn), so that those are not held up by their sockets.
    void this.d.locks
      .run(m.ctrId, async () => {
        await nextTurn();
        let c: Box;
        try {
          c = this.box({ id: m.ctrId, host: m.host }, m.dockerId);
        } catch {
          return; // its host went down meanwhile: the row is marked unavailable with the host's other workspaces
        }
        const st = await c.state().catch((e: unknown) => ({ running: false, detail: dockerMessage(e) }));
        if (st.running) {
          // Cosmetic (the row holds the Docker id).
          await c.rename(`runcell-${m.ctrId}`).catch((e: unknown) => this.d.log.warn("could not rename a warm-pool container", { workspace: m.ctrId, error: dockerMessage(e) }));
          return;
        }
        this.d.log.warn("a warm-pool container was not running; creating the workspace anew on its volume", { workspace: m.ctrId, detail: st.detail });
        await c.remove().catch(() => {});
        const row = await this.d.store.update(m.ctrId, { docker_id: null, status: "starting" });
        if (row) await this.provision(row);
      })
      .catch((e: unknown) => this.d.log.warn("a warm-pool container could not be replaced", { workspace: m.ctrId, error: e instanceof Error ? e.message : String(e) }));
    this.d.log.info("workspace taken from the warm pool", { workspace: m.ctrId, session: input.sessionId, profile: input.profile.id });
    return reserved.row;
  }

  async ensureRunning(sessionId: string): Promise<WorkspaceRow> {
    const { store } = this.d;
    const found = await store.bySession(sessionId);
    if (!found) return this.recreateForSession(sessionId);
    return this.d.locks.run(found.id, async () => {
      let row = await store.byId(found.id);
      if (!row) throw new AppError("CONTAINER_FAILED", `The workspace of session ${sessionId} was removed`);
      // Its volume is on its host: it runs there or not at all (CONTAINER_FAILED while the host is down).
      this.d.hosts.of(row);
      if (row.status === "running" && row.docker_id) {
        const st = await this.guard(() => this.box(row!, row!.docker_id!).state());
        if (st.running) {
          await store.touch(row.id);
          return (await store.byId(row.id))!;
        }
        row = (await store.update(row.id, { status: "stopped", error: `container was not running (${st.detail})` }))!;
      }
      row = await store.reserveRestart(row.id, row.profile_id, row.user_id, await this.limitsOf(row.user_id, await store.profile(row.profile_id)));
      return this.bringUp(row);
    });
  }

  /** The session has no workspace (it was deleted): make a new one from its profile. */
  private async recreateForSession(sessionId: string): Promise<WorkspaceRow> {
    const session = await this.d.store.session(sessionId);
    if (!session) throw Errors.notFound("Session", sessionId);
    const profile = await this.d.store.profile(session.profile_id);
    if (!profile || profile.user_id !== session.user_id) {
      throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace and its profile ${session.profile_id} no longer exists`);
    }
    return this.createForSession({ userId: session.user_id, sessionId, profile });
  }

  /** The profile's max_concurrency and the user's running-workspace cap. */
  async limitsOf(userId: string, profile: { limits: { max_concurrency: number } } | null): Promise<RoomLimits> {
    return { profile: profile?.limits.max_concurrency ?? this.d.config.defaultMaxConcurrency, user: (await this.d.policy?.runningLimit(userId)) ?? null };
  }

  /** Starts the row's container, or recreates it (same volume) when it vanished. Row is `starting`. */
  private async bringUp(row: WorkspaceRow): Promise<WorkspaceRow> {
    const { store } = this.d;
    if (row.docker_id) {
      try {
        await this.box(row, row.docker_id).start();
        return (await store.update(row.id, { status: "running", error: null, last_active_at: this.d.now() }))!;
      } catch (e) {
        if (!(e instanceof BoxGone)) throw await this.fail(row, e);
        // Its volume may have gone with it (removed by hand): then its files are lost, and the
        // record says so once it runs again (empty), as the reconciler would have.
        const kept = await this.guard(() => this.d.hosts.of(row).provisioner.volumeHeld(row), "Could not check the workspace's volume");
        if (!kept) {
          this.d.log.warn("workspace container and volume vanished: its files are lost; it starts empty", { workspace: row.id, session: row.session_id });
          await store.update(row.id, { docker_id: null });
          const up = await this.provision(row);
          return (await store.update(up.id, { error: "its container and volume were removed outside runcell: the workspace's files were lost and it started empty" }))!;
        }
        this.d.log.warn("workspace container vanished; recreating it on the same volume", { workspace: row.id, session: row.session_id });
        await store.update(row.id, { docker_id: null });
      }
    }
    return this.provision(row);
  }

  /**
   * Creates volume + container and starts it, through the start gate: at most
   * --workspace-start-parallelism creations go to the engine at once, the others wait in order
   * (their queue position is logged). The row is reserved (`starting`).
   */
  private async provision(row: WorkspaceRow): Promise<WorkspaceRow> {
    const started = Date.now();
    try {
      const host = this.d.hosts.of(row);
      const c = await host.gate.run(
        "session",
        () => host.provisioner.up(row),
        (position) => this.d.log.info("workspace start queued", { workspace: row.id, session: row.session_id, docker_host: host.name, position, in_flight: host.gate.running }),
      );
      const up = (await this.d.store.update(row.id, { docker_id: c.id, status: "running", error: null, last_active_at: this.d.now() }))!;
      this.d.log.info("workspace started", { workspace: row.id, session: row.session_id, image: row.image, docker_host: host.name, ms: Date.now() - started });
      return up;
    } catch (e) {
      throw await this.fail(row, e);
    }
  }

  /**
   * Marks the row failed, while it is still `starting` as this attempt reserved it (another
   * replica that took the session's task over may have brought the workspace up meanwhile: its
   * `running` stands), and turns any error into CONTAINER_FAILED (AppErrors pass through).
   */
  private async fail(row: WorkspaceRow, e: unknown): Promise<AppError> {
    const err = this.toAppError(e, `Workspace container for image "${row.image}" could not start`, row);
    await this.d.store.update(row.id, { status: "failed", error: err.message }, "starting");
    this.d.log.warn("workspace failed to start", { workspace: row.id, session: row.session_id, error: err.message });
    return err;
  }

  toAppError(e: unknown, what: string, row?: { host: string }): AppError {
    if (e instanceof AppError) return e;
    const host = row ? this.d.hosts.get(row.host) : this.d.hosts.primary;
    if (e instanceof EngineTimeout) {
      const where = host ? `Docker host "${host.name}"` : "Docker";
      return new AppError("CONTAINER_FAILED", `${what}: ${where} did not answer (${e.call}) within ${e.ms / 1000} s; the engine is stuck or overloaded (runcell doctor checks it; --docker-timeout sets the wait)`);
    }
    if (isUnreachable(e)) {
      const where = host ? `Docker host "${host.name}" is not reachable at ${host.spec.url}` : "Docker is not reachable";
      return new AppError("CONTAINER_FAILED", `${where} (${(e as Error).message}); start the engine or pass the right --docker-host (runcell doctor checks it)`);
    }
    return new AppError("CONTAINER_FAILED", `${what}: ${dockerMessage(e)}`);
  }

  /** Runs a Docker call, mapping engine failures to CONTAINER_FAILED. */
  async guard<T>(fn: () => Promise<T>, what = "Docker call failed"): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw this.toAppError(e, what);
    }
  }

  async stop(ctrId: string): Promise<WorkspaceRow | null> {
    return this.d.locks.run(ctrId, async () => {
      const row = await this.d.store.byId(ctrId);
      if (!row) return null;
      // A host that is down keeps its container as it is; the row says so (unavailable).
      if (row.docker_id && this.d.hosts.get(row.host)?.up === true) {
        await this.guard(async () => {
          await this.box(row, row.docker_id!).stop(2);
        }, "Could not stop the workspace container");
      }
      return row.status === "running" || row.status === "starting" ? await this.d.store.update(row.id, { status: "stopped" }) : row;
    });
  }

  /** Removes container, volume and row. Docker failures are logged; reconciliation finishes them. */
  async remove(id: string): Promise<boolean> {
    return this.d.locks.run(id, async () => {
      const row = await this.d.store.byId(id);
      if (!row) return false;
      try {
        await this.d.hosts.of(row).provisioner.discard(row.id, row.volume);
      } catch (e) {
        this.d.log.warn("could not remove workspace container or volume; reconciliation will retry", { workspace: id, error: dockerMessage(e) });
      }
      await this.d.store.delete(id);
      this.d.log.info("workspace removed", { workspace: id, session: row.session_id });
      return true;
    });
  }
}
