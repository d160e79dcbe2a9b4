import { prepareDataDir } from "../db/data-dir.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { migrate, migrationStatus } from "../db/migrate.ts";
import { type Command, failUsage } from "./command.ts";

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Apply pending database migrations (serve does this at start) and report what ran.",
  usage: "runcell migrate [--data-dir DIR] [--status]",
  details: "  --status   only list applied and pending migrations",
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
    }
  },
};
