import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "../config.ts";
import { DB_FILE } from "../db/data-dir.ts";
import { BINARY_SCHEMA, newerSchemaWords, type SchemaInfo, schemaInfo } from "../db/migrate.ts";
import { COMMIT, VERSION } from "../version.ts";
import { type Command, dataDirFrom, failUsage, UsageError } from "./command.ts";

/** Exit statuses of `runcell version --check-db`. */
export const CHECK_DB_EXIT = { current: 0, error: 1, usage: 2, older: 3, newer: 4 } as const;

function describe(info: SchemaInfo, path: string): string {
  const by = info.writer ? ` (written by runcell ${info.writer.version})` : "";
  switch (info.state) {
    case "current":
      return `current: ${path} has schema ${info.schema}${by}, the same as this runcell ${VERSION}`;
    case "empty":
      return `older: ${path} has no schema yet; serve or migrate creates it (${info.pending.length} migrations)`;
    case "older":
      return (
        `older: ${path} has schema ${info.schema}${by}; this runcell ${VERSION} has ${info.binarySchema} and will apply ${info.pending.join(", ")} ` +
        `at the next serve or migrate, after a backup into ${join(dirname(path), "backups")}/`
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

export const versionCommand: Command = {
  name: "version",
  summary: "Print the runcell version, its git commit and the Bun runtime version; --check-db compares the database's schema.",
  usage: "runcell version [--json] [--check-db [--data-dir DIR]]",
  details: `  --json        machine-readable output
  --check-db    also tell whether the data dir's database is current, older (this binary will migrate it)
                or newer (written by a newer runcell; this binary refuses it). Read-only.
  --data-dir    the data dir for --check-db (default: $RUNCELL_DATA_DIR, else ./runcell_data)

  Exit status with --check-db: 0 current, 3 older (migrations pending, or no schema yet),
  4 newer, 1 no database or unreadable, 2 bad usage.`,
  examples: ["runcell version", "runcell version --json", "runcell version --check-db --data-dir /var/lib/runcell"],
  async run(argv) {
    let json = false;
    let check = false;
    let dataDirFlag: string | boolean | undefined;
    try {
      const args = parseArgs(argv, { json: false, "check-db": false, "data-dir": true }, false);
      if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}" (see --help)`);
      json = args.extra.get("json") === true;
      check = args.extra.get("check-db") === true;
      dataDirFlag = args.extra.get("data-dir");
    } catch (e) {
      return failUsage("version", e);
    }
    const info = { version: VERSION, commit: COMMIT, bun: Bun.version, schema: BINARY_SCHEMA };
    if (!check) {
      if (json) console.log(JSON.stringify(info));
      else console.log(`runcell ${info.version} (commit ${info.commit}, bun ${info.bun}, schema ${info.schema})`);
      return 0;
    }
    const dataDir = dataDirFrom(dataDirFlag);
    const path = join(dataDir, DB_FILE);
    let db: SchemaInfo;
    try {
      if (!existsSync(path)) throw new Error(`no database at ${path} (is --data-dir right?)`);
      const sqlite = new Database(path, { readonly: true });
      try {
        sqlite.exec("PRAGMA busy_timeout = 5000");
        db = schemaInfo(sqlite);
      } finally {
        sqlite.close();
      }
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
      console.log(`runcell ${info.version} (commit ${info.commit}, bun ${info.bun}, schema ${info.schema})`);
      console.log(`database ${describe(db, path)}`);
    }
    return CHECK_DB_EXIT[state];
  },
};
