import { SQL } from "bun";
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Config, parseArgs, resolveConfig } from "../config.ts";
import { DB_FILE } from "../db/data-dir.ts";
import { BINARY_SCHEMA, newerSchemaWords, type SchemaInfo, schemaInfo } from "../db/migrate.ts";
import { DatabaseUnavailableError, redactDatabaseUrl } from "../db/pg/client.ts";
import { PG_BINARY_SCHEMA, pgSchemaInfo } from "../db/pg/migrate.ts";
import { COMMIT, VERSION } from "../version.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

/** The configuration version reads: where the database is (its kind picks the schema shown; --check-db reads it). */
const CHECK_FLAGS = ["data-dir", "database"] as const;

/** Exit statuses of `runcell version --check-db`. */
export const CHECK_DB_EXIT = { current: 0, error: 1, usage: 2, older: 3, newer: 4 } as const;

/** `path`: the SQLite file, or the PostgreSQL URL without its password (no automatic backup there). */
function describe(info: SchemaInfo, path: string, postgres: boolean): string {
  const by = info.writer ? ` (written by runcell ${info.writer.version})` : "";
  switch (info.state) {
    case "current":
      return `current: ${path} has schema ${info.schema}${by}, the same as this runcell ${VERSION}`;
    case "empty":
      return `older: ${path} has no schema yet; serve or migrate creates it (${info.pending.length} migrations)`;
    case "older":
      return (
        `older: ${path} has schema ${info.schema}${by}; this runcell ${VERSION} has ${info.binarySchema} and will apply ${info.pending.join(", ")} ` +
        `at the next serve or migrate${postgres ? " (take a pg_dump first)" : `, after a backup into ${join(dirname(path), "backups")}/`}`
      );
    case "newer": {
      const w = newerSchemaWords(info.writer);
      return (
        `newer: ${path} has schema ${info.schema}${info.writer ? ` (written by ${w.writtenBy})` : ""}, which this ${w.thisBinary} (schema ${info.binarySchema}) does not know ` +
        `(${info.unknown.join(", ")}); this binary refuses to serve it: run ${w.runInstead}`
      );
    }
  }
}

/** The binary's schema for the database the configuration names: SQLite's migrations and PostgreSQL's are numbered apart. */
function binarySchemaOf(config: Config): { dialect: "sqlite" | "postgres"; schema: string } {
  return config.databaseUrl ? { dialect: "postgres", schema: PG_BINARY_SCHEMA } : { dialect: "sqlite", schema: BINARY_SCHEMA };
}

export const versionCommand: Command = {
  name: "version",
  summary: "Print the runcell version, its git commit, the Bun runtime version and the schema it needs; --check-db compares the database's schema.",
  usage: "runcell version [--json] [--data-dir DIR | --database postgres://…] [--check-db]",
  details: `  --json        machine-readable output
  --check-db    also tell whether the data dir's database is current, older (this binary will migrate it)
                or newer (written by a newer runcell; this binary refuses it). Read-only.
  --data-dir    the data dir whose database is meant (default: $RUNCELL_DATA_DIR, else ./runcell_data)
  --database    a PostgreSQL database instead (default: $RUNCELL_DATABASE_URL, else the data dir's
                runcell.toml, else its SQLite file)

  The schema printed is the one this binary needs for that database: SQLite's and PostgreSQL's
  migrations are numbered apart ("PostgreSQL schema …" when the database is PostgreSQL). Without
  --check-db nothing is opened or connected to.

  Exit status with --check-db: 0 current, 3 older (migrations pending, or no schema yet),
  4 newer, 1 no database, unreadable or PostgreSQL unreachable, 2 bad usage.`,
  examples: [
    "runcell version",
    "runcell version --json",
    "runcell version --check-db --data-dir /var/lib/runcell",
    "runcell version --check-db --database postgres://runcell@db.internal/runcell",
  ],
  async run(argv) {
    let json = false;
    let check = false;
    let config: Config | null = null;
    try {
      const args = parseArgs(argv, { json: false, "check-db": false }, { command: "version", only: CHECK_FLAGS });
      if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}" (see --help)`);
      json = args.extra.get("json") === true;
      check = args.extra.get("check-db") === true;
      // Where the database is, resolved as admin and migrate resolve it (flags, environment, runcell.toml).
      try {
        config = resolveConfig(args.flags, process.env, CHECK_FLAGS);
      } catch (e) {
        // Plain `runcell version` still answers with a broken RUNCELL_DATABASE_URL or runcell.toml
        // (what was asked for is the binary's version); named flags and --check-db do not.
        if (check || args.flags.size) throw e;
        process.stderr.write(`runcell version: cannot tell which database is meant (${(e as Error).message}); showing the schema of both kinds\n`);
      }
    } catch (e) {
      return failUsage("version", e);
    }
    const binary = config ? binarySchemaOf(config) : null;
    const info = { version: VERSION, commit: COMMIT, bun: Bun.version, dialect: binary?.dialect ?? null, schema: binary?.schema ?? null };
    const schemaWords = !binary
      ? `schema ${BINARY_SCHEMA} on SQLite, ${PG_BINARY_SCHEMA} on PostgreSQL`
      : binary.dialect === "postgres"
        ? `PostgreSQL schema ${binary.schema}`
        : `schema ${binary.schema}`;
    const firstLine = `runcell ${info.version} (commit ${info.commit}, bun ${info.bun}, ${schemaWords})`;
    if (!check) {
      if (json) console.log(JSON.stringify(binary ? info : { ...info, schemas: { sqlite: BINARY_SCHEMA, postgres: PG_BINARY_SCHEMA } }));
      else console.log(firstLine);
      return 0;
    }
    const url = config!.databaseUrl;
    const path = url ? redactDatabaseUrl(url) : join(config!.dataDir, DB_FILE);
    let db: SchemaInfo;
    try {
      db = url ? await postgresSchemaInfo(url) : sqliteSchemaInfo(path);
    } catch (e) {
      if (json) console.log(JSON.stringify({ ...info, database: { path, state: "error", error: (e as Error).message } }));
      else console.error(`runcell version: ${(e as Error).message}`);
      return CHECK_DB_EXIT.error;
    }
    const state = db.state === "empty" ? "older" : db.state;
    if (json) {
      console.log(
        JSON.stringify({
          ...info,
          database: { path, state, schema: db.schema, written_by: db.writer, pending: db.pending, unknown: db.unknown },
        }),
      );
    } else {
      console.log(firstLine);
      console.log(`database ${describe(db, path, !!url)}`);
    }
    return CHECK_DB_EXIT[state];
  },
};

function sqliteSchemaInfo(path: string): SchemaInfo {
  if (!existsSync(path)) throw new Error(`no database at ${path} (is --data-dir right?)`);
  const sqlite = new Database(path, { readonly: true });
  try {
    sqlite.exec("PRAGMA busy_timeout = 5000");
    return schemaInfo(sqlite);
  } finally {
    sqlite.close();
  }
}

/** Read-only, on one connection of its own (never migrated; the URL's password never in messages). */
async function postgresSchemaInfo(url: string): Promise<SchemaInfo> {
  const sql = new SQL(url, { max: 1, connectionTimeout: 10 });
  try {
    return await pgSchemaInfo(sql);
  } catch (e) {
    throw DatabaseUnavailableError.at(url, e);
  } finally {
    await sql.close().catch(() => {});
  }
}
