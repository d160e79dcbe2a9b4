/**
 * Migrations that repair stored data rather than change the schema: the rows each of their
 * UPDATE statements changed are counted per table while they are applied (src/db/migrate.ts,
 * src/db/pg/migrate.ts) and reported — one warn line in serve's log, one line of `runcell migrate`
 * — with counts only, never a row's content. A repair that changed nothing reports nothing.
 */
import type { Logger } from "../log.ts";

/** The repair migrations of either database, by tag: what they repair, in words for the report. */
export const REPAIRS: Readonly<Record<string, string>> = {
  // SQLite's 0008 and PostgreSQL's 0003: a model server's bad token counts (a fraction, a count past
  // 2^53, a cost of Infinity or NaN) rounded or zeroed, and the sessions they were charged to summed again.
  "0008_repair_usage": "invalid token counts and costs (rounded or zeroed; the sessions they were charged to summed again)",
  "0003_repair_usage": "invalid token counts and costs (rounded or zeroed; the sessions they were charged to summed again)",
};

/** What one repair migration changed: rows per table (only tables with changed rows). */
export interface RepairReport {
  migration: string;
  repaired: string;
  rows: Record<string, number>;
}

/** The table an `UPDATE` statement (drizzle-kit's SQL, comments allowed) writes; null for any other statement. */
export function updatedTable(statement: string): string | null {
  const code = statement.replace(/^\s*--.*$/gm, "").trim();
  return /^UPDATE\s+[`"]?([A-Za-z0-9_]+)[`"]?\s/i.exec(code)?.[1] ?? null;
}

/** Counts the rows the statements of repair migrations change, while the migrations run. */
export class RepairCounter {
  private readonly counts = new Map<string, Map<string, number>>();

  /** After `statement` of migration `tag` changed `changes` rows. */
  add(tag: string, statement: string, changes: number): void {
    if (!(tag in REPAIRS)) return;
    const table = updatedTable(statement);
    if (!table || !changes) return;
    const rows = this.counts.get(tag) ?? new Map<string, number>();
    rows.set(table, (rows.get(table) ?? 0) + changes);
    this.counts.set(tag, rows);
  }

  /** The repairs that changed rows (none: an empty list). */
  reports(): RepairReport[] {
    return [...this.counts].map(([migration, rows]) => ({ migration, repaired: REPAIRS[migration]!, rows: Object.fromEntries(rows) }));
  }
}

/** Serve's log: one warn line per repair that changed rows. */
export function logRepairs(log: Logger, repairs: readonly RepairReport[], fields: Record<string, unknown> = {}): void {
  for (const r of repairs) log.warn("migration repaired stored rows", { ...fields, migration: r.migration, repaired: r.repaired, rows: r.rows });
}

/** The same for a command's output: `0008_repair_usage repaired tasks: 2 rows, sessions: 1 row (invalid …)`. */
export function repairLine(r: RepairReport): string {
  const counts = Object.entries(r.rows).map(([table, n]) => `${table}: ${n} row${n === 1 ? "" : "s"}`);
  return `${r.migration} repaired ${counts.join(", ")} (${r.repaired})`;
}
