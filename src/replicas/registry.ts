/**
 * This server among the replicas sharing its database. Every server has an id of its own (`rep_…`,
 * in /healthz, /metrics, logs, the task leases it holds and the labels of its warm-pool members),
 * kept in its data dir (`replica-id`), so a replica restarted on the same data dir is the same
 * replica: it takes back its own leases and warm-pool members at once. Each replica runs on a data
 * dir of its own (the data dir's lock, src/db/lock.ts, keeps a second process off it). It writes
 * its row in `replicas` at start, renews `seen_at` every third of the lease (`--replica-lease`)
 * and marks it not live on a clean stop. A row not renewed for a whole lease is a replica that is
 * gone: it no longer counts (`liveCount`, which divides the rate limits) and its task leases run
 * out at the same time (src/agents/leases.ts). A row not renewed for FORGET_AFTER_LEASES is deleted:
 * that replica is gone for good (its warm-pool members are then removed, src/workspaces/peers.ts).
 *
 * On SQLite the one server is the only row; the registry works the same and costs one write every
 * few seconds.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { count, eq, gt, lt } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { replicas } from "../db/tables.ts";

/** Rows of replicas not seen for this many leases are deleted (a crashed replica leaves its row behind). */
const FORGET_AFTER_LEASES = 20;

export interface ReplicaInfo {
  id: string;
  hostname: string;
  version: string;
  started_at: number;
  seen_at: number;
}

/** The file in the data dir that holds its replica id. */
export const REPLICA_ID_FILE = "replica-id";
const REPLICA_ID = /^rep_[0-9a-z]{26}$/;

/** The data dir's replica id: the one it holds, or a new one written there (whole or not at all). */
export function loadReplicaId(dataDir: string): string {
  const file = join(dataDir, REPLICA_ID_FILE);
  try {
    const held = readFileSync(file, "utf8").trim();
    if (REPLICA_ID.test(held)) return held;
  } catch {
    // First start on this data dir.
  }
  const id = newId("replica");
  writeFileSync(file + ".tmp", id + "\n", { mode: 0o600 });
  renameSync(file + ".tmp", file);
  return id;
}

/** This data dir's replica id is live on another machine (a copied data dir): refused at start. */
export class ReplicaIdInUseError extends Error {
  constructor(id: string, hostname: string) {
    super(
      `replica id ${id} (this data dir's replica-id) is in use by a running server on ${hostname}: was this data dir copied from it? Give each replica a data dir of its own (delete replica-id here to make a new id)`,
    );
    this.name = "ReplicaIdInUseError";
  }
}

export class Replicas {
  readonly hostname = hostname();
  /** Replicas seen within a lease, this one included (refreshed at each heartbeat). */
  private live = 1;

  constructor(
    private db: DB,
    private now: () => number,
    readonly leaseMs: number,
    private version: string,
    readonly id: string = newId("replica"),
  ) {}

  /** How often the heartbeat runs. */
  get heartbeatMs(): number {
    return Math.max(250, Math.floor(this.leaseMs / 3));
  }

  /** Writes this replica's row (again, after a crash left it behind); forgets rows of replicas long gone. */
  async register(): Promise<void> {
    const now = this.now();
    await this.forgetGone(now);
    // The same id live on another machine: a data dir copied (with its replica-id) while its server
    // runs. Two processes under one id would each take the other's leases and warm-pool members.
    const same = await first(this.db.select().from(replicas).where(eq(replicas.id, this.id)));
    if (same && same.hostname !== this.hostname && same.seen_at > now - this.leaseMs) throw new ReplicaIdInUseError(this.id, same.hostname);
    await this.write(now);
    await this.refresh(now);
  }

  /** This replica's row, written (again: after a crash, or after another replica forgot it). */
  private async write(now: number) {
    const row = { id: this.id, hostname: this.hostname, version: this.version, started_at: now, seen_at: now };
    await this.db.insert(replicas).values(row).onConflictDoUpdate({ target: replicas.id, set: { hostname: row.hostname, version: row.version, started_at: now, seen_at: now } });
  }

  private async forgetGone(now: number) {
    await this.db.delete(replicas).where(lt(replicas.seen_at, now - FORGET_AFTER_LEASES * this.leaseMs));
  }

  /** Renews this replica's row, forgets replicas long gone, and re-counts the live ones. */
  async heartbeat(): Promise<void> {
    const now = this.now();
    await this.forgetGone(now);
    const [row] = await this.db.update(replicas).set({ seen_at: now }).where(eq(replicas.id, this.id)).returning({ id: replicas.id });
    // Deleted by another replica after a long pause of this one: written again.
    if (!row) await this.write(now);
    await this.refresh(now);
  }

  private async refresh(now: number) {
    const r = await first(this.db.select({ n: count() }).from(replicas).where(gt(replicas.seen_at, now - this.leaseMs)));
    this.live = Math.max(1, Number(r?.n ?? 1));
  }

  /** Replicas seen within a lease, at least 1 (this one). */
  liveCount(): number {
    return this.live;
  }

  /** Every registered replica, and whether it is live (GET /admin/stats, doctor). */
  async list(): Promise<(ReplicaInfo & { live: boolean; self: boolean })[]> {
    const now = this.now();
    const rows = await this.db.select().from(replicas).orderBy(replicas.started_at);
    return rows.map((r) => ({ ...r, live: r.seen_at > now - this.leaseMs, self: r.id === this.id }));
  }

  /**
   * A clean stop: the row is marked not seen for a lease, so the others stop counting this replica
   * at their next heartbeat (their rate-limit shares grow back), but it stays registered — its
   * warm-pool members are left for it to adopt when it starts again on its data dir — until it has
   * been gone for FORGET_AFTER_LEASES.
   */
  async leave(): Promise<void> {
    await this.db.update(replicas).set({ seen_at: this.now() - this.leaseMs - 1 }).where(eq(replicas.id, this.id));
  }
}
