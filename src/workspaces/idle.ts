/**
 * The idle stop: a running workspace untouched (no exec, no file write, no ensureRunning) for
 * longer than --workspace-idle-timeout (default 30 min) is stopped; its volume keeps the files and
 * the next turn's ensureRunning starts it again. A workspace with an exec in flight is never
 * stopped, however long the command runs.
 *
 * With several replicas, the exec may run on another replica, whose in-flight counts are in its
 * memory: so each replica first touches the rows of its own busy workspaces (`last_active_at`) at
 * every check, at most a quarter of the timeout apart, which keeps them out of every replica's
 * idle cutoff (as long as the replicas' clocks agree within the rest of the timeout).
 */
import type { Box } from "./box.ts";
import type { Logger } from "../log.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import type { KeyedMutex } from "./mutex.ts";
import type { WorkspaceRow, WorkspaceStore } from "./store.ts";

export interface IdleDeps {
  /** The row's box on its host (throws when the host is unknown or down). */
  box(row: WorkspaceRow): Box;
  store: WorkspaceStore;
  locks: KeyedMutex;
  inflight: Map<string, number>;
  /** Other replicas may stop this replica's busy workspaces unless their rows say they are busy. */
  shared?: boolean;
  now: () => number;
  idleMs: number;
  log: Logger;
}

/** Stops every idle workspace; returns their ids. */
export async function stopIdle(d: IdleDeps): Promise<string[]> {
  if (d.shared) for (const id of d.inflight.keys()) await d.store.touch(id);
  const cutoff = d.now() - d.idleMs;
  const stopped: string[] = [];
  for (const candidate of await d.store.idleSince(cutoff)) {
    if (d.inflight.get(candidate.id)) continue;
    await d.locks.run(candidate.id, async () => {
      const row = await d.store.byId(candidate.id);
      if (!row || row.status !== "running" || row.last_active_at >= cutoff || d.inflight.get(row.id) || !row.docker_id) return;
      try {
        await d.box(row).stop(2);
      } catch (e) {
        const status = dockerStatus(e);
        if (status !== 304 && status !== 404) {
          d.log.warn("idle stop failed", { workspace: row.id, error: dockerMessage(e) });
          return;
        }
      }
      await d.store.update(row.id, { status: "stopped", error: null });
      stopped.push(row.id);
      d.log.info("workspace stopped after being idle", { workspace: row.id, session: row.session_id, idle_ms: d.now() - row.last_active_at });
    });
  }
  return stopped;
}

/** How often the idle check runs: a quarter of the timeout, between 1 s and 60 s. */
export const idleCheckEveryMs = (idleMs: number) => Math.min(60_000, Math.max(1000, Math.floor(idleMs / 4)));
