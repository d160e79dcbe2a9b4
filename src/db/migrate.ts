import type { Database } from "bun:sqlite";
import { type Migration, MIGRATIONS } from "./migrations.ts";

export type { Migration };

export class NewerDatabaseError extends Error {
  constructor(public readonly tag: string) {
    super(
      `this database was written by a newer runcell (it has migration "${tag}", which this binary does not know). ` +
        `Nothing was changed. Run the newer runcell binary, or restore a backup made by this version.`,
    );
  }
}

const TABLE = "_migrations";

function appliedTags(sqlite: Database): string[] {
  const exists = sqlite.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(TABLE);
  if (!exists) return [];
  return sqlite
    .query<{ tag: string }, []>(`SELECT tag FROM ${TABLE} ORDER BY id`)
    .all()
    .map((r) => r.tag);
}

/** What `migrate` would do, without writing anything. */
export function migrationStatus(sqlite: Database, migrations: Migration[] = MIGRATIONS) {
  const applied = appliedTags(sqlite);
  const known = migrations.map((m) => m.tag);
  applied.forEach((tag, i) => {
    if (known[i] !== tag) throw new NewerDatabaseError(tag);
  });
  return { applied, pending: migrations.slice(applied.length) };
}

/**
 * Applies the embedded drizzle-kit migrations that are not recorded yet, all in one transaction,
 * and records each. A database that records a migration this binary does not know was written by
 * a newer version: it is refused before anything is written.
 */
export function migrate(sqlite: Database, migrations: Migration[] = MIGRATIONS): { applied: string[] } {
  const { pending } = migrationStatus(sqlite, migrations);
  if (pending.length === 0) return { applied: [] };
  const run = sqlite.transaction(() => {
    sqlite.exec(
      `CREATE TABLE IF NOT EXISTS ${TABLE} (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE, hash TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
    );
    const record = sqlite.prepare(`INSERT INTO ${TABLE} (tag, hash, applied_at) VALUES (?, ?, ?)`);
    for (const m of pending) {
      for (const statement of m.sql.split("--> statement-breakpoint")) {
        if (statement.trim()) sqlite.exec(statement);
      }
      record.run(m.tag, new Bun.CryptoHasher("sha256").update(m.sql).digest("hex"), Date.now());
    }
    sqlite.exec(`PRAGMA user_version = ${migrations.indexOf(pending[pending.length - 1]!) + 1}`);
  });
  run.immediate();
  return { applied: pending.map((m) => m.tag) };
}
