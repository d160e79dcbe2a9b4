import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { sha256Hex } from "../lib/crypto.ts";
import { COMMIT, VERSION } from "../version.ts";
import { type Migration, MIGRATIONS } from "./migrations.ts";
import { RepairCounter, type RepairReport } from "./repairs.ts";

export type { Migration };

/** Settings key naming the runcell that last migrated the database (see SchemaWriter). */
export const SCHEMA_WRITER_KEY = "schema.writer";

/** Who wrote the database's schema: recorded in `settings` each time migrations are applied. */
export interface SchemaWriter {
  /** The runcell version that applied the latest migration. */
  version: string;
  commit: string;
  /** The latest migration's tag (the schema version). */
  schema: string;
  migrated_at: string;
}

/** The schema version of this binary: its newest embedded migration. */
export const BINARY_SCHEMA = MIGRATIONS[MIGRATIONS.length - 1]!.tag;

/** A commit worth naming: builds from source say "dev". */
const knownCommit = (commit: string | null | undefined): commit is string => !!commit && commit !== "dev" && commit !== "unknown";

/** "runcell 0.1.0 (commit abc123)": between releases the version alone does not tell two builds apart. */
export function buildName(version: string, commit: string | null | undefined): string {
  return `runcell ${version}${knownCommit(commit) ? ` (commit ${commit})` : ""}`;
}

/**
 * The words of every refusal of a newer schema (serve, migrate, the CLI commands, restore,
 * doctor): who wrote the database, which build this is, and what to run instead. The version is
 * not bumped with each schema change, so "run runcell <version> or newer" may name this very
 * version: then the writer's commit says which build.
 */
export function newerSchemaWords(writer: Pick<SchemaWriter, "version" | "commit"> | null): { writtenBy: string; thisBinary: string; runInstead: string } {
  const thisBinary = buildName(VERSION, COMMIT);
  if (!writer) return { writtenBy: "an unknown version", thisBinary, runInstead: "the newer runcell binary that migrated it" };
  const runInstead =
    writer.version !== VERSION
      ? `runcell ${writer.version} or newer`
      : knownCommit(writer.commit)
        ? `the build of commit ${writer.commit} (runcell ${writer.version}) or a later one`
        : `the runcell build that wrote it (a later build than this one, though both are ${VERSION})`;
  return { writtenBy: buildName(writer.version, writer.commit), thisBinary, runInstead };
}

/** How to go back to before the upgrade, in the refusal of a newer SQLite database. */
export const RESTORE_SQLITE_BACKUP = "restore a backup made before the upgrade (runcell restore <backup> --force; the automatic ones are in <data dir>/backups/)";

export class NewerDatabaseError extends Error {
  constructor(
    /** The first migration tag this binary does not know. */
    public readonly tag: string,
    /** The database's newest migration. */
    public readonly schema: string = tag,
    public readonly writer: SchemaWriter | null = null,
    public readonly binarySchema: string = BINARY_SCHEMA,
    /** The way back to the old schema (PostgreSQL has no automatic backups: a pg_dump). */
    restore: string = RESTORE_SQLITE_BACKUP,
  ) {
    const w = newerSchemaWords(writer);
    super(
      `this database was written by a newer runcell: ${w.writtenBy}, schema "${schema}" (it has migration "${tag}", which this binary does not know); ` +
        `this binary is ${w.thisBinary} and knows schema up to "${binarySchema}". Nothing was changed. ` +
        `Run ${w.runInstead}, or ${restore}.`,
    );
    this.name = "NewerDatabaseError";
  }
}

const TABLE = "_migrations";

const hasTable = (sqlite: Database, name: string) => !!sqlite.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name);

function appliedTags(sqlite: Database): string[] {
  if (!hasTable(sqlite, TABLE)) return [];
  return sqlite
    .query<{ tag: string }, []>(`SELECT tag FROM ${TABLE} ORDER BY id`)
    .all()
    .map((r) => r.tag);
}

/** The runcell that last migrated this database, when it recorded itself (runcell ≥ 0.1 with issue 14). */
export function schemaWriter(sqlite: Database): SchemaWriter | null {
  if (!hasTable(sqlite, "settings")) return null;
  const row = sqlite.query<{ value: string }, [string]>("SELECT value FROM settings WHERE key = ?").get(SCHEMA_WRITER_KEY);
  return row ? parseSchemaWriter(row.value) : null;
}

/** A stored `schema.writer` value (JSON text, or jsonb PostgreSQL's client parsed already); null when it is not one. */
export function parseSchemaWriter(value: unknown): SchemaWriter | null {
  try {
    const v = (typeof value === "string" ? JSON.parse(value) : value) as SchemaWriter | null;
    return v && typeof v.version === "string" ? v : null;
  } catch {
    return null;
  }
}

/** This runcell as the writer of a schema whose newest migration is `schema`. */
export const thisWriter = (schema: string): SchemaWriter => ({ version: VERSION, commit: COMMIT, schema, migrated_at: new Date().toISOString() });

/** What `migrate` would do, without writing anything. Throws NewerDatabaseError for a newer database. */
export function migrationStatus(sqlite: Database, migrations: Migration[] = MIGRATIONS) {
  const applied = appliedTags(sqlite);
  const known = migrations.map((m) => m.tag);
  applied.forEach((tag, i) => {
    if (known[i] !== tag) throw new NewerDatabaseError(tag, applied[applied.length - 1]!, schemaWriter(sqlite), known[known.length - 1] ?? "none");
  });
  return { applied, pending: migrations.slice(applied.length) };
}

export type SchemaState = "empty" | "current" | "older" | "newer";

export interface SchemaInfo {
  /** empty: no migration applied yet; older: migrations pending; newer: written by a newer runcell. */
  state: SchemaState;
  /** The database's schema version: its newest applied migration (null when empty). */
  schema: string | null;
  /** This binary's schema version. */
  binarySchema: string;
  applied: string[];
  /** Tags this binary would apply (state older or empty). */
  pending: string[];
  /** Tags the database has and this binary does not know (state newer). */
  unknown: string[];
  writer: SchemaWriter | null;
}

/** The database file exists but cannot be opened or read (damaged, or not this user's): nothing was changed. */
export class UnreadableDatabaseError extends Error {
  constructor(path: string, cause: unknown) {
    super(
      `cannot read the database ${path}: ${(cause as Error)?.message ?? String(cause)}. Nothing was changed. ` +
        "Check the file's owner and permissions (run runcell as the data dir's owner); if it is damaged, restore the latest backup " +
        "(runcell restore <file> --force; the pre-migration ones are in <data dir>/backups/).",
    );
    this.name = "UnreadableDatabaseError";
  }
}

/**
 * A database file's schema against this binary's, read-only (null: no database file yet). Throws
 * UnreadableDatabaseError when the file is there but cannot be read.
 */
export function schemaInfoOfFile(path: string): SchemaInfo | null {
  if (!existsSync(path)) return null;
  let db: Database | null = null;
  try {
    db = new Database(path, { readonly: true });
    db.exec("PRAGMA busy_timeout = 5000");
    return schemaInfo(db);
  } catch (e) {
    throw new UnreadableDatabaseError(path, e);
  } finally {
    db?.close();
  }
}

/** The database's schema compared with this binary's, without writing anything (never throws for a newer one). */
export function schemaInfo(sqlite: Database, migrations: Migration[] = MIGRATIONS): SchemaInfo {
  return compareSchema(appliedTags(sqlite), migrations, schemaWriter(sqlite));
}

/** The applied migrations (in the order they ran) against a binary's `migrations`: SQLite's and PostgreSQL's. */
export function compareSchema(applied: string[], migrations: Migration[], writer: SchemaWriter | null): SchemaInfo {
  const known = migrations.map((m) => m.tag);
  const binarySchema = known[known.length - 1] ?? "none";
  const schema = applied[applied.length - 1] ?? null;
  const firstUnknown = applied.findIndex((tag, i) => known[i] !== tag);
  if (firstUnknown >= 0) return { state: "newer", schema, binarySchema, applied, pending: [], unknown: applied.slice(firstUnknown), writer };
  const pending = known.slice(applied.length);
  const state: SchemaState = applied.length === 0 ? "empty" : pending.length ? "older" : "current";
  return { state, schema, binarySchema, applied, pending, unknown: [], writer };
}

/**
 * Applies the embedded drizzle-kit migrations that are not recorded yet, all in one transaction,
 * and records each, and this runcell's version as the schema's writer (settings
 * `schema.writer`, which an older binary quotes when it refuses the database). A database that
 * records a migration this binary does not know was written by a newer version: it is refused
 * before anything is written. `repaired`: what the repair migrations among them changed (./repairs.ts).
 */
export function migrate(sqlite: Database, migrations: Migration[] = MIGRATIONS): { applied: string[]; repaired: RepairReport[] } {
  const { pending } = migrationStatus(sqlite, migrations);
  if (pending.length === 0) return { applied: [], repaired: [] };
  const repairs = new RepairCounter();
  const run = sqlite.transaction(() => {
    sqlite.exec(
      `CREATE TABLE IF NOT EXISTS ${TABLE} (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE, hash TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
    );
    const record = sqlite.prepare(`INSERT INTO ${TABLE} (tag, hash, applied_at) VALUES (?, ?, ?)`);
    for (const m of pending) {
      for (const statement of m.sql.split("--> statement-breakpoint")) {
        if (statement.trim()) repairs.add(m.tag, statement, sqlite.run(statement).changes);
      }
      record.run(m.tag, sha256Hex(m.sql), Date.now());
    }
    sqlite.exec(`PRAGMA user_version = ${migrations.indexOf(pending[pending.length - 1]!) + 1}`);
    if (hasTable(sqlite, "settings")) {
      const writer = thisWriter(pending[pending.length - 1]!.tag);
      sqlite
        .prepare("INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at")
        .run(SCHEMA_WRITER_KEY, JSON.stringify(writer), Date.now());
    }
  });
  run.immediate();
  return { applied: pending.map((m) => m.tag), repaired: repairs.reports() };
}
