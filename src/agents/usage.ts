/**
 * Usage reports (GET /v1/usage): the caller's tasks — tokens, cost, count — summed per UTC day
 * or per profile over a range (by the task's creation time; a task's figures are its totals).
 * Tasks of deleted sessions count as before their deletion (deleted_task_usage).
 */
import { and, count, eq, gte, lt, type SQL, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { profiles, usageTables } from "../db/tables.ts";
import { isPostgres } from "../db/unit.ts";
import { Errors } from "../lib/errors.ts";
import { parseInstant } from "../lib/time.ts";
import { roundUsd } from "../lib/usd.ts";
import { USAGE_MAX_DAYS, type UsageGroup, type UsageReport } from "../schema/usage.ts";

const DAY = 86_400_000;

interface Row {
  key: string;
  tasks: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/** Where usage is read (db/tables.ts usageTables). */
type Source = ReturnType<typeof usageTables>[number];

export class UsageReports {
  constructor(
    private db: DB,
    private now: () => number,
  ) {}

  /**
   * The caller's tasks created in [from, to), live and of deleted sessions, as one table (`usage`)
   * of a bucket `key` and each task's figures: one query reads both sources.
   */
  private tasksIn(userId: string, from: number, to: number, keyOf: (t: Source) => SQL<string>) {
    const part = (t: Source) =>
      this.db
        .select({ key: keyOf(t).as("key"), input_tokens: t.input_tokens, output_tokens: t.output_tokens, cost_usd: t.cost_usd })
        .from(t)
        .where(and(eq(t.user_id, userId), gte(t.created_at, from), lt(t.created_at, to)));
    const [live, deleted] = usageTables();
    const usage = part(live).unionAll(part(deleted)).as("usage");
    // The sums of a bucket, numbers in both dialects (PostgreSQL's sum() of a bigint is numeric: a string).
    const sums = {
      tasks: count(),
      input_tokens: sql<number>`coalesce(sum(${usage.input_tokens}), 0)`.mapWith(Number),
      output_tokens: sql<number>`coalesce(sum(${usage.output_tokens}), 0)`.mapWith(Number),
      cost_usd: sql<number>`coalesce(sum(${usage.cost_usd}), 0)`.mapWith(Number),
    };
    return { usage, sums };
  }

  /** The caller's tasks created in [from, to), summed per UTC day (key YYYY-MM-DD; days without tasks absent). */
  private async byDay(userId: string, from: number, to: number): Promise<Map<string, Row>> {
    // The task's creation day in UTC, in each dialect's words.
    const pg = isPostgres(this.db);
    const { usage, sums } = this.tasksIn(userId, from, to, (t) =>
      pg ? sql<string>`to_char(to_timestamp(${t.created_at} / 1000.0) at time zone 'UTC', 'YYYY-MM-DD')` : sql<string>`strftime('%Y-%m-%d', ${t.created_at} / 1000, 'unixepoch')`,
    );
    const rows = await this.db.select({ key: usage.key, ...sums }).from(usage).groupBy(({ key }) => key);
    return new Map(rows.map((r) => [r.key, r]));
  }

  /** The same per profile (with its name while it exists), the most expensive first. */
  private async byProfile(userId: string, from: number, to: number): Promise<(Row & { profile_name: string | null })[]> {
    const { usage, sums } = this.tasksIn(userId, from, to, (t) => sql<string>`${t.profile_id}`);
    const rows = await this.db
      .select({ key: usage.key, profile_name: profiles.name, ...sums })
      .from(usage)
      .leftJoin(profiles, and(eq(profiles.id, usage.key), eq(profiles.user_id, userId)))
      .groupBy(({ key, profile_name }) => [key, profile_name]);
    return rows.sort((a, b) => b.cost_usd - a.cost_usd || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** The report; `from` defaults to 30 days before `to`, `to` to now. */
  async report(userId: string, q: { from?: string; to?: string; group_by?: UsageGroup }): Promise<UsageReport> {
    const parse = (v: string | undefined, field: string, fallback: number) => {
      if (v === undefined) return fallback;
      const r = parseInstant(v);
      if ("reason" in r) {
        throw Errors.validation(field, `${field}: ${r.reason}; send a UTC day (2026-11-01) or a date-time with Z or an offset (2026-11-01T09:00:00Z, 2026-11-01T10:00:00+01:00)`, { reason: r.reason });
      }
      return r.ms;
    };
    const to = parse(q.to, "to", this.now());
    const from = parse(q.from, "from", to - 30 * DAY);
    if (from >= to) throw Errors.validation("from", "from must be before to");
    if (to - from > USAGE_MAX_DAYS * DAY) throw Errors.validation("from", `A report covers at most ${USAGE_MAX_DAYS} days`);
    const group = q.group_by ?? "day";
    let data: UsageReport["data"];
    if (group === "day") {
      const rows = await this.byDay(userId, from, to);
      data = [];
      for (let d = Math.floor(from / DAY) * DAY; d < to; d += DAY) {
        const key = new Date(d).toISOString().slice(0, 10);
        const r = rows.get(key);
        data.push({ key, profile_name: null, tasks: r?.tasks ?? 0, input_tokens: r?.input_tokens ?? 0, output_tokens: r?.output_tokens ?? 0, cost_usd: roundUsd(r?.cost_usd ?? 0) });
      }
    } else {
      data = (await this.byProfile(userId, from, to)).map((r) => ({ ...r, cost_usd: roundUsd(r.cost_usd) }));
    }
    const totals = { tasks: 0, input_tokens: 0, output_tokens: 0, cost_usd: 0 };
    for (const b of data) {
      totals.tasks += b.tasks;
      totals.input_tokens += b.input_tokens;
      totals.output_tokens += b.output_tokens;
      totals.cost_usd += b.cost_usd;
    }
    totals.cost_usd = roundUsd(totals.cost_usd);
    return { from: new Date(from).toISOString(), to: new Date(to).toISOString(), group_by: group, data, totals };
  }
}
