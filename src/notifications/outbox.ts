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
 * transaction. On SQLite it is raw bun:sqlite statements prepared once (the hot path); otherwise
 * (PostgreSQL, or no bun:sqlite handle) it is the unit `stepUnit`, whose claim's subselect takes
 * its rows FOR UPDATE SKIP LOCKED on PostgreSQL, so servers sharing one database never claim the
 * same row. The other statements are drizzle queries both dialects share.
 *
 * Fairness (the worker's rules, applied by the claim; see claimSql): per integration at most
 * `perIntegration` attempts in flight on this server (the worker's own count of its attempts in
 * flight, `busy`), only 1 for an integration the worker reports as failing; and an
 * integration's second and further attempts in flight, like every attempt to a failing one, only
 * while more than `reserved` slots stay free. Hanging receivers thus hold their own few slots, never
 * the last `reserved`, which stay for webhooks with nothing in flight that have not just failed.
 */
import { forUpdate } from "../db/row-lock.ts";
import type { Database, Statement } from "bun:sqlite";
import { and, asc, eq, gte, inArray, isNotNull, isNull, lt, lte, notInArray, or, sql } from "drizzle-orm";
import { affected, type DB, first } from "../db/client.ts";
import { notificationAttempts, notificationLog } from "../db/tables.ts";
import { all, isPostgres, run, transact, type Unit } from "../db/unit.ts";

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

/** What a claim may take besides "due": the worker's fairness rules (see claimSql). */
export interface Fairness {
  /** Attempts in flight per integration on this server at most. */
  perIntegration: number;
  /** Integrations whose latest attempt on this server failed (until one is delivered): 1 attempt in flight each, from the shared slots. */
  failing: readonly string[];
  /** Slots a claim leaves free for first attempts: shared attempts are only taken while more than this many stay free. */
  reserved: number;
  /**
   * This server's attempts in flight per integration (the worker's own count; integrations with
   * none are absent). Kept in memory: counting the live leases in the table read every pending row
   * at every pass.
   */
  busy: ReadonlyMap<string, number>;
}

/**
 * SQL for the ids of the due rows a claim takes, at most `limit` (the free slots). Per integration,
 * its oldest due rows, as many as it has free of its cap once this server's attempts in flight on
 * it (`busy`, a table of integration_id and busy) are counted: `cap`, or 1 for a failing integration. A row is a *first* when it
 * would be the only attempt in flight of an integration that is not failing; any other row is
 * *shared* and is taken only while, after this claim's firsts, more than `reserved` slots stay
 * free. Firsts go before shared rows, each oldest due first. Rows without an integration (it was
 * deleted) fail without a request: neither capped nor shared.
 * `failing` is an SQL expression for a list of ids (`(…)` after IN); the others are SQL
 * expressions too (placeholders or literals).
 *
 * The candidates are found without ranking every due row (that cost ~1.5 ms a pass with 1,000 due
 * rows of one webhook): `ints` walks the integrations with pending rows in the
 * notification_log_claim index (status, integration_id, next_attempt_at, id), one seek each, and
 * each one's oldest `cap` due rows are read from the same index in order; only those are ranked,
 * from the columns that read gives (the table is not read again for them: on PostgreSQL that
 * second read became a scan of the whole table when its row estimates were off). No row beyond an
 * integration's `cap` oldest could be taken, so the result is the same as ranking them all.
 * `lateral`: PostgreSQL's LATERAL join for the per-integration read (27× faster there than the
 * correlated form with 5,000 rows of one webhook due); SQLite (which has no LATERAL) evaluates the
 * same correlated `IN (… LIMIT)` once per integration.
 */
function claimSql(p: { now: string; busy: string; cap: string; failing: string; limit: string; reserved: string; lateral: boolean }): string {
  const due = (t: string) =>
    `${t}.status = 'pending' AND ${t}.next_attempt_at <= ${p.now} AND ${t}.attempts < ${t}.max_attempts AND (${t}.lease_expires_at IS NULL OR ${t}.lease_expires_at <= ${p.now})`;
  const cols = (t: string) => `${t}.id, ${t}.integration_id, ${t}.next_attempt_at`;
  const oldest = (iid: string, what: string) => `SELECT ${what} FROM notification_log x WHERE x.integration_id = ${iid} AND ${due("x")} ORDER BY x.next_attempt_at, x.id LIMIT ${p.cap}`;
  // (`ints` ends with a NULL row, where its walk stops: no read for it — on PostgreSQL it was a scan
  // of every due row, looking for integration_id = NULL.)
  const perIntegration = p.lateral
    ? `SELECT ${cols("o")} FROM ints CROSS JOIN LATERAL (${oldest("ints.iid", cols("x"))}) o WHERE ints.iid IS NOT NULL`
    : `SELECT ${cols("m")} FROM ints JOIN notification_log m ON m.id IN (${oldest("ints.iid", "x.id")}) WHERE ints.iid IS NOT NULL`;
  return `SELECT id FROM (
      SELECT id, next_attempt_at, shared,
             ROW_NUMBER() OVER (PARTITION BY shared ORDER BY next_attempt_at, id) AS sn,
             SUM(1 - shared) OVER () AS firsts
      FROM (
        SELECT d.id, d.next_attempt_at,
               CASE WHEN d.integration_id IS NOT NULL AND (d.failing = 1 OR d.rn + COALESCE(b.busy, 0) > 1) THEN 1 ELSE 0 END AS shared
        FROM (
          SELECT c.id, c.integration_id, c.next_attempt_at,
                 CASE WHEN c.integration_id IN ${p.failing} THEN 1 ELSE 0 END AS failing,
                 ROW_NUMBER() OVER (PARTITION BY c.integration_id ORDER BY c.next_attempt_at, c.id) AS rn
          FROM (
            WITH RECURSIVE ints(iid) AS (
              SELECT (SELECT MIN(integration_id) FROM notification_log WHERE status = 'pending' AND integration_id IS NOT NULL)
              UNION ALL
              SELECT (SELECT MIN(n2.integration_id) FROM notification_log n2 WHERE n2.status = 'pending' AND n2.integration_id > ints.iid) FROM ints WHERE ints.iid IS NOT NULL)
            ${perIntegration}
            UNION ALL
            SELECT ${cols("z")} FROM notification_log z WHERE z.integration_id IS NULL AND ${due("z")}) c) d
        LEFT JOIN ${p.busy} b ON b.integration_id = d.integration_id
        WHERE d.integration_id IS NULL OR d.rn + COALESCE(b.busy, 0) <= CASE WHEN d.failing = 1 THEN 1 ELSE ${p.cap} END) f) s
    WHERE shared = 0 OR sn <= ${p.limit} - ${p.reserved} - firsts
    ORDER BY shared, next_attempt_at, id
    LIMIT ${p.limit}`;
}

const literal = (id: string) => `'${id.replaceAll("'", "''")}'`;

/** A list of ids as SQL literals, for `IN (…)` (never empty: '' matches no id). */
function idList(ids: readonly string[]): string {
  return `(${ids.length ? ids.map(literal).join(", ") : "''"})`;
}

/** The counts in flight as an SQL table (integration_id, busy) of literals; its first row, '', matches no integration. */
function busyTable(busy: ReadonlyMap<string, number>): string {
  const rows = [...busy].map(([id, n]) => ` UNION ALL SELECT ${literal(id)}, ${Math.trunc(n)}`).join("");
  return `(SELECT '' AS integration_id, 0 AS busy${rows})`;
}

/** The counts in flight as JSON, for the prepared claim's json_each. */
const busyJson = (busy: ReadonlyMap<string, number>) => JSON.stringify(Object.fromEntries(busy));

/** The prepared bun:sqlite statements of the SQLite fast path. */
interface Prepared {
  claim: Statement<Row, [string, number, number, number, string, number, string, number]>;
  delivered: Statement<unknown, [number, string, string]>;
  retry: Statement<unknown, [number, string, string, string]>;
  failed: Statement<unknown, [number, string, string, string]>;
  releaseOne: Statement<unknown, [number, string, string]>;
  attemptRow: Statement<unknown, [string, number, number, number, number | null, string | null]>;
}

export class Outbox {
  /** The SQLite fast path: one pass in one bun:sqlite transaction (null on PostgreSQL, or without a bun:sqlite handle). */
  private stepTx: ((settled: Settlement[], now: number, limit: number, leaseMs: number, fair: Fairness) => Claimed[]) | null = null;
  private waitMs: number[];

  /**
   * `backoffMs`: the waits after failed attempts 1, 2, …; the last one repeats. `sqlite`: the
   * bun:sqlite connection behind `db` for the prepared fast path (absent on PostgreSQL).
   */
  constructor(
    private db: DB,
    sqlite: Database | null | undefined,
    backoffMs: number[],
  ) {
    this.waitMs = backoffMs.map((w) => Math.max(0, Math.trunc(Number(w)) || 0));
    if (sqlite && !isPostgres(db)) this.prepare(sqlite, backoffMs);
  }

  private prepare(sqlite: Database, backoffMs: number[]) {
    // One statement claims a batch: it raises attempts and, if this attempt fails or the process
    // dies during it, makes the row due again after the schedule's wait (SET sees the old values).
    const claim: Prepared["claim"] = sqlite.prepare(
      `UPDATE notification_log
       SET attempts = attempts + 1, lease_id = ?1, lease_expires_at = ?2,
           next_attempt_at = CASE WHEN attempts + 1 < max_attempts THEN ?3 + ${waitSql("attempts + 1", backoffMs)} ELSE ?3 END
       WHERE id IN (${claimSql({ now: "?3", busy: "(SELECT key AS integration_id, value AS busy FROM json_each(?5))", cap: "?6", failing: "(SELECT value FROM json_each(?7))", limit: "?4", reserved: "?8", lateral: false })})
       RETURNING id, user_id, integration_id, payload, attempts, max_attempts`,
    );
    const done = `next_attempt_at = NULL, lease_id = NULL, lease_expires_at = NULL`;
    const delivered: Prepared["delivered"] = sqlite.prepare(
      `UPDATE notification_log SET status = 'delivered', delivered_at = ?1, ${done}, last_error = NULL WHERE id = ?2 AND lease_id = ?3`,
    );
    const retry: Prepared["retry"] = sqlite.prepare(
      `UPDATE notification_log SET next_attempt_at = ?1, lease_id = NULL, lease_expires_at = NULL, last_error = ?2 WHERE id = ?3 AND lease_id = ?4`,
    );
    const failed: Prepared["failed"] = sqlite.prepare(
      `UPDATE notification_log SET status = 'failed', failed_at = ?1, ${done}, last_error = ?2 WHERE id = ?3 AND lease_id = ?4`,
    );
    const releaseOne: Prepared["releaseOne"] = sqlite.prepare(
      `UPDATE notification_log SET attempts = attempts - 1, next_attempt_at = ?1, lease_id = NULL, lease_expires_at = NULL WHERE id = ?2 AND lease_id = ?3`,
    );
    const attemptRow: Prepared["attemptRow"] = sqlite.prepare(
      `INSERT INTO notification_attempts (notification_id, attempt, started_at, duration_ms, status_code, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
    );
    const p: Prepared = { claim, delivered, retry, failed, releaseOne, attemptRow };
    this.stepTx = sqlite.transaction((settled: Settlement[], now: number, limit: number, leaseMs: number, fair: Fairness) => {
      for (const f of settled) settlePrepared(p, f);
      if (limit <= 0) return [];
      const lease = crypto.randomUUID();
      return claim.all(lease, now + leaseMs, now, limit, busyJson(fair.busy), fair.perIntegration, JSON.stringify(fair.failing), fair.reserved).map(
        (r): Claimed => ({ id: r.id, user_id: r.user_id, integration_id: r.integration_id, payload: r.payload, attempt: r.attempts, max_attempts: r.max_attempts, lease }),
      );
    }) as never;
  }

  /**
   * One transaction per worker pass: records the outcomes of finished attempts, then leases up to
   * `limit` due rows (raising their attempt count before anything is sent) as the fairness rules
   * allow (`fair`; `limit` is the number of free slots). Batching both keeps the outbox at a few
   * commits per pass instead of two per delivery.
   */
  async step(settled: Settlement[], now: number, limit: number, leaseMs: number, fair: Fairness): Promise<Claimed[]> {
    if (settled.length === 0 && limit <= 0) return [];
    if (this.stepTx) return this.stepTx(settled, now, limit, leaseMs, fair);
    return transact(this.db, (tx) => this.stepUnit(tx, settled, now, limit, leaseMs, fair));
  }

  /**
   * The pass as a unit (PostgreSQL; SQLite without the prepared statements): writes each outcome,
   * then claims the rows claimSql picks in one UPDATE … WHERE id IN (SELECT …). On PostgreSQL the
   * subselect locks those rows FOR UPDATE SKIP LOCKED (not allowed on claimSql's window
   * functions, hence the outer SELECT over just the picked ids), so a row another server is
   * claiming at the same moment is passed over, never claimed twice (the WHERE is re-checked on
   * the locked row under READ COMMITTED, so a row claimed just before is not taken either).
   */
  private *stepUnit(tx: DB, settled: Settlement[], now: number, limit: number, leaseMs: number, fair: Fairness): Unit<Claimed[]> {
    for (const f of settled) yield* this.settleUnit(tx, f);
    if (limit <= 0) return [];
    const n = notificationLog;
    const lease = crypto.randomUUID();
    // CAST: PostgreSQL would type a bare parameter added to an integer as int4 (epoch ms overflow it).
    const at = sql`CAST(${now} AS bigint)`;
    // Literals, not parameters: numbers, a UUID of ours and integration ids of ours, never user input.
    const int = (x: number) => String(Math.trunc(x));
    const picked = sql.raw(
      `(${claimSql({ now: `CAST(${int(now)} AS bigint)`, busy: busyTable(fair.busy), cap: int(fair.perIntegration), failing: idList(fair.failing), limit: int(limit), reserved: int(fair.reserved), lateral: isPostgres(tx) })})`,
    );
    let due = tx
      .select({ id: n.id })
      .from(n)
      .where(
        and(
          eq(n.status, "pending"),
          lte(n.next_attempt_at, now),
          lt(n.attempts, n.max_attempts),
          or(isNull(n.lease_expires_at), lte(n.lease_expires_at, now)),
          // PostgreSQL: the picked ids as one array, computed first, then looked up by key. As a
          // plain IN, a planner whose row estimates lag a burst of inserts (before autoanalyze)
          // drove the join from every due row instead: 25 ms a pass with 5,000 due, not 3.
          isPostgres(tx) ? sql`${n.id} = ANY(ARRAY${picked})` : inArray(n.id, picked),
        ),
      );
    if (isPostgres(tx)) due = forUpdate(due, { skipLocked: true });
    const rows = yield* all(
      tx
        .update(n)
        .set({
          attempts: sql`${n.attempts} + 1`,
          lease_id: lease,
          lease_expires_at: now + leaseMs,
          next_attempt_at: sql`CASE WHEN ${n.attempts} + 1 < ${n.max_attempts} THEN ${at} + ${sql.raw(waitSql("(attempts + 1)", this.waitMs))} ELSE ${at} END`,
        })
        .where(inArray(n.id, due))
        .returning({ id: n.id, user_id: n.user_id, integration_id: n.integration_id, payload: n.payload, attempts: n.attempts, max_attempts: n.max_attempts }),
    );
    return rows.map((r): Claimed => ({ id: r.id, user_id: r.user_id, integration_id: r.integration_id, payload: r.payload, attempt: r.attempts, max_attempts: r.max_attempts, lease }));
  }

  /** Writes one outcome (the attempt's record, then the row, conditional on the lease); answers whether the lease still held. */
  private *settleUnit(tx: DB, f: Settlement): Unit<boolean> {
    const n = notificationLog;
    const { c } = f;
    const held = and(eq(n.id, c.id), eq(n.lease_id, c.lease));
    if (f.kind === "release") {
      return (yield* run(tx.update(n).set({ attempts: sql`${n.attempts} - 1`, next_attempt_at: f.at, lease_id: null, lease_expires_at: null }).where(held))) > 0;
    }
    const a = f.record;
    yield* run(
      tx.insert(notificationAttempts).values({ notification_id: c.id, attempt: c.attempt, started_at: a.startedAt, duration_ms: Math.round(a.durationMs), status_code: a.statusCode, error: a.error }),
    );
    const done = { next_attempt_at: null, lease_id: null, lease_expires_at: null };
    if (f.kind === "delivered") return (yield* run(tx.update(n).set({ status: "delivered", delivered_at: f.at, ...done, last_error: null }).where(held))) > 0;
    if (f.kind === "retry") return (yield* run(tx.update(n).set({ next_attempt_at: f.at, lease_id: null, lease_expires_at: null, last_error: f.error }).where(held))) > 0;
    return (yield* run(tx.update(n).set({ status: "failed", failed_at: f.at, ...done, last_error: f.error }).where(held))) > 0;
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

  /**
   * At start. SQLite: leases held by a previous process of this data dir are void (one server owns
   * a data dir), so its in-flight rows resume at their stored next_attempt_at. PostgreSQL: other
   * servers may share the database and hold live leases, so only leases that ran out (`now`) are
   * released; a previous process's rows resume once their lease expires.
   */
  async releaseStaleLeases(now: number): Promise<number> {
    const n = notificationLog;
    const stale = isPostgres(this.db) ? lte(n.lease_expires_at, now) : isNotNull(n.lease_id);
    return affected(await this.db.update(n).set({ lease_id: null, lease_expires_at: null }).where(and(eq(n.status, "pending"), isNotNull(n.lease_id), stale)));
  }

  /**
   * When the earliest unleased pending row that this server could claim is due, or null when there
   * is none, given `free` slots now (the same rules as claimSql). Left out: rows of an integration
   * already at its cap here (1 when failing), and while no more than `fair.reserved` slots are
   * free, every row that would be a shared attempt (a failing integration's, or one of an
   * integration with an attempt in flight). The end of an attempt wakes the worker for those; a
   * timer for them would only fire into claims that take nothing.
   */
  async nextDueAt(fair: Fairness, free: number): Promise<number | null> {
    const n = notificationLog;
    const open = free > fair.reserved;
    const failing = new Set(fair.failing);
    const blocked = new Set([...fair.busy].filter(([id, k]) => k >= (!open ? 1 : failing.has(id) ? 1 : fair.perIntegration)).map(([id]) => id));
    if (!open) for (const id of failing) blocked.add(id);
    const claimable = blocked.size ? or(isNull(n.integration_id), notInArray(n.integration_id, [...blocked])) : undefined;
    const row = await first(
      this.db
        .select({ at: n.next_attempt_at })
        .from(n)
        .where(and(eq(n.status, "pending"), isNull(n.lease_id), claimable))
        .orderBy(asc(n.next_attempt_at)),
    );
    return row?.at ?? null;
  }

  /**
   * Fails every pending delivery of an integration (it was deleted); answers how many. A unit: the
   * caller `yield*`s it inside the unit that deletes the integration, so both commit together.
   */
  *failForIntegration(tx: DB, integrationId: string, reason: string, now: number): Unit<number> {
    const n = notificationLog;
    return yield* run(
      tx
        .update(n)
        .set({ status: "failed", failed_at: now, next_attempt_at: null, lease_id: null, lease_expires_at: null, last_error: reason })
        .where(and(eq(n.integration_id, integrationId), eq(n.status, "pending"))),
    );
  }
}

/** Applies one outcome with the prepared statements; false when the lease no longer held (e.g. the integration was deleted meanwhile). */
function settlePrepared(p: Prepared, f: Settlement): boolean {
  const { c } = f;
  if (f.kind === "release") return p.releaseOne.run(f.at, c.id, c.lease).changes > 0;
  const a = f.record;
  p.attemptRow.run(c.id, c.attempt, a.startedAt, Math.round(a.durationMs), a.statusCode, a.error);
  if (f.kind === "delivered") return p.delivered.run(f.at, c.id, c.lease).changes > 0;
  if (f.kind === "retry") return p.retry.run(f.at, f.error, c.id, c.lease).changes > 0;
  return p.failed.run(f.at, f.error, c.id, c.lease).changes > 0;
}
