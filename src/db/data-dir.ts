/** The data dir: created 0700 (a fresh one is tightened), and where the database file lives in it. */
import { chmodSync, chownSync, existsSync, mkdirSync, statSync } from "node:fs";
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

/**
 * Gives a file that a command run as root (`sudo runcell restore …`) put into the data dir to the
 * data dir's owner: the service runs as that user and cannot open a root-owned 0600 file ("unable
 * to open database file"). Any other user's files are its own already (and it cannot give them away).
 */
export function ownLikeDataDir(path: string, dataDir: string): void {
  if (process.geteuid?.() !== 0) return;
  const { uid, gid } = statSync(dataDir);
  chownSync(path, uid, gid);
}
