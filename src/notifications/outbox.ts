/**
 * The delivery outbox: rows of `notification_log` (the same table is the interface's notification
 * log). A row is `pending` until it ends `delivered` or `failed`. The worker claims due rows with
 * a lease (lease_id + lease_expires_at), raising `attempts` and writing the time of the retry that
 * would follow a failure as `next_attempt_at` in the same statement, before anything is sent; so
 * a process killed mid-attempt leaves a row that resumes at that stored time after a restart.
 * Every finishing write is conditional on the lease, so a row that was failed meanwhile (its
 * integration deleted) is never overwritten. All statements are prepared once.
 */
import type { Database, Statement } from "bun:sqlite";

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

/** Reason written when the final attempt was cut short by a crash (its outcome is unknown). */
export const INTERRUPTED = "the last attempt was interrupted by a server restart; its outcome is unknown";

type Row = { id: string; user_id: string; integration_id: string | null; payload: string; attempts: number; max_attempts: number };

export class Outbox {
  private due: Statement<Row, [number, number, number]>;
  private take: Statement<unknown, [number, string, number, number, string]>;
  private abandon: Statement<unknown, [number, string, string]>;
  private delivered: Statement<unknown, [number, string, string]>;
  private retry: Statement<unknown, [number, string, string, string]>;
  private failed: Statement<unknown, [number, string, string, string]>;
  private releaseOne: Statement<unknown, [number, string, string]>;
  private attemptRow: Statement<unknown, [string, number, number, number, number | null, string | null]>;
  private nextDue: Statement<{ at: number }, []>;
  private failByIntegration: Statement<unknown, [number, string, string]>;
  private claimTx: (now: number, limit: number, leaseMs: number, waitAfter: (attempt: number) => number) => Claimed[];
  /** Records the attempt and applies the row's new state in one transaction; true if the lease still held. */
  private finishTx: (c: Claimed, a: AttemptRecord, apply: () => number) => boolean;

  constructor(private sqlite: Database) {
    this.due = sqlite.prepare(
      `SELECT id, user_id, integration_id, payload, attempts, max_attempts FROM notification_log
       WHERE status = 'pending' AND next_attempt_at <= ?1 AND (lease_expires_at IS NULL OR lease_expires_at <= ?2)
       ORDER BY next_attempt_at LIMIT ?3`,
    );
    this.take = sqlite.prepare(
      `UPDATE notification_log SET attempts = ?1, lease_id = ?2, lease_expires_at = ?3, next_attempt_at = ?4
       WHERE id = ?5 AND status = 'pending'`,
    );
    this.abandon = sqlite.prepare(
      `UPDATE notification_log SET status = 'failed', failed_at = ?1, next_attempt_at = NULL, lease_id = NULL, lease_expires_at = NULL, last_error = ?2
       WHERE id = ?3 AND status = 'pending'`,
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
    this.nextDue = sqlite.prepare(
      `SELECT next_attempt_at AS at FROM notification_log WHERE status = 'pending' AND lease_id IS NULL ORDER BY next_attempt_at LIMIT 1`,
    );
    this.failByIntegration = sqlite.prepare(
      `UPDATE notification_log SET status = 'failed', failed_at = ?1, next_attempt_at = NULL, lease_id = NULL, lease_expires_at = NULL, last_error = ?2
       WHERE integration_id = ?3 AND status = 'pending'`,
    );
    this.claimTx = sqlite.transaction((now: number, limit: number, leaseMs: number, waitAfter: (attempt: number) => number) => {
      const out: Claimed[] = [];
      for (const r of this.due.all(now, now, limit)) {
        if (r.attempts >= r.max_attempts) {
          this.abandon.run(now, INTERRUPTED, r.id);
          continue;
        }
        const attempt = r.attempts + 1;
        const lease = crypto.randomUUID();
        // If this attempt fails or the process dies during it, the row is due again at nextAt.
        const nextAt = attempt < r.max_attempts ? now + waitAfter(attempt) : now;
        this.take.run(attempt, lease, now + leaseMs, nextAt, r.id);
        out.push({ id: r.id, user_id: r.user_id, integration_id: r.integration_id, payload: r.payload, attempt, max_attempts: r.max_attempts, lease });
      }
      return out;
    }) as never;
    this.finishTx = sqlite.transaction((c: Claimed, a: AttemptRecord, apply: () => number) => {
      this.attemptRow.run(c.id, c.attempt, a.startedAt, Math.round(a.durationMs), a.statusCode, a.error);
      return apply() > 0;
    }) as never;
  }

  /** Leases up to `limit` due rows, raising their attempt count before anything is sent. */
  claim(now: number, limit: number, leaseMs: number, waitAfter: (attempt: number) => number): Claimed[] {
    return limit > 0 ? this.claimTx(now, limit, leaseMs, waitAfter) : [];
  }

  markDelivered(c: Claimed, now: number, a: AttemptRecord): boolean {
    return this.finishTx(c, a, () => this.delivered.run(now, c.id, c.lease).changes);
  }

  markRetry(c: Claimed, nextAt: number, error: string, a: AttemptRecord): boolean {
    return this.finishTx(c, a, () => this.retry.run(nextAt, error, c.id, c.lease).changes);
  }

  markFailed(c: Claimed, now: number, error: string, a: AttemptRecord): boolean {
    return this.finishTx(c, a, () => this.failed.run(now, error, c.id, c.lease).changes);
  }

  /** Gives a claimed row back untouched (the attempt was cut short by our own shutdown). */
  release(c: Claimed, now: number) {
    this.releaseOne.run(now, c.id, c.lease);
  }

  /**
   * At start: leases held by a previous process of this data dir are void (one server owns a data
   * dir), so its in-flight rows resume at their stored next_attempt_at.
   */
  releaseStaleLeases(): number {
    return this.sqlite.run(`UPDATE notification_log SET lease_id = NULL, lease_expires_at = NULL WHERE status = 'pending' AND lease_id IS NOT NULL`).changes;
  }

  /** When the earliest unleased pending row is due, or null when there is none. */
  nextDueAt(): number | null {
    return this.nextDue.get()?.at ?? null;
  }

  /** Fails every pending delivery of an integration (it was deleted). */
  failForIntegration(integrationId: string, reason: string, now: number): number {
    return this.failByIntegration.run(now, reason, integrationId).changes;
  }
}
