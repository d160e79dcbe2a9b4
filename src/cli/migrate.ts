import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { DB_FILE, prepareDataDir } from "../db/data-dir.ts";
import { openDatabase } from "../db/client.ts";
import { acquireDataDirLock, type DataDirLock } from "../db/lock.ts";
import { migrate, migrationStatus, NewerDatabaseError, schemaInfoOfFile } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { openPostgres, redactDatabaseUrl } from "../db/pg/client.ts";
import { newerPgDatabase, pgSchemaInfo } from "../db/pg/migrate.ts";
import { repairLine } from "../db/repairs.ts";
import { upgradeGuard } from "./backup.ts";
import { type Command, failUsage, UsageError } from "./command.ts";
import { parseStateArgs, resolveStateConfig, STATE_FLAGS } from "./state-config.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply pending database migrations (serve does this at start) and report what ran.",
  usage: "runcell migrate [--data-dir DIR | --database postgres://…] [--status] | runcell migrate --from-sqlite FILE --to postgres://…",
  details: `  --status   only list applied and pending migrations (read-only; works next to a running server)
  --database postgres://…
             the PostgreSQL database (RUNCELL_DATABASE_URL) instead of the data dir's SQLite file:
             its schema is created or brought up to date (one server at a time: an advisory lock)
  --from-sqlite FILE --to URL
             copy an installation's SQLite database (stop its server first) into an empty PostgreSQL
             database: the PostgreSQL schema is created, every row copied in one transaction with
             progress, and every table's row count compared afterwards. Keep the data dir's
             secret.key: the vault's secrets are copied encrypted; then serve with --database URL (and
             --vault-key-file with that key; docs/scale.md).

  Holds the data dir's lock (exit 1, naming the holder's pid, while a server runs on it). Before
  migrating an existing database it writes <data dir>/backups/pre-migrate-<schema>-<timestamp>.tar.gz
  (the last 3 are kept). A database written by a newer runcell is refused (exit 1), untouched.
  With --database postgres://… there is no automatic backup (take a pg_dump first) and each
  migration runs in its own transaction, under an advisory lock.`,
  examples: ["runcell migrate --data-dir /var/lib/runcell", "runcell migrate --status", "runcell migrate --from-sqlite /var/lib/runcell/runcell.db --to postgres://runcell@db.internal/runcell"],
  configFlags: STATE_FLAGS,
  async run(argv) {
    let config;
    let statusOnly = false;
    let from: string | undefined;
    let to: string | undefined;
    try {
      const args = parseStateArgs(argv, "migrate", { status: false, "from-sqlite": true, to: true });
      statusOnly = args.extra.get("status") === true;
      from = args.extra.get("from-sqlite") as string | undefined;
      to = args.extra.get("to") as string | undefined;
      if ((from === undefined) !== (to === undefined)) throw new UsageError(from === undefined ? "--to needs --from-sqlite FILE" : "--from-sqlite needs --to postgres://…");
      if (to !== undefined && !/^postgres(ql)?:\/\//.test(to)) throw new UsageError(`--to must be a postgres:// URL, not "${redactDatabaseUrl(to)}"`);
      if (from !== undefined && statusOnly) throw new UsageError("--status and --from-sqlite do not go together");
      config = resolveStateConfig(args.flags);
    } catch (e) {
      return failUsage("migrate", e);
    }
    if (from !== undefined && to !== undefined) return copyToPostgres(from, to);
    if (config.databaseUrl) return migrateConfiguredPostgres(config.databaseUrl, statusOnly);
    if (statusOnly) return sqliteStatus(config.dataDir);
    let lock: DataDirLock | null = null;
    if (!statusOnly) {
      try {
        lock = acquireDataDirLock(config.dataDir);
      } catch (e) {
        console.error(`runcell migrate: ${(e as Error).message}`);
        return 1;
      }
      try {
        const { backup } = await upgradeGuard(config.dataDir, (line) => console.log(line), config.vaultKeyFile);
        if (backup) console.log(`pre-migration backup: ${backup}`);
      } catch (e) {
        // upgradeGuard's errors say what failed (a newer or unreadable database, the backup).
        console.error(`runcell migrate: ${(e as Error).message}`);
        lock.release();
        return 1;
      }
    }
    const handle = openDatabase(prepareDataDir(config.dataDir));
    try {
      const { applied, repaired } = migrate(handle.sqlite);
      console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(", ")}` : "database is up to date");
      for (const r of repaired) console.log(repairLine(r));
      return 0;
    } catch (e) {
      console.error(`runcell migrate: ${(e as Error).message}`);
      return 1;
    } finally {
      handle.close();
      lock?.release();
    }
  },
};

/**
 * `migrate --status` on SQLite: read-only — nothing is created (a data dir without a database has
 * every migration pending) and a database that cannot be read is named as such, not a stack trace.
 */
function sqliteStatus(dataDir: string): number {
  const path = join(dataDir, DB_FILE);
  let info;
  try {
    info = schemaInfoOfFile(path);
  } catch (e) {
    console.error(`runcell migrate: ${(e as Error).message}`);
    return 1;
  }
  if (info?.state === "newer") {
    console.error(`runcell migrate: ${new NewerDatabaseError(info.unknown[0]!, info.schema ?? info.unknown[0]!, info.writer, info.binarySchema).message}`);
    return 1;
  }
  const applied = info?.applied ?? [];
  const pending = info ? info.pending : MIGRATIONS.map((m) => m.tag);
  console.log(`applied: ${applied.length ? applied.join(", ") : info ? "none" : `none (no database yet at ${path})`}`);
  console.log(`pending: ${pending.length ? pending.join(", ") : "none"}`);
  return 0;
}

/** `migrate --database postgres://…`: the PostgreSQL schema brought up to date (or, with --status, reported). */
async function migrateConfiguredPostgres(url: string, statusOnly: boolean): Promise<number> {
  try {
    if (statusOnly) {
      const pg = await openPostgres(url, { migrate: false });
      let info;
      try {
        info = await pgSchemaInfo(pg.sql);
      } finally {
        await pg.close();
      }
      // Refused as on SQLite: this binary cannot say what a newer schema still needs.
      if (info.state === "newer") throw newerPgDatabase(info);
      console.log(`applied: ${info.applied.length ? info.applied.join(", ") : "none"}`);
      console.log(`pending: ${info.pending.length ? info.pending.join(", ") : "none"}`);
      return 0;
    }
    const pg = await openPostgres(url);
    await pg.close();
    console.log(pg.applied.length ? `applied ${pg.applied.length} migration(s) to ${redactDatabaseUrl(url)}: ${pg.applied.join(", ")}` : `${redactDatabaseUrl(url)} is up to date`);
    for (const r of pg.repaired) console.log(repairLine(r));
    return 0;
  } catch (e) {
    console.error(`runcell migrate: ${(e as Error).message}`);
    return 1;
  }
}

/** `migrate --from-sqlite FILE --to URL`: see the command's details. */
async function copyToPostgres(file: string, url: string): Promise<number> {
  const fail = (message: string) => {
    console.error(`runcell migrate: ${message}`);
    return 1;
  };
  if (!existsSync(file)) return fail(`no SQLite database at ${file}`);
  // Its data dir's lock, as serve, migrate and restore take it: a server still writing to the file
  // would lose what it writes after the copy — and one started on the copy shares its instance
  // id, so the two would remove each other's workspaces.
  let lock: DataDirLock;
  try {
    lock = acquireDataDirLock(dirname(resolve(file)));
  } catch (e) {
    return fail(`${file} cannot be copied while a server uses it: ${(e as Error).message}`);
  }
  try {
    return await copyLocked(file, url, fail);
  } finally {
    lock.release();
  }
}

async function copyLocked(file: string, url: string, fail: (message: string) => number): Promise<number> {
  let handle;
  try {
    handle = openDatabase(file, { readonly: true });
    const { pending } = migrationStatus(handle.sqlite);
    if (pending.length) {
      handle.close();
      return fail(`${file} is not at this runcell's schema (pending: ${pending.map((m) => m.tag).join(", ")}); run \`runcell migrate --data-dir <its data dir>\` first`);
    }
  } catch (e) {
    handle?.close();
    return fail(`cannot read ${file}: ${(e as Error).message}`);
  }
  // Loaded here: drizzle's pg-core is not part of every start.
  const [{ SQL }, { copySqliteToPostgres }, { migratePostgres }] = await Promise.all([import("bun"), import("../db/pg/copy.ts"), import("../db/pg/migrate.ts")]);
  const pg = new SQL(url, { max: 1, connectionTimeout: 10 });
  const target = redactDatabaseUrl(url);
  try {
    const { applied } = await migratePostgres(pg);
    console.log(applied.length ? `PostgreSQL schema created at ${target}: ${applied.join(", ")}` : `PostgreSQL schema at ${target} is up to date`);
    let lastLine = 0;
    const report = await copySqliteToPostgres(handle.sqlite, pg, (p) => {
      const now = Date.now();
      if (p.copied === p.total || now - lastLine > 1000) {
        lastLine = now;
        console.log(`  ${p.table}: ${p.copied.toLocaleString("en")} / ${p.total.toLocaleString("en")} rows`);
      }
    });
    console.log(`copied ${report.rows.toLocaleString("en")} rows in ${report.tables.length} tables; row counts verified on both sides`);
    console.log("keep the vault key (the data dir's secret.key, or your --vault-key-file): the vault's secrets were copied encrypted with it");
    return 0;
  } catch (e) {
    return fail(`copy to ${target} failed, no rows were committed: ${(e as Error).message}`);
  } finally {
    handle.close();
    await pg.close();
  }
}
