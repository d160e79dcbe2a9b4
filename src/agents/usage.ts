/**
 * Usage reports (GET /v1/usage): the caller's tasks — tokens, cost, count — summed per UTC day
 * or per profile over a range (by the task's creation time; a task's figures are its totals).
 */
import type { Database, Statement } from "bun:sqlite";
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

export class UsageReports {
  private byDay: Statement<Row, [string, number, number]>;
  private byProfile: Statement<Row & { profile_name: string | null }, [string, number, number]>;

  constructor(
    sqlite: Database,
    private now: () => number,
  ) {
    // SQLite SQL (strftime/unixepoch; a correlated subquery on an ungrouped column): a per-dialect statement later (issue 17).
    const sums = "count(*) AS tasks, coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens, coalesce(sum(cost_usd), 0) AS cost_usd";
    this.byDay = sqlite.prepare(
      `SELECT strftime('%Y-%m-%d', created_at / 1000, 'unixepoch') AS key, ${sums} FROM tasks WHERE user_id = ? AND created_at >= ? AND created_at < ? GROUP BY key`,
    );
    this.byProfile = sqlite.prepare(
      `SELECT t.profile_id AS key, (SELECT name FROM profiles p WHERE p.id = t.profile_id AND p.user_id = t.user_id) AS profile_name, ${sums.replace(/\b(input_tokens|output_tokens|cost_usd)\)/g, "t.$1)")}
       FROM tasks t WHERE t.user_id = ? AND t.created_at >= ? AND t.created_at < ? GROUP BY t.profile_id ORDER BY cost_usd DESC, key`,
    );
  }

  /** The report; `from` defaults to 30 days before `to`, `to` to now. */
  async report(userId: string, q: { from?: string; to?: string; group_by?: UsageGroup }): Promise<UsageReport> {
    const parse = (v: string | undefined, field: string, fallback: number) => {
      if (v === undefined) return fallback;
      const t = Date.parse(v);
      if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}/.test(v)) throw Errors.validation(field, `${field} must be an ISO 8601 date or time, e.g. 2026-11-01 or 2026-11-01T00:00:00Z`);
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
      const rows = new Map(this.byDay.all(userId, from, to).map((r) => [r.key, r]));
      data = [];
      for (let d = Math.floor(from / DAY) * DAY; d < to; d += DAY) {
        const key = new Date(d).toISOString().slice(0, 10);
        const r = rows.get(key);
        data.push({ key, profile_name: null, tasks: r?.tasks ?? 0, input_tokens: r?.input_tokens ?? 0, output_tokens: r?.output_tokens ?? 0, cost_usd: round(r?.cost_usd ?? 0) });
      }
    } else {
      data = this.byProfile.all(userId, from, to).map((r) => ({ ...r, cost_usd: round(r.cost_usd) }));
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
