/**
 * The delivery outbox: rows of `notification_log` (the same table is the interface's notification
 * log). A row is `pending` until it ends `delivered` or `failed`. The worker claims due rows with
 * a lease (lease_id + lease_expires_at), raising `attempts` and writing the time of the retry that
 * would follow a failure as `next_attempt_at` in the same statement, before anything is sent; so
 * a process killed mid-attempt leaves a row that resumes at that stored time after a restart.
 * Every finishing write is conditional on the lease, so a row that was failed meanwhile (its
 * integration deleted) is never overwritten.
 *
 * The methods are asynchronous (issue 17). A pass (`step`: record outcomes, then claim) is one
 * SQLite transaction of raw bun:sqlite statements prepared once: the claim's UPDATE … WHERE id IN
 * (SELECT … LIMIT) is SQLite's form (PostgreSQL gets its own, with FOR UPDATE SKIP LOCKED).
 * The other statements are drizzle queries both dialects share.
 */
import type { Database, Statement } from "bun:sqlite";
import { and, asc, eq, gte, isNotNull, isNull, lte, or } from "drizzle-orm";
import { affected, changes, type DB, first } from "../db/client.ts";
import { notificationLog } from "../db/tables.ts";

export interface Claimed {
  id: string;
  user_id: string;
  integration_id: string | null;
  payload: string;
  /** This attempt's number (1-based), already stored. */
  attempt: number;
  max_attempts: number;
  lease: string;
}

export interface AttemptRecord {
  startedAt: number;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
}

/**
 * The outcome of an attempt, to be written: `at` is the delivery/failure time, or for a retry the
 * time of the next attempt; `release` gives the row back untouched (our own shutdown cut it short).
 */
export type Settlement =
  | { kind: "delivered"; c: Claimed; at: number; record: AttemptRecord }
  | { kind: "retry" | "failed"; c: Claimed; at: number; error: string; record: AttemptRecord }
  | { kind: "release"; c: Claimed; at: number };

/** Reason written when the final attempt was cut short by a crash (its outcome is unknown). */
export const INTERRUPTED = "the last attempt was interrupted by a server restart; its outcome is unknown";

type Row = { id: string; user_id: string; integration_id: string | null; payload: string; attempts: number; max_attempts: number };

/** SQL for "the wait after failed attempt number <n>" from the schedule (the last wait repeats). */
function waitSql(n: string, backoffMs: number[]): string {
  const waits = backoffMs.map((w) => Math.max(0, Math.trunc(Number(w)) || 0));
  if (waits.length <= 1) return String(waits[0] ?? 0);
  return `(CASE ${n} ${waits.slice(0, -1).map((w, i) => `WHEN ${i + 1} THEN ${w}`).join(" ")} ELSE ${waits[waits.length - 1]} END)`;
}

export class Outbox {
  private claimStmt: Statement<Row, [string, number, number, number]>;
  private delivered: Statement<unknown, [number, string, string]>;
  private retry: Statement<unknown, [number, string, string, string]>;
  private failed: Statement<unknown, [number, string, string, string]>;
  private releaseOne: Statement<unknown, [number, string, string]>;
  private attemptRow: Statement<unknown, [string, number, number, number, number | null, string | null]>;
  private stepTx: (settled: Settlement[], now: number, limit: number, leaseMs: number) => Claimed[];

  /** `backoffMs`: the waits after failed attempts 1, 2, …; the last one repeats. */
  constructor(
    private db: DB,
    sqlite: Database,
    backoffMs: number[],
  ) {
    // One statement claims a batch: it raises attempts and, if this attempt fails or the process
    // dies during it, makes the row due again after the schedule's wait (SET sees the old values).
    this.claimStmt = sqlite.prepare(
      `UPDATE notification_log
       SET attempts = attempts + 1, lease_id = ?1, lease_expires_at = ?2,
           next_attempt_at = CASE WHEN attempts + 1 < max_attempts THEN ?3 + ${waitSql("attempts + 1", backoffMs)} ELSE ?3 END
       WHERE id IN (SELECT id FROM notification_log
                    WHERE status = 'pending' AND next_attempt_at <= ?3 AND attempts < max_attempts
                      AND (lease_expires_at IS NULL OR lease_expires_at <= ?3)
                    ORDER BY next_attempt_at LIMIT ?4)
       RETURNING id, user_id, integration_id, payload, attempts, max_attempts`,
    );
    const done = `next_attempt_at = NULL, lease_id = NULL, lease_expires_at = NULL`;
    this.delivered = sqlite.prepare(
      `UPDATE notification_log SET status = 'delivered', delivered_at = ?1, ${done}, last_error = NULL WHERE id = ?2 AND lease_id = ?3`,
    );
    this.retry = sqlite.prepare(
      `UPDATE notification_log SET next_attempt_at = ?1, lease_id = NULL, lease_expires_at = NULL, last_error = ?2 WHERE id = ?3 AND lease_id = ?4`,
    );
    this.failed = sqlite.prepare(
      `UPDATE notification_log SET status = 'failed', failed_at = ?1, ${done}, last_error = ?2 WHERE id = ?3 AND lease_id = ?4`,
    );
    this.releaseOne = sqlite.prepare(
      `UPDATE notification_log SET attempts = attempts - 1, next_attempt_at = ?1, lease_id = NULL, lease_expires_at = NULL WHERE id = ?2 AND lease_id = ?3`,
    );
    this.attemptRow = sqlite.prepare(
      `INSERT INTO notification_attempts (notification_id, attempt, started_at, duration_ms, status_code, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
    );
    this.stepTx = sqlite.transaction((settled: Settlement[], now: number, limit: number, leaseMs: number) => {
      for (const f of settled) this.settle(f);
      if (limit <= 0) return [];
      const lease = crypto.randomUUID();
      return this.claimStmt.all(lease, now + leaseMs, now, limit).map(
        (r): Claimed => ({ id: r.id, user_id: r.user_id, integration_id: r.integration_id, payload: r.payload, attempt: r.attempts, max_attempts: r.max_attempts, lease }),
      );
    }) as never;
  }

  /**
   * One transaction per worker pass: records the outcomes of finished attempts, then leases up to
   * `limit` due rows (raising their attempt count before anything is sent). Batching both keeps
   * the outbox at a few commits per pass instead of two per delivery.
   */
  async step(settled: Settlement[], now: number, limit: number, leaseMs: number): Promise<Claimed[]> {
    if (settled.length === 0 && limit <= 0) return [];
    // one statement block: gets a transaction of its own per dialect (issue 17)
    return this.stepTx(settled, now, limit, leaseMs);
  }

  /**
   * Ends rows whose final attempt never reported back (the process died during it, or its lease
   * ran out): the attempt count is spent and the outcome unknown, so they are failed, not retried.
   */
  async abandonSpent(now: number): Promise<number> {
    const n = notificationLog;
    return affected(
      await this.db
        .update(n)
        .set({ status: "failed", failed_at: now, next_attempt_at: null, lease_id: null, lease_expires_at: null, last_error: INTERRUPTED })
        .where(and(eq(n.status, "pending"), gte(n.attempts, n.max_attempts), or(isNull(n.lease_expires_at), lte(n.lease_expires_at, now)))),
    );
  }

  /** Applies one outcome; false when the lease no longer held (e.g. the integration was deleted meanwhile). */
  private settle(f: Settlement): boolean {
    const { c } = f;
    if (f.kind === "release") return this.releaseOne.run(f.at, c.id, c.lease).changes > 0;
    const a = f.record;
    this.attemptRow.run(c.id, c.attempt, a.startedAt, Math.round(a.durationMs), a.statusCode, a.error);
    if (f.kind === "delivered") return this.delivered.run(f.at, c.id, c.lease).changes > 0;
    if (f.kind === "retry") return this.retry.run(f.at, f.error, c.id, c.lease).changes > 0;
    return this.failed.run(f.at, f.error, c.id, c.lease).changes > 0;
  }

  /**
   * At start: leases held by a previous process of this data dir are void (one server owns a data
   * dir), so its in-flight rows resume at their stored next_attempt_at.
   */
  async releaseStaleLeases(): Promise<number> {
    const n = notificationLog;
    return affected(await this.db.update(n).set({ lease_id: null, lease_expires_at: null }).where(and(eq(n.status, "pending"), isNotNull(n.lease_id))));
  }

  /** When the earliest unleased pending row is due, or null when there is none. */
  async nextDueAt(): Promise<number | null> {
    const n = notificationLog;
    const row = await first(this.db.select({ at: n.next_attempt_at }).from(n).where(and(eq(n.status, "pending"), isNull(n.lease_id))).orderBy(asc(n.next_attempt_at)));
    return row?.at ?? null;
  }

  /**
   * Fails every pending delivery of an integration (it was deleted). Synchronous: it runs inside
   * the transaction that deletes the integration (`tx`), part of that one statement block.
   */
  failForIntegration(tx: Pick<DB, "update">, integrationId: string, reason: string, now: number): number {
    const n = notificationLog;
    return changes(
      tx
        .update(n)
        .set({ status: "failed", failed_at: now, next_attempt_at: null, lease_id: null, lease_expires_at: null, last_error: reason })
        .where(and(eq(n.integration_id, integrationId), eq(n.status, "pending")))
        .run(),
    );
  }
}
