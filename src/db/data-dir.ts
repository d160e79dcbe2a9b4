/** The data dir: created 0700 (a fresh one is tightened), and where the database file lives in it. */
import { chmodSync, existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";

export const DB_FILE = "runcell.db";

/** Creates the data dir with mode 0700 (or tightens a fresh one) and returns the database path. */
export function prepareDataDir(dataDir: string): string {
  if (!existsSync(dataDir)) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  else if (!statSync(dataDir).isDirectory()) throw new Error(`data dir ${dataDir} is not a directory`);
  try {
    if ((statSync(dataDir).mode & 0o077) !== 0) chmodSync(dataDir, 0o700);
  } catch {
    // Not ours to change (e.g. a mounted volume); doctor reports it.
  }
  return join(dataDir, DB_FILE);
}
