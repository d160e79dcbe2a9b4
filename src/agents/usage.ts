/**
 * Usage reports (GET /v1/usage): the caller's tasks — tokens, cost, count — summed per UTC day
 * or per profile over a range (by the task's creation time; a task's figures are its totals).
 */
import { and, asc, count, desc, eq, gte, lt, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { profiles, tasks } from "../db/tables.ts";
import { isPostgres } from "../db/unit.ts";
import { Errors } from "../lib/errors.ts";
import { USAGE_MAX_DAYS, type UsageGroup, type UsageReport } from "../schema/usage.ts";

const DAY = 86_400_000;

interface Row {
  key: string;
  tasks: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

/** The sums of a group, numbers in both dialects (PostgreSQL's sum() of a bigint is numeric: a string). */
const sums = () => ({
  tasks: count(),
  input_tokens: sql<number>`coalesce(sum(${tasks.input_tokens}), 0)`.mapWith(Number),
  output_tokens: sql<number>`coalesce(sum(${tasks.output_tokens}), 0)`.mapWith(Number),
  cost_usd: sql<number>`coalesce(sum(${tasks.cost_usd}), 0)`.mapWith(Number),
});

export class UsageReports {
  constructor(
    private db: DB,
    private now: () => number,
  ) {}

  /** The caller's tasks created in [from, to), summed per UTC day (key YYYY-MM-DD; days without tasks absent). */
  private async byDay(userId: string, from: number, to: number): Promise<Row[]> {
    // The task's creation day in UTC, in each dialect's words (no parameters: GROUP BY repeats it).
    const day = isPostgres(this.db)
      ? sql<string>`to_char(to_timestamp(${tasks.created_at} / 1000.0) at time zone 'UTC', 'YYYY-MM-DD')`
      : sql<string>`strftime('%Y-%m-%d', ${tasks.created_at} / 1000, 'unixepoch')`;
    return this.db
      .select({ key: day, ...sums() })
      .from(tasks)
      .where(and(eq(tasks.user_id, userId), gte(tasks.created_at, from), lt(tasks.created_at, to)))
      .groupBy(day);
  }

  /** The same per profile (with its name while it exists), the most expensive first. */
  private async byProfile(userId: string, from: number, to: number): Promise<(Row & { profile_name: string | null })[]> {
    const s = sums();
    return this.db
      .select({ key: tasks.profile_id, profile_name: profiles.name, ...s })
      .from(tasks)
      .leftJoin(profiles, and(eq(profiles.id, tasks.profile_id), eq(profiles.user_id, tasks.user_id)))
      .where(and(eq(tasks.user_id, userId), gte(tasks.created_at, from), lt(tasks.created_at, to)))
      .groupBy(tasks.profile_id, profiles.name)
      .orderBy(desc(s.cost_usd), asc(tasks.profile_id));
  }

  /** The report; `from` defaults to 30 days before `to`, `to` to now. */
  async report(userId: string, q: { from?: string; to?: string; group_by?: UsageGroup }): Promise<UsageReport> {
    const parse = (v: string | undefined, field: string, fallback: number) => {
      if (v === undefined) return fallback;
      const t = Date.parse(v);
      const ymd = /^(\d{4})-(\d{2})-(\d{2})/.exec(v);
      if (!Number.isFinite(t) || !ymd) throw Errors.validation(field, `${field} must be an ISO 8601 date or time, e.g. 2026-11-01 or 2026-11-01T00:00:00Z`);
      // Date.parse rolls a day that does not exist over (2026-02-30 → March 2nd): refused instead.
      const [y, m, d] = [Number(ymd[1]), Number(ymd[2]), Number(ymd[3])];
      const day = new Date(Date.UTC(y, m - 1, d));
      if (day.getUTCFullYear() !== y || day.getUTCMonth() !== m - 1 || day.getUTCDate() !== d) {
        throw Errors.validation(field, `${field}: ${ymd[0]} is not a day of the calendar`, { reason: "no such date" });
      }
      return t;
    };
    const to = parse(q.to, "to", this.now());
    const from = parse(q.from, "from", to - 30 * DAY);
    if (from >= to) throw Errors.validation("from", "from must be before to");
    if (to - from > USAGE_MAX_DAYS * DAY) throw Errors.validation("from", `A report covers at most ${USAGE_MAX_DAYS} days`);
    const group = q.group_by ?? "day";
    const round = (n: number) => Math.round(n * 1e6) / 1e6;
    let data: UsageReport["data"];
    if (group === "day") {
      const rows = new Map((await this.byDay(userId, from, to)).map((r) => [r.key, r]));
      data = [];
      for (let d = Math.floor(from / DAY) * DAY; d < to; d += DAY) {
        const key = new Date(d).toISOString().slice(0, 10);
        const r = rows.get(key);
        data.push({ key, profile_name: null, tasks: r?.tasks ?? 0, input_tokens: r?.input_tokens ?? 0, output_tokens: r?.output_tokens ?? 0, cost_usd: round(r?.cost_usd ?? 0) });
      }
    } else {
      data = (await this.byProfile(userId, from, to)).map((r) => ({ ...r, cost_usd: round(r.cost_usd) }));
    }
    const totals = { tasks: 0, input_tokens: 0, output_tokens: 0, cost_usd: 0 };
    for (const b of data) {
      totals.tasks += b.tasks;
      totals.input_tokens += b.input_tokens;
      totals.output_tokens += b.output_tokens;
      totals.cost_usd += b.cost_usd;
    }
    totals.cost_usd = round(totals.cost_usd);
    return { from: new Date(from).toISOString(), to: new Date(to).toISOString(), group_by: group, data, totals };
  }
}
