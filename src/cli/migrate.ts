import { prepareDataDir } from "../db/data-dir.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { acquireDataDirLock, type DataDirLock } from "../db/lock.ts";
import { migrate, migrationStatus, NewerDatabaseError } from "../db/migrate.ts";
import { upgradeGuard } from "./backup.ts";
import { type Command, failUsage } from "./command.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply pending database migrations (serve does this at start) and report what ran.",
  usage: "runcell migrate [--data-dir DIR] [--status]",
  details: `  --status   only list applied and pending migrations (read-only; works next to a running server)

  Holds the data dir's lock (exit 1, naming the holder's pid, while a server runs on it). Before
  migrating an existing database it writes <data dir>/backups/pre-migrate-<schema>-<timestamp>.tar.gz
  (the last 3 are kept). A database written by a newer runcell is refused (exit 1), untouched.`,
  examples: ["runcell migrate --data-dir /var/lib/runcell", "runcell migrate --status"],
  configFlags: true,
  async run(argv) {
    let config;
    let statusOnly = false;
    try {
      const args = parseArgs(argv, { status: false });
      statusOnly = args.extra.get("status") === true;
      config = resolveConfig(args.flags);
    } catch (e) {
      return failUsage("migrate", e);
    }
    let lock: DataDirLock | null = null;
    if (!statusOnly) {
      try {
        lock = acquireDataDirLock(config.dataDir);
      } catch (e) {
        console.error(`runcell migrate: ${(e as Error).message}`);
        return 1;
      }
      try {
        const { backup } = await upgradeGuard(config.dataDir, (line) => console.log(line));
        if (backup) console.log(`pre-migration backup: ${backup}`);
      } catch (e) {
        const message = e instanceof NewerDatabaseError ? e.message : `the pre-migration backup failed, nothing was migrated: ${(e as Error).message}`;
        console.error(`runcell migrate: ${message}`);
        lock.release();
        return 1;
      }
    }
    const handle = openDatabase(prepareDataDir(config.dataDir));
    try {
      if (statusOnly) {
        const { applied, pending } = migrationStatus(handle.sqlite);
        console.log(`applied: ${applied.length ? applied.join(", ") : "none"}`);
        console.log(`pending: ${pending.length ? pending.map((m) => m.tag).join(", ") : "none"}`);
        return 0;
      }
      const { applied } = migrate(handle.sqlite);
      console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(", ")}` : "database is up to date");
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
