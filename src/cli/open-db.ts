/**
 * For CLI commands that work on the data dir's database directly (admin, token): resolves the
 * configuration from the command line (config flags apply: --data-dir…), opens the database and
 * applies pending migrations, exactly like `serve` does. Safe next to a running server (WAL,
 * busy timeout).
 */
import { prepareDataDir } from "../db/data-dir.ts";
import type { Config } from "../config.ts";
import { type DatabaseHandle, openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";

export function openDataDir(config: Config): DatabaseHandle {
  const handle = openDatabase(prepareDataDir(config.dataDir));
  try {
    migrate(handle.sqlite);
  } catch (e) {
    handle.close();
    throw e;
  }
  return handle;
}
