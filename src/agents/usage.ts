/**
 * Usage reports (GET /v1/usage): the caller's tasks — tokens, cost, count — summed per UTC day
 * or per profile over a range (by the task's creation time; a task's figures are its totals).
 * Tasks of deleted sessions count as before their deletion (deleted_task_usage).
 */
import { and, count, eq, gte, inArray, lt, sql } from "drizzle-orm";
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

/** The sums of a group, numbers in both dialects (PostgreSQL's sum() of a bigint is numeric: a string). */
const sums = (t: Source) => ({
  tasks: count(),
  input_tokens: sql<number>`coalesce(sum(${t.input_tokens}), 0)`.mapWith(Number),
  output_tokens: sql<number>`coalesce(sum(${t.output_tokens}), 0)`.mapWith(Number),
  cost_usd: sql<number>`coalesce(sum(${t.cost_usd}), 0)`.mapWith(Number),
});

/** Rows of the same key from several sources, added up (in the order first seen). */
function merge(rows: Row[]): Map<string, Row> {
  const out = new Map<string, Row>();
  for (const r of rows) {
    const m = out.get(r.key);
    if (!m) out.set(r.key, { ...r });
    else {
      m.tasks += r.tasks;
      m.input_tokens += r.input_tokens;
      m.output_tokens += r.output_tokens;
      m.cost_usd += r.cost_usd;
    }
  }
  return out;
}

export class UsageReports {
  constructor(
    private db: DB,
    private now: () => number,
  ) {}

  /** The caller's tasks created in [from, to), summed per UTC day (key YYYY-MM-DD; days without tasks absent). */
  private async byDay(userId: string, from: number, to: number): Promise<Map<string, Row>> {
    const rows: Row[] = [];
    for (const t of usageTables()) {
      // The task's creation day in UTC, in each dialect's words (no parameters: GROUP BY repeats it).
      const day = isPostgres(this.db)
        ? sql<string>`to_char(to_timestamp(${t.created_at} / 1000.0) at time zone 'UTC', 'YYYY-MM-DD')`
        : sql<string>`strftime('%Y-%m-%d', ${t.created_at} / 1000, 'unixepoch')`;
      rows.push(
        ...(await this.db
          .select({ key: day, ...sums(t) })
          .from(t)
          .where(and(eq(t.user_id, userId), gte(t.created_at, from), lt(t.created_at, to)))
          .groupBy(day)),
      );
    }
    return merge(rows);
  }

  /** The same per profile (with its name while it exists), the most expensive first. */
  private async byProfile(userId: string, from: number, to: number): Promise<(Row & { profile_name: string | null })[]> {
    const rows: Row[] = [];
    for (const t of usageTables()) {
      rows.push(
        ...(await this.db
          .select({ key: t.profile_id, ...sums(t) })
          .from(t)
          .where(and(eq(t.user_id, userId), gte(t.created_at, from), lt(t.created_at, to)))
          .groupBy(t.profile_id)),
      );
    }
    const merged = [...merge(rows).values()];
    const ids = merged.map((r) => r.key);
    const names = new Map(
      ids.length ? (await this.db.select({ id: profiles.id, name: profiles.name }).from(profiles).where(and(eq(profiles.user_id, userId), inArray(profiles.id, ids)))).map((p) => [p.id, p.name]) : [],
    );
    return merged
      .map(({ key, ...sums }) => ({ key, profile_name: names.get(key) ?? null, ...sums }))
      .sort((a, b) => b.cost_usd - a.cost_usd || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
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
