/**
 * The warm pool: per profile (`warm_pool: n`), containers created and started ahead of time from
 * the profile's image, limits and network, each with its own fresh volume, so a new session takes
 * one and `session.ready` is a database write and a rename instead of a container creation.
 *
 * - Members carry no environment at all (a workspace's env, secrets included, is resolved at every
 *   exec), no session, and are labelled `runcell.pool=<profile>` and `runcell.pool.key=<shape>`.
 * - The size a pool aims at is the profile's warm_pool within the operator's caps: --max-warm-pool
 *   per profile, --max-warm-pool-total across profiles, and the host's available memory (no member
 *   is made while less than MIN_AVAILABLE_MB is available).
 * - Members do not count against their owner's concurrency until taken (they have no workspace
 *   row); the operator's total cap counts them.
 * - After each take the pool refills in the background, through the start gate behind any session
 *   start waiting there (gate.ts).
 * - A profile change that alters the container (image, network, memory, CPUs, pids) drains the
 *   pool's members (its shape key changes); a deleted profile's members are removed.
 * - Members are placed on the Docker hosts like workspaces (hosts.ts: labels, most free capacity);
 *   a take prefers any ready member on an answering host. Members on a host that goes down are
 *   forgotten (the pool refills elsewhere) and adopted or removed when it is back.
 * - Reconciled with each Docker host before its workspace reconciliation (at start, then every
 *   few minutes): a member of this instance whose profile still wants it with the same shape is
 *   adopted, any other one is removed (container and volume).
 * - Replicas (peers.ts): each replica has its own pools. A member is labelled with the replica
 *   that made it (`runcell.replica=<id>`); reconciliation adopts only this replica's members, leaves
 *   those of other registered replicas alone and removes those of replicas that are gone. So the
 *   profile's warm_pool and the operator's caps apply per replica. A profile's hooks run on the
 *   replica that changed it; the others bring their pools to it within POOL_SYNC_EVERY_MS (`sync`).
 */
import { sha256Hex } from "../lib/crypto.ts";
import { readFileSync } from "node:fs";
import type { Config } from "../config.ts";
import { newId } from "../db/ids.ts";
import type { ProfileRow, WorkspaceSpec } from "../db/schema.ts";
import type { Logger } from "../log.ts";
import { discardWorkspace } from "./provision.ts";
import { dockerMessage } from "./docker.ts";
import type { DockerHost, DockerHosts, HostUsage } from "./hosts.ts";
import { memberOwner, type ReplicaView } from "./peers.ts";
import { LABEL_INSTANCE, LABEL_POOL, LABEL_POOL_KEY, LABEL_REPLICA, LABEL_WORKSPACE } from "./spec.ts";

/** No member is made while the host has less memory available than this. */
const MIN_AVAILABLE_MB = 512;
/** After a member failed to start, the profile's pool waits this long before trying again. */
const RETRY_AFTER_MS = 30_000;
/**
 * A take's refill waits until the burst of takes is over (this long after the last one, at most
 * REFILL_MAX_DELAY_MS after the first): the refill's container creations would otherwise keep the
 * engine busy while the takes wait for its answers.
 */
const REFILL_DELAY_MS = 200;
const REFILL_MAX_DELAY_MS = 1000;
/** Replicas: how often each one brings its pools to the profiles as stored (changes made through another replica). */
export const POOL_SYNC_EVERY_MS = 10_000;

export interface PoolMember {
  /** The workspace id the member becomes (`ctr_…`): its volume and labels are named after it. */
  ctrId: string;
  dockerId: string;
  /** Its Docker name while pooled (`runcell-pool-<ctr id>`; renamed `runcell-<ctr id>` when taken). */
  name: string;
  volume: string;
  image: string;
  spec: WorkspaceSpec;
  key: string;
  profileId: string;
  /** The Docker host it runs on. */
  host: string;
}

export interface PoolState {
  size: number;
  ready: number;
  starting: number;
}

/** /metrics (wired by the app). */
export interface PoolMetrics {
  poolTake(hit: boolean): void;
  poolRefill(seconds: number): void;
}

export interface PoolDeps {
  /** Placement, and each host's engine, provisioner and start gate. */
  hosts: DockerHosts;
  /** Each host's load now (its workspaces and pool members), for placement. */
  usage: () => Promise<HostUsage>;
  log: Logger;
  instanceId: string;
  /** This replica: the label its members carry, and the other replicas whose members it leaves alone. */
  replica: ReplicaView;
  config: Pick<Config, "workspaceImage" | "maxWarmPool" | "maxWarmPoolTotal">;
  policy?: { clampSpec(userId: string, spec: WorkspaceSpec): Promise<WorkspaceSpec> };
  profile(id: string): Promise<ProfileRow | null>;
  /** Profiles with warm_pool > 0. */
  pooledProfiles(): Promise<ProfileRow[]>;
  /** Whether a workspace row with this id exists (a member taken before a restart). */
  hasRow(ctrId: string): Promise<boolean>;
  metrics?: PoolMetrics;
  /** The host's available memory in MiB (tests replace it). */
  availableMb?: () => number;
}

interface ProfilePool {
  key: string | null;
  ready: PoolMember[];
  starting: number;
  /** Bumped by a drain: members still starting from an older generation are removed when they come up. */
  generation: number;
  retryAt: number;
}

/** MemAvailable from /proc/meminfo (what can be used without swapping), else Infinity. */
function hostAvailableMb(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"));
    return m ? Number(m[1]) / 1024 : Infinity;
  } catch {
    return Infinity;
  }
}

export class WarmPool {
  private pools = new Map<string, ProfilePool>();
  /**
   * Members being created, and members taken whose workspace row is not written yet, by ctr id,
   * with their host (placement counts them; reconciliation leaves their objects alone).
   */
  private pending = new Map<string, string>();
  private filling = new Set<string>();
  private again = new Set<string>();
  /** Refills due after a burst of takes: the timer, and when the burst's first take was. */
  private soon = new Map<string, { timer: Timer; first: number }>();
  private closed = false;

  constructor(private d: PoolDeps) {}

  /** The container a profile's sessions get: image and spec (the owner's ceilings applied), host labels, and their hash. */
  async shapeOf(profile: ProfileRow): Promise<{ image: string; spec: WorkspaceSpec; key: string }> {
    const asked: WorkspaceSpec = { network: profile.network, memory_mb: profile.limits.memory_mb, cpus: profile.limits.cpus, pids: profile.limits.pids };
    const spec = (await this.d.policy?.clampSpec(profile.user_id, asked)) ?? asked;
    const image = profile.image || this.d.config.workspaceImage;
    const labels = profile.host_labels.length ? [[...profile.host_labels].sort()] : [];
    const key = sha256Hex(JSON.stringify([image, spec.network, spec.memory_mb, spec.cpus, spec.pids, ...labels])).slice(0, 16);
    return { image, spec, key };
  }

  /** Members (ready and being made) per Docker host: placement counts them. */
  membersByHost(): Map<string, number> {
    const out = new Map<string, number>();
    for (const host of this.pending.values()) out.set(host, (out.get(host) ?? 0) + 1);
    for (const p of this.pools.values()) for (const m of p.ready) out.set(m.host, (out.get(m.host) ?? 0) + 1);
    return out;
  }

  /** A host answers again: pools waiting out a failed start try at once (the failure may have been that host). */
  hostBack() {
    for (const p of this.pools.values()) p.retryAt = 0;
  }

  /** A host stopped answering: its ready members are forgotten (adopted or removed when it is back), the pools refill elsewhere. */
  hostDown(host: string) {
    for (const [profileId, p] of this.pools) {
      const before = p.ready.length;
      p.ready = p.ready.filter((m) => m.host !== host);
      if (p.ready.length !== before) this.refill(profileId);
    }
  }

  /** The size the profile's pool aims at now. */
  target(profile: Pick<ProfileRow, "warm_pool">): number {
    return Math.max(0, Math.min(profile.warm_pool, this.d.config.maxWarmPool));
  }

  /** Members across every profile (ready and starting): what the operator's total cap counts. */
  get total(): number {
    const t = this.totals();
    return t.ready + t.starting;
  }

  totals(): { ready: number; starting: number } {
    let ready = 0;
    let starting = 0;
    for (const p of this.pools.values()) {
      ready += p.ready.length;
      starting += p.starting;
    }
    return { ready, starting };
  }

  /** GET /v1/profiles/:id's `pool` (of the profile as the caller read it). */
  state(profile: Pick<ProfileRow, "id" | "warm_pool">): PoolState {
    const p = this.pools.get(profile.id);
    return { size: this.target(profile), ready: p?.ready.length ?? 0, starting: p?.starting ?? 0 };
  }

  /** Whether a ctr id is a member (ready, being made, or being taken): reconciliation keeps its objects. */
  holds(ctrId: string): boolean {
    if (this.pending.has(ctrId)) return true;
    for (const p of this.pools.values()) if (p.ready.some((m) => m.ctrId === ctrId)) return true;
    return false;
  }

  /**
   * A ready member for a new session of the profile, or null (a miss: the pool is empty or its
   * members have another shape). The shape is read first; the pick and the removal then happen
   * with nothing awaited between them, so the member is the caller's at once. The pool refills in
   * the background.
   */
  async take(profile: ProfileRow): Promise<PoolMember | null> {
    if (!this.pools.get(profile.id) && this.target(profile) === 0) return null;
    const key = (await this.shapeOf(profile)).key;
    const p = this.pools.get(profile.id);
    const i = p ? p.ready.findIndex((m) => m.key === key && this.d.hosts.get(m.host)?.up === true) : -1;
    const member = i >= 0 ? p!.ready.splice(i, 1)[0]! : null;
    // Until its row is written (settled) or it is given back, it counts on its host and reconciliation keeps it.
    if (member) this.pending.set(member.ctrId, member.host);
    this.d.metrics?.poolTake(member !== null);
    // Deferred: a member given back meanwhile (the session had no room) needs no replacement.
    this.refillSoon(profile.id);
    return member;
  }

  private refillSoon(profileId: string) {
    const now = Date.now();
    const due = this.soon.get(profileId);
    if (due) clearTimeout(due.timer);
    const first = due?.first ?? now;
    const run = () => {
      this.soon.delete(profileId);
      this.refill(profileId);
    };
    if (now - first >= REFILL_MAX_DELAY_MS) return run();
    this.soon.set(profileId, { first, timer: setTimeout(run, Math.min(REFILL_DELAY_MS, REFILL_MAX_DELAY_MS - (now - first))) });
  }

  /** A taken member's workspace row is written: the row counts it from now on. */
  settled(member: PoolMember) {
    this.pending.delete(member.ctrId);
  }

  /** A member the session could not use after all (no room, or the session had a workspace): back to the pool, or removed. */
  async giveBack(member: PoolMember) {
    const profile = this.closed ? null : await this.d.profile(member.profileId);
    this.pending.delete(member.ctrId);
    const p = this.pools.get(member.profileId);
    if (p && profile && p.key === member.key && this.target(profile) > 0) {
      p.ready.unshift(member);
      this.refill(member.profileId); // trims the pool if it is now over its size
    } else void this.discard(member);
  }

  /** A profile was saved: its pool resized, and drained when its containers would differ. */
  profileChanged(profileId: string) {
    this.refill(profileId);
  }

  /** A profile was deleted: its members are removed. */
  async profileDeleted(profileId: string) {
    const p = this.pools.get(profileId);
    if (!p) return;
    this.pools.delete(profileId);
    p.generation++;
    await Promise.all(p.ready.splice(0).map((m) => this.discard(m)));
    await this.refillOthers(profileId);
  }

  /** Starts a background fill of the profile's pool (coalesced while one runs). */
  refill(profileId: string) {
    if (this.closed) return;
    if (this.filling.has(profileId)) {
      this.again.add(profileId);
      return;
    }
    this.filling.add(profileId);
    void this.fill(profileId)
      .catch((e) => this.d.log.warn("warm pool: fill failed", { profile: profileId, error: e instanceof Error ? e.message : String(e) }))
      .finally(() => {
        this.filling.delete(profileId);
        if (this.again.delete(profileId)) this.refill(profileId);
      });
  }

  /** Fills every profile that wants a pool (at start, after reconciliation, and when room frees up). */
  async refillAll() {
    if (this.closed) return;
    for (const profile of await this.d.pooledProfiles()) this.refill(profile.id);
  }

  /**
   * Replicas: every profile that wants a pool, or has one here, brought to the profile as stored
   * (made, resized, drained or removed), for changes made through another replica, whose hooks
   * ran there. Every POOL_SYNC_EVERY_MS on PostgreSQL.
   */
  async sync() {
    if (this.closed) return;
    const ids = new Set([...(await this.d.pooledProfiles()).map((p) => p.id), ...this.pools.keys()]);
    for (const id of ids) this.refill(id);
  }

  /** Brings the profile's pool to its target: drains a changed shape, trims extras, starts the missing members. */
  private async fill(profileId: string) {
    const profile = await this.d.profile(profileId);
    if (!profile) return this.profileDeleted(profileId);
    const target = this.target(profile);
    let p = this.pools.get(profileId);
    if (!p) {
      if (target === 0) return;
      p = { key: null, ready: [], starting: 0, generation: 0, retryAt: 0 };
      this.pools.set(profileId, p);
    }
    const shape = await this.shapeOf(profile);
    const drop: PoolMember[] = [];
    if (p.key !== shape.key) {
      if (p.key !== null) this.d.log.info("warm pool drained: the profile's container changed", { profile: profileId, members: p.ready.length + p.starting });
      p.key = shape.key;
      p.generation++;
      drop.push(...p.ready.splice(0));
    }
    while (p.ready.length > target) drop.push(p.ready.pop()!);
    if (drop.length) void Promise.all(drop.map((m) => this.discard(m))).then(() => this.refillOthers(profileId));
    if (target === 0 && p.starting === 0 && p.ready.length === 0) {
      this.pools.delete(profileId);
      return;
    }
    if (Date.now() < p.retryAt) return;
    const spawns: Promise<void>[] = [];
    while (p.ready.length + p.starting < target && this.total < this.d.config.maxWarmPoolTotal && Date.now() >= p.retryAt) {
      const avail = (this.d.availableMb ?? hostAvailableMb)();
      if (avail < MIN_AVAILABLE_MB) {
        this.d.log.warn("warm pool: not refilled, the host is short of memory", { profile: profileId, available_mb: Math.round(avail), min_mb: MIN_AVAILABLE_MB });
        break;
      }
      spawns.push(this.spawn(profile, shape, p));
    }
    await Promise.all(spawns);
  }

  /** Other profiles may have waited for room under the total cap. */
  private async refillOthers(except: string) {
    if (this.closed) return;
    for (const profile of await this.d.pooledProfiles()) if (profile.id !== except) this.refill(profile.id);
  }

  private async spawn(profile: ProfileRow, shape: { image: string; spec: WorkspaceSpec; key: string }, p: ProfilePool) {
    const ctrId = newId("container");
    const generation = p.generation;
    const member: PoolMember = { ctrId, dockerId: "", name: `runcell-pool-${ctrId}`, volume: `runcell-${ctrId}`, image: shape.image, spec: shape.spec, key: shape.key, profileId: profile.id, host: "" };
    p.starting++;
    const started = performance.now();
    try {
      // Placed, and pending, before the next placement counts the hosts' usage.
      const host = await this.d.hosts.placeAndRecord(profile.host_labels, () => this.d.usage(), (h) => {
        member.host = h.name;
        this.pending.set(ctrId, h.name);
        return h;
      });
      const labels: Record<string, string> = { [LABEL_POOL]: profile.id, [LABEL_POOL_KEY]: shape.key };
      if (this.d.replica.id) labels[LABEL_REPLICA] = this.d.replica.id;
      const c = await host.gate.run("pool", () => host.provisioner.up({ id: ctrId, session_id: "", name: member.name, volume: member.volume, image: shape.image, spec: shape.spec }, labels));
      member.dockerId = c.id;
      const now = this.closed ? null : await this.d.profile(profile.id);
      // Checked after the read: the pool may have been drained or deleted meanwhile.
      const stale = this.closed || this.pools.get(profile.id) !== p || p.generation !== generation;
      if (stale || !now || p.ready.length >= this.target(now)) {
        await this.discard(member);
        this.refill(profile.id);
        return;
      }
      p.ready.push(member);
      this.d.metrics?.poolRefill((performance.now() - started) / 1000);
      this.d.log.debug("warm pool member ready", { profile: profile.id, member: ctrId, ms: Math.round(performance.now() - started) });
    } catch (e) {
      if (this.closed) return void (await this.discard(member));
      p.retryAt = Date.now() + RETRY_AFTER_MS;
      this.d.log.warn("warm pool: a member could not start; retrying later", { profile: profile.id, image: shape.image, error: dockerMessage(e), retry_in_ms: RETRY_AFTER_MS });
      await this.discard(member);
      setTimeout(() => this.refill(profile.id), RETRY_AFTER_MS).unref?.();
    } finally {
      p.starting--;
      this.pending.delete(ctrId);
    }
  }

  /** Removes a member's container and volume (errors logged: reconciliation finishes the job). */
  async discard(m: Pick<PoolMember, "ctrId" | "dockerId" | "name" | "volume" | "host">) {
    const host = this.d.hosts.get(m.host);
    if (!host?.up) return; // never placed, or its host is down: reconciliation removes it there
    try {
      await discardWorkspace(host.boxes, this.d.instanceId, m.ctrId, m.volume);
    } catch (e) {
      this.d.log.warn("warm pool: could not remove a member; reconciliation will retry", { member: m.ctrId, error: dockerMessage(e) });
    }
  }

  /**
   * Matches a Docker host's pool members of this instance with the pools (before its workspace
   * reconciliation): of this replica's members (peers.ts), a running one its profile still wants,
   * with the profile's current shape, is adopted and any other one not taken by a session is
   * removed; members of other registered replicas are left alone (`peers`), those of gone
   * replicas removed unless taken. The caller refills the pools.
   */
  async reconcile(host: DockerHost): Promise<{ adopted: string[]; removed: string[]; peers: string[] }> {
    const report = { adopted: [] as string[], removed: [] as string[], peers: [] as string[] };
    const wanted = await this.d.pooledProfiles();
    if (wanted.length === 0 && this.pools.size === 0) {
      // Nothing wants a pool: left-over members (no workspace row) are orphans the workspace reconciliation removes.
      return report;
    }
    const containers = await host.boxes.list({ [LABEL_INSTANCE]: this.d.instanceId, [LABEL_POOL]: "" });
    // Read after the listing: a replica that registers later has no member in it but those it had before (kept by its id).
    const registered = this.d.replica.shared ? await this.d.replica.registered() : new Set<string>();
    for (const c of containers) {
      const ctrId = c.labels[LABEL_WORKSPACE] ?? "";
      if (!ctrId || this.holds(ctrId)) continue;
      const owner = memberOwner(c.labels, this.d.replica, registered);
      if (owner === "peer") {
        report.peers.push(ctrId);
        continue;
      }
      if (owner === "gone") {
        // Never adopted (its label names another replica: every replica would take it for its own);
        // removed unless a session took it, or its replica registered again meanwhile (restarted on its data dir).
        if ((await this.d.hasRow(ctrId)) || (await this.d.replica.registered()).has(c.labels[LABEL_REPLICA] ?? "")) continue;
        await this.discard({ ctrId, dockerId: c.id, name: c.name, volume: `runcell-${ctrId}`, host: host.name });
        report.removed.push(ctrId);
        continue;
      }
      const profileId = c.labels[LABEL_POOL] ?? "";
      const profile = await this.d.profile(profileId);
      const shape = profile && (await this.shapeOf(profile));
      // Checked after the reads too: a concurrent reconciliation of this host may have adopted it meanwhile.
      if ((await this.d.hasRow(ctrId)) || this.holds(ctrId)) continue;
      const member: PoolMember = {
        ctrId,
        dockerId: c.id,
        name: c.name,
        volume: `runcell-${ctrId}`,
        image: c.image,
        spec: { network: "none", memory_mb: 0, cpus: 0, pids: 0 },
        key: c.labels[LABEL_POOL_KEY] ?? "",
        profileId,
        host: host.name,
      };
      let keep = false;
      if (profile && shape && c.state === "running" && !this.closed) {
        let p = this.pools.get(profileId);
        if (!p && this.target(profile) > 0) {
          p = { key: shape.key, ready: [], starting: 0, generation: 0, retryAt: 0 };
          this.pools.set(profileId, p);
        }
        if (p && (p.key === null || p.key === shape.key) && member.key === shape.key && p.ready.length + p.starting < this.target(profile) && this.total < this.d.config.maxWarmPoolTotal) {
          p.key = shape.key;
          p.ready.push({ ...member, image: shape.image, spec: shape.spec });
          keep = true;
          report.adopted.push(ctrId);
        }
      }
      if (!keep) {
        await this.discard(member);
        report.removed.push(ctrId);
      }
    }
    if (report.adopted.length || report.removed.length) this.d.log.info("warm pool reconciled with Docker", { docker_host: host.name, ...report });
    return report;
  }

  /** Stops refilling (members stay running: the next start adopts them). */
  stop() {
    this.closed = true;
    for (const due of this.soon.values()) clearTimeout(due.timer);
    this.soon.clear();
  }
}
