/**
 * PostgreSQL migrations: the SQL drizzle-kit generates from src/db/pg/schema.ts (migrations-pg/),
 * embedded in the binary (src/db/pg/migrations.ts), applied in order, each in its own transaction
 * and recorded in `_migrations` — the same bookkeeping as the SQLite side (src/db/migrate.ts).
 * A database holding a migration this binary does not know is refused, untouched.
 */
import type { SQL } from "bun";
import { PG_MIGRATIONS } from "./migrations.ts";

const TABLE = "_migrations";

/** drizzle-kit separates the statements of one migration with this line. */
const BREAKPOINT = "--> statement-breakpoint";

export async function appliedPgTags(sql: SQL): Promise<string[]> {
  const [exists] = await sql.unsafe(`SELECT to_regclass('public.${TABLE}') IS NOT NULL AS ok`);
  if (!exists?.ok) return [];
  const rows = await sql.unsafe(`SELECT tag FROM ${TABLE} ORDER BY id`);
  return rows.map((r: { tag: string }) => r.tag);
}

/** Applies the pending migrations; returns their tags. */
export async function migratePostgres(sql: SQL): Promise<{ applied: string[] }> {
  await sql.unsafe(`CREATE TABLE IF NOT EXISTS ${TABLE} (id bigserial PRIMARY KEY, tag text NOT NULL UNIQUE, applied_at bigint NOT NULL)`);
  const done = await appliedPgTags(sql);
  const known = new Set(PG_MIGRATIONS.map((m) => m.tag));
  const unknown = done.find((t) => !known.has(t));
  if (unknown) throw new Error(`this PostgreSQL database has migration "${unknown}", which this runcell does not know: it was written by a newer runcell; nothing was changed`);
  const applied: string[] = [];
  for (const m of PG_MIGRATIONS) {
    if (done.includes(m.tag)) continue;
    await sql.begin(async (tx) => {
      for (const statement of m.sql.split(BREAKPOINT)) if (statement.trim()) await tx.unsafe(statement);
      await tx.unsafe(`INSERT INTO ${TABLE} (tag, applied_at) VALUES ($1, $2)`, [m.tag, Date.now()]);
    });
    applied.push(m.tag);
  }
  return { applied };
}
