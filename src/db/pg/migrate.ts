/**
 * PostgreSQL migrations: the SQL drizzle-kit generates from src/db/pg/schema.ts (migrations-pg/),
 * embedded in the binary (src/db/pg/migrations.ts), applied in order, each in its own transaction
 * and recorded in `_migrations` — the same bookkeeping as the SQLite side (src/db/migrate.ts),
 * including this runcell as the schema's writer (settings `schema.writer`). A database holding a
 * migration this binary does not know is refused (NewerDatabaseError), untouched.
 */
import type { SQL } from "bun";
import { compareSchema, NewerDatabaseError, parseSchemaWriter, SCHEMA_WRITER_KEY, type SchemaInfo, type SchemaWriter, thisWriter } from "../migrate.ts";
import type { Migration } from "../migrations.ts";
import { RepairCounter, type RepairReport } from "../repairs.ts";
import { PG_MIGRATIONS } from "./migrations.ts";

const TABLE = "_migrations";

/** This binary's PostgreSQL schema version: its newest embedded PostgreSQL migration (SQLite's is BINARY_SCHEMA). */
export const PG_BINARY_SCHEMA = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.tag;

/** drizzle-kit separates the statements of one migration with this line. */
const BREAKPOINT = "--> statement-breakpoint";

/** The way back from a newer schema: PostgreSQL gets no automatic pre-migration backup. */
const RESTORE_PG_DUMP = "restore a pg_dump made before the upgrade (pg_restore --clean)";

const hasTable = async (sql: SQL, name: string) => !!(await sql.unsafe(`SELECT to_regclass('public.${name}') IS NOT NULL AS ok`))[0]?.ok;

export async function appliedPgTags(sql: SQL): Promise<string[]> {
  if (!(await hasTable(sql, TABLE))) return [];
  const rows = await sql.unsafe(`SELECT tag FROM ${TABLE} ORDER BY id`);
  return rows.map((r: { tag: string }) => r.tag);
}

/** The runcell that last migrated this database, when it recorded itself. */
export async function pgSchemaWriter(sql: SQL): Promise<SchemaWriter | null> {
  if (!(await hasTable(sql, "settings"))) return null;
  const [row] = await sql.unsafe("SELECT value FROM settings WHERE key = $1", [SCHEMA_WRITER_KEY]);
  return row ? parseSchemaWriter(row.value) : null;
}

/** The database's schema against this binary's PG_MIGRATIONS, read-only (never throws for a newer one). */
export async function pgSchemaInfo(sql: SQL, migrations: Migration[] = PG_MIGRATIONS): Promise<SchemaInfo> {
  return compareSchema(await appliedPgTags(sql), migrations, await pgSchemaWriter(sql));
}

/** The refusal of a newer PostgreSQL schema: SQLite's words, with pg_dump as the way back. */
export const newerPgDatabase = (info: SchemaInfo) => new NewerDatabaseError(info.unknown[0]!, info.schema ?? info.unknown[0]!, info.writer, info.binarySchema, RESTORE_PG_DUMP);

/**
 * Applies the pending migrations (of `migrations`: this binary's unless a test gives the first
 * few); returns their tags and what the repair migrations among them changed (../repairs.ts).
 * Throws NewerDatabaseError before writing anything.
 */
export async function migratePostgres(sql: SQL, migrations: Migration[] = PG_MIGRATIONS): Promise<{ applied: string[]; repaired: RepairReport[] }> {
  const info = await pgSchemaInfo(sql, migrations);
  if (info.state === "newer") throw newerPgDatabase(info);
  await sql.unsafe(`CREATE TABLE IF NOT EXISTS ${TABLE} (id bigserial PRIMARY KEY, tag text NOT NULL UNIQUE, applied_at bigint NOT NULL)`);
  const pending = migrations.filter((m) => info.pending.includes(m.tag));
  const repairs = new RepairCounter();
  for (const m of pending) {
    await sql.begin(async (tx) => {
      for (const statement of m.sql.split(BREAKPOINT)) if (statement.trim()) repairs.add(m.tag, statement, Number((await tx.unsafe(statement)).count ?? 0));
      await tx.unsafe(`INSERT INTO ${TABLE} (tag, applied_at) VALUES ($1, $2)`, [m.tag, Date.now()]);
      // With the last one: an older binary quotes it when it refuses this schema. Sent as text and
      // cast (Bun's client would store a string bound to jsonb as one JSON string).
      if (m === pending[pending.length - 1]) {
        await tx.unsafe(
          "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2::text::jsonb, $3) ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
          [SCHEMA_WRITER_KEY, JSON.stringify(thisWriter(m.tag)), Date.now()],
        );
      }
    });
  }
  return { applied: pending.map((m) => m.tag), repaired: repairs.reports() };
}
