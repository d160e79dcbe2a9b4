/**
 * For CLI commands that work on the data dir's database directly (admin, token, audit): opens the
 * database, and when this binary has migrations to apply, applies them the way `serve` and
 * `migrate` do — holding the data dir's lock, after the automatic pre-migration backup.
 *
 * A database that is current needs no lock: the command works next to a running server (WAL,
 * busy timeout), which is what these commands are for. One that needs migrating is never migrated
 * under a running process: when another process holds the lock (a server running an older runcell,
 * a migrate or restore), the command refuses, having changed nothing. A database written by a newer
 * runcell is refused (NewerDatabaseError), untouched. With --database postgres://… the commands
 * work on that database instead, and only when its schema is current: no lock says whether servers
 * running an older runcell share it (they could not start again once it is migrated), so these
 * commands leave migrating it to `serve` and `runcell migrate`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config.ts";
import { type DatabaseHandle, openDatabase } from "../db/client.ts";
import { DB_FILE, prepareDataDir } from "../db/data-dir.ts";
import { DatabaseUnavailableError, openPostgres, redactDatabaseUrl } from "../db/pg/client.ts";
import { databaseArgs } from "../db/pg/database-args.ts";
import { newerPgDatabase, pgSchemaInfo } from "../db/pg/migrate.ts";
import { acquireDataDirLock, DataDirLockedError, type DataDirLock } from "../db/lock.ts";
import { repairLine } from "../db/repairs.ts";
import { BINARY_SCHEMA, migrate, NewerDatabaseError, schemaInfo, schemaInfoOfFile, UnreadableDatabaseError } from "../db/migrate.ts";
import { AppError } from "../lib/errors.ts";
import { VERSION } from "../version.ts";
import { upgradeGuard } from "./backup.ts";

/** What the commands use of the database: SQLite's handle, or PostgreSQL's (--database). */
export interface CliDatabase {
  db: DatabaseHandle["db"];
  close(): void | Promise<void>;
}

/** The data dir cannot be opened for this command (printed as `runcell <command>: <message>`, exit 1). */
export class OpenDataDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OpenDataDirError";
  }
}

/**
 * Runs `work` on the data dir's database for `command` (its name, for messages) and closes it.
 * What the operator can act on (a refused value, a database written by a newer runcell, a data
 * dir another process holds) is printed as `runcell <command>: <message>` and answers exit 1;
 * anything else is thrown. Answers `work`'s exit code (0 when it returns none).
 */
export async function withDataDir(
  config: Config,
  command: string,
  work: (db: CliDatabase["db"]) => Promise<number | void>,
  opts: { report?: (line: string) => void; existing?: boolean } = {},
): Promise<number> {
  try {
    const handle = await openDataDir(config, { command, ...opts });
    try {
      return (await work(handle.db)) ?? 0;
    } finally {
      await handle.close();
    }
  } catch (e) {
    if (
      e instanceof AppError ||
      e instanceof NewerDatabaseError ||
      e instanceof UnreadableDatabaseError ||
      e instanceof OpenDataDirError ||
      e instanceof DatabaseUnavailableError
    ) {
      process.stderr.write(`runcell ${command}: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

/**
 * Opens the data dir's database for `command` (its name, for messages). Lines about the
 * pre-migration backup and the migrations go to `report` (stderr by default: `token create`
 * keeps stdout for the token alone). Throws NewerDatabaseError, or OpenDataDirError when the
 * database needs migrating and another process holds the data dir (or the backup failed), or it is
 * PostgreSQL's; DatabaseUnavailableError when PostgreSQL cannot be reached or read.
 */
export async function openDataDir(config: Config, opts: { command?: string; report?: (line: string) => void; existing?: boolean } = {}): Promise<CliDatabase> {
  const report = opts.report ?? ((line: string) => process.stderr.write(line + "\n"));
  if (config.databaseUrl) return openCurrentPostgres(config, opts.command, report);
  // A command that only reads what a server made (a token for an account, the audit log) does not
  // make a database in a mistyped --data-dir: it says where it looked.
  if (opts.existing && !existsSync(join(config.dataDir, DB_FILE))) {
    throw new OpenDataDirError(
      `there is no runcell database in ${config.dataDir} (no ${DB_FILE}); check --data-dir (or RUNCELL_DATA_DIR). Nothing was created. ` +
        `(A new installation makes its database with runcell serve or runcell admin create-user.)`,
    );
  }
  const path = prepareDataDir(config.dataDir);
  const info = schemaInfoOfFile(path);
  if (info?.state === "newer") throw new NewerDatabaseError(info.unknown[0]!, info.schema!, info.writer, info.binarySchema);
  if (info?.state === "current") return openCurrent(path);

  // Migrations to apply (or a new database to create): only as the data dir's one owner.
  let lock: DataDirLock;
  try {
    lock = acquireDataDirLock(config.dataDir);
  } catch (e) {
    if (!(e instanceof DataDirLockedError)) throw new OpenDataDirError((e as Error).message);
    const what = info
      ? `the database has schema ${info.schema ?? "(none)"} and this runcell ${VERSION} would migrate it to ${BINARY_SCHEMA}${info.pending.length > 1 ? ` (${info.pending.join(", ")})` : ""}`
      : `there is no database yet and this runcell ${VERSION} would create it`;
    throw new OpenDataDirError(
      `${what}, but the data dir ${config.dataDir} is in use by another runcell process (pid ${e.pid ?? "unknown"}): ` +
        `a server running an older runcell, or a migrate or restore. Nothing was changed. ` +
        `Run ${opts.command ? `runcell ${opts.command}` : "this command"} with the runcell binary that server runs, or upgrade the server first ` +
        `(restart it with this binary: it backs the database up and migrates it), then run this again.`,
    );
  }
  try {
    let backup: string | null;
    try {
      ({ backup } = await upgradeGuard(config.dataDir, (line) => report(line), config.vaultKeyFile));
    } catch (e) {
      if (e instanceof NewerDatabaseError) throw e;
      // upgradeGuard's errors say what failed (an unreadable database, the backup).
      throw new OpenDataDirError((e as Error).message);
    }
    if (backup) report(`pre-migration backup: ${backup}`);
    const handle = openDatabase(path);
    try {
      const { applied, repaired } = migrate(handle.sqlite);
      if (applied.length && info) report(`applied ${applied.length} migration(s): ${applied.join(", ")}`);
      for (const r of repaired) report(repairLine(r));
    } catch (e) {
      handle.close();
      throw e;
    }
    return handle;
  } finally {
    lock.release();
  }
}

/** A current database: opened without the lock, next to a running server. */
function openCurrent(path: string): DatabaseHandle {
  const handle = openDatabase(path);
  try {
    // Checked again on the open connection (a newer binary may have migrated it in between).
    const now = schemaInfo(handle.sqlite);
    if (now.state === "newer") throw new NewerDatabaseError(now.unknown[0]!, now.schema!, now.writer, now.binarySchema);
    if (now.state !== "current") throw new OpenDataDirError(`the database's schema changed while it was being opened (${now.state}); run the command again`);
  } catch (e) {
    handle.close();
    throw e;
  }
  return handle;
}

/**
 * --database postgres://…: opened when its schema is this binary's. An empty database (no schema
 * at all: no server can be using it) gets this binary's schema, so a new installation can make its
 * first account before serve; an existing schema is never migrated here.
 */
async function openCurrentPostgres(config: Config, command: string | undefined, report: (line: string) => void): Promise<CliDatabase> {
  const url = config.databaseUrl!;
  const where = redactDatabaseUrl(url);
  const pg = await openPostgres(url, { migrate: false });
  try {
    let info;
    try {
      info = await pgSchemaInfo(pg.sql);
    } catch (e) {
      throw DatabaseUnavailableError.at(url, e);
    }
    if (info.state === "newer") throw newerPgDatabase(info);
    if (info.state === "older") {
      throw new OpenDataDirError(
        `the PostgreSQL database ${where} has schema ${info.schema} and this runcell ${VERSION} would migrate it to ${info.binarySchema}${info.pending.length > 1 ? ` (${info.pending.join(", ")})` : ""}, ` +
          `but ${command ? `runcell ${command}` : "this command"} does not migrate PostgreSQL: servers still running an older runcell may share it, ` +
          `and could not start again once it is migrated. Nothing was changed. Run \`runcell migrate ${databaseArgs(config)}\` or start serve with this binary ` +
          `(upgrading every server that shares the database), then run this again; or run ${command ? `runcell ${command}` : "this command"} with the binary those servers run.`,
      );
    }
    if (info.state === "current") return pg;
  } catch (e) {
    await pg.close();
    throw e;
  }
  // Empty: given this binary's schema (under the migration lock, which also refuses an old server).
  await pg.close();
  const made = await openPostgres(url);
  if (made.applied.length) report(`applied ${made.applied.length} migration(s) to ${where}: ${made.applied.join(", ")}`);
  return made;
}
