/**
 * `runcell backup <dir>`: a consistent copy of the database (SQLite `VACUUM INTO`, safe while
 * the server runs thanks to WAL) and of the key file that decrypts the vault, into <dir>.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { DB_FILE } from "../db/data-dir.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { KEY_FILE } from "../lib/sealer.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

export const backupCommand: Command = {
  name: "backup",
  summary: "Copy the database (consistent, while serving) and the secrets key into a directory.",
  usage: "runcell backup [--data-dir DIR] <destination-dir>",
  details: "  Restore: stop the server, copy runcell.db and secret.key back into the data dir, start it.",
  examples: ["runcell backup /backups/runcell-$(date +%F)", "runcell backup --data-dir /var/lib/runcell /srv/backups/today"],
  configFlags: true,
  async run(argv) {
    let config;
    let dest: string;
    try {
      const args = parseArgs(argv);
      if (args.positionals.length !== 1) throw new UsageError("expected one destination directory (see --help)");
      dest = resolve(args.positionals[0]!);
      config = resolveConfig(args.flags);
    } catch (e) {
      return failUsage("backup", e);
    }
    const source = join(config.dataDir, DB_FILE);
    if (!existsSync(source)) {
      console.error(`runcell backup: no database at ${source} (is --data-dir right?)`);
      return 1;
    }
    const target = join(dest, DB_FILE);
    if (existsSync(target)) {
      console.error(`runcell backup: ${target} already exists; choose an empty directory`);
      return 1;
    }
    mkdirSync(dest, { recursive: true, mode: 0o700 });
    const handle = openDatabase(source);
    try {
      handle.sqlite.run("VACUUM INTO ?", [target]);
    } catch (e) {
      console.error(`runcell backup: ${(e as Error).message}`);
      return 1;
    } finally {
      handle.close();
    }
    chmodSync(target, 0o600);
    const key = join(config.dataDir, KEY_FILE);
    if (existsSync(key)) {
      copyFileSync(key, join(dest, KEY_FILE));
      chmodSync(join(dest, KEY_FILE), 0o600);
    }
    console.log(`backed up ${source} → ${target} (${(statSync(target).size / 1e6).toFixed(1)} MB)${existsSync(key) ? ` and ${KEY_FILE}` : ""}`);
    console.log(`keep ${KEY_FILE} with the database: without it, stored secrets cannot be decrypted`);
    return 0;
  },
};
