/**
 * A playbook's runs: its tasks (`tasks.playbook_id`) and the slots that never became a task
 * (`playbook_missed_runs`: skipped while the previous run still went, or refused by a limit), in
 * one list, newest first, keyset-paged on (created_at, key).
 */
import type { Database } from "bun:sqlite";
import { and, count, eq, inArray, type SQL, sql } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { ACTIVE_TASK_STATUSES, type MissedRunRow, type RunTrigger } from "../db/schema.ts";
import { missedRuns, tasks } from "../db/tables.ts";
import { isPostgres, run, type Unit } from "../db/unit.ts";
import type { Page } from "../db/paginate.ts";
import { Errors, type ErrorCode } from "../lib/errors.ts";
import { iso } from "../lib/time.ts";
import { roundUsd } from "../lib/usd.ts";
import type { PlaybookRun } from "../schema/playbook.ts";

interface RunRow {
  key: string;
  task_id: string | null;
  session_id: string | null;
  trigger: RunTrigger | null;
  status: PlaybookRun["status"];
  error_code: string | null;
  error_message: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  scheduled_for: number | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

/** The list as SQLite's SQL, for bun:sqlite's cached statements (printf; ?1 the playbook). */
const UNION = `SELECT * FROM (
  SELECT t.id AS key, t.id AS task_id, t.session_id, t.trigger, t.status, t.error_code, t.error_message, t.input_tokens, t.output_tokens,
         t.cost_usd, t.scheduled_for, t.created_at, t.started_at, t.finished_at AS ended_at
    FROM tasks t WHERE t.playbook_id = ?1
  UNION ALL
  SELECT printf('m%019d', m.id), NULL, NULL, m.trigger, m.status, m.error_code, m.error_message, 0, 0, 0, m.scheduled_for, m.created_at, NULL, m.created_at
    FROM playbook_missed_runs m WHERE m.playbook_id = ?1
)`;

/**
 * The list as PostgreSQL's SQL: the same union, with the missed run's key `m` + its id
 * zero-padded to 19 digits in PostgreSQL's words. The key compares COLLATE "C" (bytewise, as
 * SQLite's), whatever the database's collation.
 */
function unionSql(playbookId: string, limit: number, after: { at: number; key: string } | null): SQL {
  const key = sql.raw(`'m' || lpad(m.id::text, 19, '0')`);
  const k = sql.raw(`key COLLATE "C"`);
  const where = after ? sql` WHERE created_at < ${after.at} OR (created_at = ${after.at} AND ${k} < ${after.key})` : sql``;
  return sql`SELECT * FROM (
  SELECT t.id AS key, t.id AS task_id, t.session_id, t.trigger, t.status, t.error_code, t.error_message, t.input_tokens, t.output_tokens,
         t.cost_usd, t.scheduled_for, t.created_at, t.started_at, t.finished_at AS ended_at
    FROM tasks t WHERE t.playbook_id = ${playbookId}
  UNION ALL
  SELECT ${key}, NULL, NULL, m.trigger, m.status, m.error_code, m.error_message, 0, 0, 0, m.scheduled_for, m.created_at, NULL, m.created_at
    FROM playbook_missed_runs m WHERE m.playbook_id = ${playbookId}
) AS runs${where} ORDER BY created_at DESC, ${k} DESC LIMIT ${limit}`;
}

/** A raw row as PostgreSQL answers it (bigint and numeric columns as strings) made a RunRow. */
const num = (v: unknown): number => Number(v ?? 0);
const numOrNull = (v: unknown): number | null => (v == null ? null : Number(v));
const fromRaw = (r: Record<string, unknown>): RunRow => ({
  key: r.key as string,
  task_id: (r.task_id as string | null) ?? null,
  session_id: (r.session_id as string | null) ?? null,
  trigger: (r.trigger as RunTrigger | null) ?? null,
  status: r.status as RunRow["status"],
  error_code: (r.error_code as string | null) ?? null,
  error_message: (r.error_message as string | null) ?? null,
  input_tokens: num(r.input_tokens),
  output_tokens: num(r.output_tokens),
  cost_usd: num(r.cost_usd),
  scheduled_for: numOrNull(r.scheduled_for),
  created_at: num(r.created_at),
  started_at: numOrNull(r.started_at),
  ended_at: numOrNull(r.ended_at),
});

const toRun = (r: RunRow): PlaybookRun => ({
  task_id: r.task_id,
  session_id: r.session_id,
  trigger: r.trigger ?? "manual",
  status: r.status,
  error: r.error_code ? { code: r.error_code, message: r.error_message ?? "" } : null,
  input_tokens: r.input_tokens,
  output_tokens: r.output_tokens,
  cost_usd: roundUsd(r.cost_usd),
  scheduled_for: iso(r.scheduled_for),
  created_at: iso(r.created_at),
  started_at: iso(r.started_at),
  ended_at: iso(r.ended_at),
});

export interface MissedRun {
  playbookId: string;
  userId: string;
  trigger: RunTrigger;
  status: MissedRunRow["status"];
  code?: ErrorCode | null;
  message?: string | null;
  scheduledFor?: number | null;
  at: number;
}

const CURSOR = /^(\d{1,15})\.([A-Za-z0-9_]{1,64})$/;

export class PlaybookRuns {
  /** `sqlite`: the bun:sqlite connection behind `db`, for its cached statements (absent on PostgreSQL). */
  constructor(
    private db: DB,
    private sqlite?: Database | null,
  ) {}

  /** Up to `n` runs, newest first, after the cursor position `after` (or from the newest). */
  private async rows(playbookId: string, n: number, after: { at: number; key: string } | null): Promise<RunRow[]> {
    if (isPostgres(this.db)) {
      const pg = this.db as unknown as { execute(q: SQL): Promise<Record<string, unknown>[]> };
      return (await pg.execute(unionSql(playbookId, n, after))).map(fromRaw);
    }
    // SQLite always has its bun:sqlite connection (openStore); it caches the compiled statement per query text.
    const sqlite = this.sqlite!;
    if (!after) return sqlite.query<RunRow, [string, number]>(`${UNION} ORDER BY created_at DESC, key DESC LIMIT ?2`).all(playbookId, n);
    return sqlite
      .query<RunRow, [string, number, number, string]>(`${UNION} WHERE created_at < ?3 OR (created_at = ?3 AND key < ?4) ORDER BY created_at DESC, key DESC LIMIT ?2`)
      .all(playbookId, n, after.at, after.key);
  }

  /** Newest first; `cursor` is the previous page's next_cursor. */
  async list(playbookId: string, p: { limit?: number; cursor?: string }): Promise<Page<PlaybookRun>> {
    const limit = p.limit ?? 20;
    let rows: RunRow[];
    if (p.cursor) {
      const m = CURSOR.exec(p.cursor);
      if (!m) throw Errors.validation("cursor", "cursor is not a next_cursor of this list");
      rows = await this.rows(playbookId, limit + 1, { at: Number(m[1]), key: m[2]! });
    } else rows = await this.rows(playbookId, limit + 1, null);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { data: page.map(toRun), next_cursor: rows.length > limit && last ? `${last.created_at}.${last.key}` : null };
  }

  async recent(playbookId: string, n: number): Promise<PlaybookRun[]> {
    return (await this.rows(playbookId, n, null)).map(toRun);
  }

  /** Whether a run of the playbook is still queued, running or waiting for an answer. */
  async hasActive(playbookId: string): Promise<boolean> {
    const row = await first(this.db.select({ n: count() }).from(tasks).where(and(eq(tasks.playbook_id, playbookId), inArray(tasks.status, ACTIVE_TASK_STATUSES))));
    return row!.n > 0;
  }

  /** Records a slot that did not become a task: a unit the caller `yield*`s inside its own (the slot's claim). */
  *missedRun(tx: DB, r: MissedRun): Unit<void> {
    yield* run(
      tx
        .insert(missedRuns)
        .values({ playbook_id: r.playbookId, user_id: r.userId, trigger: r.trigger, status: r.status, error_code: r.code ?? null, error_message: r.message ?? null, scheduled_for: r.scheduledFor ?? null, created_at: r.at }),
    );
  }
}
