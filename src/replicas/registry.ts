/**
 * This server among the replicas sharing its database. Every server has an id of its own for the
 * life of its process (`rep_…`, in /healthz, /metrics, logs and the task leases it holds), writes
 * its row in `replicas` at start, renews `seen_at` every third of the lease (`--replica-lease`)
 * and removes the row on a clean stop. A row not renewed for a whole lease is a replica that is
 * gone: it no longer counts (`liveCount`, which divides the rate limits) and its task leases run
 * out at the same time (src/agents/leases.ts).
 *
 * On SQLite the one server is the only row; the registry works the same and costs one write every
 * few seconds.
 */
import { hostname } from "node:os";
import { and, count, eq, gt, lt } from "drizzle-orm";
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

export class Replicas {
  readonly id = newId("replica");
  readonly hostname = hostname();
  /** Replicas seen within a lease, this one included (refreshed at each heartbeat). */
  private live = 1;

  constructor(
    private db: DB,
    private now: () => number,
    readonly leaseMs: number,
    private version: string,
  ) {}

  /** How often the heartbeat runs. */
  get heartbeatMs(): number {
    return Math.max(250, Math.floor(this.leaseMs / 3));
  }

  /** Writes this replica's row; forgets rows of replicas long gone. */
  async register(): Promise<void> {
    const now = this.now();
    await this.db.delete(replicas).where(lt(replicas.seen_at, now - FORGET_AFTER_LEASES * this.leaseMs));
    await this.db.insert(replicas).values({ id: this.id, hostname: this.hostname, version: this.version, started_at: now, seen_at: now });
    await this.refresh(now);
  }

  /** Renews this replica's row and re-counts the live ones. */
  async heartbeat(): Promise<void> {
    const now = this.now();
    const [row] = await this.db.update(replicas).set({ seen_at: now }).where(eq(replicas.id, this.id)).returning({ id: replicas.id });
    // Deleted by another replica after a long pause of this one: written again.
    if (!row) await this.db.insert(replicas).values({ id: this.id, hostname: this.hostname, version: this.version, started_at: now, seen_at: now });
    await this.refresh(now);
  }

  private async refresh(now: number) {
    const r = await first(this.db.select({ n: count() }).from(replicas).where(and(gt(replicas.seen_at, now - this.leaseMs))));
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

  /** A clean stop: the row goes (other replicas stop counting this one at once). */
  async leave(): Promise<void> {
    await this.db.delete(replicas).where(eq(replicas.id, this.id));
  }
}
