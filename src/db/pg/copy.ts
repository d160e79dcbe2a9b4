/**
 * Copies an installation's SQLite database into a PostgreSQL database that has runcell's schema
 * (src/db/pg/schema.ts, migrated by ./migrate.ts) and no rows: every table, in an order where each
 * row's foreign keys point at rows already copied, in batches, in one transaction — all or nothing.
 * Values are converted by the PostgreSQL column's type (0/1 → boolean, JSON text → jsonb, blobs →
 * bytea; everything else as stored); in a nullable JSON column SQL NULL and the JSON text `null`
 * both arrive as SQL NULL, as the app writes an absent value on PostgreSQL. Afterwards every table's row count is compared on both sides.
 * Encrypted values (the vault's secrets, webhook signing secrets, trigger URLs) are copied as
 * ciphertext: the data dir's secret.key still opens them. Each side's record of which runcell
 * wrote its schema (settings `schema.writer`) is its own: the target keeps the one migrating it
 * wrote, the source's (naming SQLite's schema) is not copied, and neither is counted.
 */
import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import { getTableName, is } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import { SCHEMA_WRITER_KEY } from "../migrate.ts";
import * as schema from "./schema.ts";
import { storableJson, storableText } from "./storable.ts";

/** Rows per INSERT (PostgreSQL takes at most 65,535 parameters in one statement). */
const BATCH_ROWS = 500;

export interface CopyProgress {
  table: string;
  copied: number;
  total: number;
}

export interface CopyReport {
  /** Per table: rows copied, and rows the SQLite table held (the verification compares PostgreSQL's count with it). */
  tables: { table: string; rows: number; source: number }[];
  rows: number;
}

interface ColumnPlan {
  name: string;
  /** An identity column: its sequence is moved past the copied ids. */
  identity: boolean;
  /** How a SQLite value becomes the PostgreSQL parameter, and the placeholder's cast. */
  convert: (v: unknown) => unknown;
  cast: string;
}

const asIs = (v: unknown) => v;
const toBoolean = (v: unknown) => (v === null || v === undefined ? null : v !== 0 && v !== "0" && v !== false);
/** U+0000, which SQLite keeps and PostgreSQL cannot (src/db/pg/storable.ts), becomes U+FFFD. */
const toJsonb = (v: unknown) => (typeof v === "string" ? storableJson(v) : v);
/**
 * A nullable JSON column: the JSON text `null` becomes SQL NULL. SQLite's prepared inserts
 * (src/db/prepared.ts) store an absent value as that text — drizzle encodes a placeholder's null
 * — where the app's writes on PostgreSQL leave SQL NULL (`sessions.repositories`); both read back
 * as null, but `IS NULL` tells them apart. A NOT NULL column keeps its JSON null.
 */
const toNullableJsonb = (v: unknown) => (typeof v === "string" && v.trim() === "null" ? null : toJsonb(v));
const toBytes = (v: unknown) => (v === null || v === undefined ? null : Buffer.from(v as Uint8Array));

function planOf(table: PgTable): ColumnPlan[] {
  return getTableConfig(table).columns.map((c) => {
    const type = c.getSQLType();
    const column = { name: c.name, identity: !!c.generatedIdentity };
    if (type === "boolean") return { ...column, convert: toBoolean, cast: "" };
    // Sent as text, then cast: Bun's client encodes a string bound to a jsonb parameter as a JSON
    // string, so `$1::jsonb` stored every document as one quoted string.
    if (type === "jsonb") return { ...column, convert: c.notNull ? toJsonb : toNullableJsonb, cast: "::text::jsonb" };
    if (type === "bytea") return { ...column, convert: toBytes, cast: "::bytea" };
    return { ...column, convert: type === "text" ? storableText : asIs, cast: "" };
  });
}

/** The schema's tables, parents before children (foreign keys to the same table are ignored). */
export function tablesInDependencyOrder(): PgTable[] {
  const tables = Object.values(schema as Record<string, unknown>).filter((t): t is PgTable => is(t, PgTable));
  const byName = new Map(tables.map((t) => [getTableName(t), t]));
  const parents = new Map(
    tables.map((t) => [getTableName(t), new Set(getTableConfig(t).foreignKeys.map((fk) => getTableName(fk.reference().foreignTable)).filter((p) => p !== getTableName(t)))]),
  );
  const ordered: PgTable[] = [];
  const done = new Set<string>();
  const visit = (name: string, path: string[]) => {
    if (done.has(name)) return;
    if (path.includes(name)) throw new Error(`foreign keys form a cycle: ${[...path, name].join(" → ")}`);
    for (const p of parents.get(name) ?? []) visit(p, [...path, name]);
    done.add(name);
    ordered.push(byName.get(name)!);
  };
  for (const name of [...byName.keys()].sort()) visit(name, []);
  return ordered;
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The rows of `table` that are runcell data: without either database's own schema bookkeeping. */
const dataRows = (table: string) => `${quote(table)}${table === "settings" ? ` WHERE key <> '${SCHEMA_WRITER_KEY}'` : ""}`;

/** Row counts of every schema table in the PostgreSQL database (its data rows). */
export async function postgresCounts(pg: SQL): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const t of tablesInDependencyOrder()) {
    const [r] = await pg.unsafe(`SELECT count(*)::bigint AS n FROM ${dataRows(getTableName(t))}`);
    counts.set(getTableName(t), Number(r.n));
  }
  return counts;
}

export async function copySqliteToPostgres(sqlite: Database, pg: SQL, onProgress: (p: CopyProgress) => void = () => {}): Promise<CopyReport> {
  const tables = tablesInDependencyOrder();
  const nonEmpty = [...(await postgresCounts(pg))].filter(([, n]) => n > 0);
  if (nonEmpty.length) {
    throw new Error(`the PostgreSQL database already holds runcell data (${nonEmpty.map(([t, n]) => `${t}: ${n}`).join(", ")}); copy into an empty database`);
  }
  const report: CopyReport = { tables: [], rows: 0 };
  await pg.begin(async (tx) => {
    for (const table of tables) {
      const name = getTableName(table);
      const plan = planOf(table);
      const total = (sqlite.query(`SELECT count(*) AS n FROM ${dataRows(name)}`).get() as { n: number }).n;
      const columns = plan.map((c) => quote(c.name)).join(", ");
      const select = sqlite.query(`SELECT ${columns} FROM ${dataRows(name)} ORDER BY rowid`);
      let copied = 0;
      let batch: Record<string, unknown>[] = [];
      const flush = async () => {
        if (!batch.length) return;
        const params: unknown[] = [];
        const rows = batch.map((row) => `(${plan.map((c) => `$${params.push(c.convert(row[c.name]))}${c.cast}`).join(", ")})`);
        await tx.unsafe(`INSERT INTO ${quote(name)} (${columns}) VALUES ${rows.join(", ")}`, params);
        copied += batch.length;
        batch = [];
        onProgress({ table: name, copied, total });
      };
      // A row at a time from SQLite (a table may not fit in memory), a batch at a time to PostgreSQL.
      for (const row of select.iterate() as Iterable<Record<string, unknown>>) {
        batch.push(row);
        if (batch.length >= BATCH_ROWS) await flush();
      }
      await flush();
      if (copied === 0) onProgress({ table: name, copied, total });
      // Identity columns took the copied ids as given: their sequences continue after the largest.
      for (const c of plan.filter((c) => c.identity)) {
        await tx.unsafe(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(max(${quote(c.name)}), 1), max(${quote(c.name)}) IS NOT NULL) FROM ${quote(name)}`, [quote(name), c.name]);
      }
      report.tables.push({ table: name, rows: copied, source: total });
      report.rows += copied;
    }
  });
  // The verification: every table's count, read back after the commit.
  const after = await postgresCounts(pg);
  const wrong = report.tables.filter((t) => after.get(t.table) !== t.source);
  if (wrong.length) throw new Error(`row counts differ after the copy: ${wrong.map((w) => `${w.table} (SQLite ${w.source}, PostgreSQL ${after.get(w.table)})`).join(", ")}`);
  return report;
}
