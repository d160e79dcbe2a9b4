/**
 * The replica that served this data dir before this process. A server restarted after a crash
 * (kill -9, the OOM killer, a power cut) is a new replica with a new id, and the task leases its
 * predecessor held would otherwise stop every one of its tasks for a whole `--replica-lease`
 * (src/agents/leases.ts). `serve` holds the data dir's lock (src/db/lock.ts) for as long as it
 * runs, so the process that last wrote `<data dir>/replica-id` is gone: its leases are free at once.
 *
 * The file holds an id only. A data dir copied to another machine while its server still runs
 * would make that server's leases look free to the copy's server; the original then loses them at
 * its next renewal (its loops stop, writing nothing more) — so copy a data dir only when stopped.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const REPLICA_ID_FILE = "replica-id";

/** Records `id` as this data dir's replica; answers the previous one's id (null: none, or unreadable). */
export function succeedReplica(dataDir: string, id: string): string | null {
  const file = join(dataDir, REPLICA_ID_FILE);
  let previous: string | null = null;
  try {
    previous = /^rep_[0-9a-z]+$/.exec(readFileSync(file, "utf8").trim())?.[0] ?? null;
  } catch {
    // First start on this data dir.
  }
  // Written whole or not at all: a crash mid-write must not leave half an id.
  writeFileSync(file + ".tmp", id + "\n", { mode: 0o600 });
  renameSync(file + ".tmp", file);
  return previous === id ? null : previous;
}
