/**
 * Reconciliation with Docker, by label and for this instance only (`runcell.instance=<id>`, so
 * many servers — or test runs — can share one engine): containers and volumes of ours without a
 * live record are removed; records whose container vanished are marked `stopped` (recreated on
 * the same volume at the next turn) or `failed` when the volume went too (the files are lost);
 * records that say running while the container is not are marked `stopped`. Workspaces with a
 * lifecycle operation in flight are left alone. Runs per Docker host (the rows of that host
 * against its objects), at start, every few minutes, and when a host answers again.
 *
 * With several replicas on one database (peers.ts), the instance's objects are also theirs: a
 * warm-pool member of another registered replica (by its `runcell.replica` label) is never
 * removed, and a `starting` row younger than STARTING_GRACE_MS is left alone (another replica may
 * be creating its container right now: the lock that shows this within a process is not shared).
 */
import type { Logger } from "../log.ts";
import type { BoxEngine, BoxSummary } from "./box.ts";
import { dockerMessage } from "./docker.ts";
import type { KeyedMutex } from "./mutex.ts";
import { memberOwner, type ReplicaView } from "./peers.ts";
import { LABEL_INSTANCE, LABEL_WORKSPACE } from "./spec.ts";
import type { WorkspaceStore } from "./store.ts";

/**
 * With several replicas, a `starting` row updated less than this long ago may be another
 * replica's start in progress (an image pull included); older, it is an interrupted start.
 */
export const STARTING_GRACE_MS = 10 * 60_000;

export interface ReconcileReport {
  removed_containers: string[];
  removed_volumes: string[];
  marked_stopped: string[];
  marked_failed: string[];
}

export interface ReconcileDeps {
  boxes: BoxEngine;
  /** The host's name: only its rows are compared with its objects. */
  host: string;
  store: WorkspaceStore;
  locks: KeyedMutex;
  instanceId: string;
  log: Logger;
  /** Whether a ctr id is a warm-pool member (pool.ts): its container and volume have no row and are kept. */
  pooled?: (ctrId: string) => boolean;
  /** This replica among those sharing the database (peers.ts); absent: the only server. */
  replica?: ReplicaView;
  now?: () => number;
}

export async function reconcile(d: ReconcileDeps): Promise<ReconcileReport> {
  const report: ReconcileReport = { removed_containers: [], removed_volumes: [], marked_stopped: [], marked_failed: [] };
  const ours = { [LABEL_INSTANCE]: d.instanceId };
  // Rows are read before Docker is listed and re-read before acting, so a create or start that
  // completes meanwhile is never mistaken for an orphan or a vanished container.
  const snapshot = await d.store.all(d.host);
  const containers = await d.boxes.list(ours);
  const volumes = await d.boxes.listVolumes(ours);
  const shared = d.replica?.shared === true;
  // Read after the listings: a replica registering later made none of the objects listed (or is a restarted one, registered before).
  const registered = shared ? await d.replica!.registered() : new Set<string>();
  /** Another registered replica's warm-pool member (taken or not): that replica's to keep or remove. */
  const peers = (labels: Record<string, string>) => shared && memberOwner(labels, d.replica!, registered) === "peer";
  const now = d.now ?? Date.now;

  const live = new Map<string, BoxSummary>();
  for (const c of containers) {
    const ctr = c.labels[LABEL_WORKSPACE] ?? "";
    // The row is read first, so that the lock and pool checks decide with it, nothing awaited between.
    const row = await d.store.byId(ctr);
    if (d.locks.busy(ctr) || d.pooled?.(ctr) || peers(c.labels)) {
      live.set(c.id, c);
      continue;
    }
    const kept = row && row.host === d.host && (row.docker_id === c.id || (!row.docker_id && row.status === "starting"));
    if (kept) {
      live.set(c.id, c);
      continue;
    }
    try {
      await d.boxes.box(c.id).remove();
      report.removed_containers.push(c.name);
    } catch (e) {
      d.log.warn("reconcile: could not remove an orphan container", { container: c.id, error: dockerMessage(e) });
    }
  }

  const volumeNames = new Set(volumes.map((v) => v.name));
  for (const row of snapshot) {
    const fresh = await d.store.byId(row.id);
    if (d.locks.busy(row.id) || !fresh || fresh.status === "unavailable" || fresh.updated_at !== row.updated_at || fresh.status !== row.status || fresh.docker_id !== row.docker_id) continue;
    if (shared && fresh.status === "starting" && now() - fresh.updated_at < STARTING_GRACE_MS) continue;
    const c = row.docker_id ? live.get(row.docker_id) : undefined;
    if (row.docker_id && !c) {
      const volumeGone = !volumeNames.has(row.volume);
      await d.store.update(row.id, {
        docker_id: null,
        status: volumeGone ? "failed" : "stopped",
        error: volumeGone ? "container and volume vanished: the workspace files are lost" : "container vanished; it is recreated on the same volume at the next turn",
      });
      (volumeGone ? report.marked_failed : report.marked_stopped).push(row.id);
    } else if ((row.status === "running" || row.status === "starting") && (!c || c.state !== "running")) {
      await d.store.update(row.id, { status: "stopped", error: c ? `container ${c.state}: ${c.status}` : "start was interrupted" });
      report.marked_stopped.push(row.id);
    }
  }

  for (const v of volumes) {
    const ctr = v.labels[LABEL_WORKSPACE] ?? "";
    const row = await d.store.byId(ctr);
    if (d.locks.busy(ctr) || d.pooled?.(ctr) || row?.host === d.host || peers(v.labels)) continue;
    try {
      await d.boxes.removeVolume(v.name);
      report.removed_volumes.push(v.name);
    } catch (e) {
      d.log.warn("reconcile: could not remove an orphan volume", { volume: v.name, error: dockerMessage(e) });
    }
  }

  const changed = Object.values(report).some((l) => l.length > 0);
  if (changed) d.log.info("workspaces reconciled with Docker", { docker_host: d.host, ...report });
  else d.log.debug("workspaces reconciled with Docker: nothing to do", { docker_host: d.host, containers: containers.length, records: snapshot.length });
  return report;
}
