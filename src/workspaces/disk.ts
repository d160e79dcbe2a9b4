/**
 * The disk cap of a workspace volume (the operator's `workspace_disk_mb`, per user overridable;
 * it binds admins too). Docker's local volumes have no size limit, so runcell measures: every
 * minute each Docker host is asked once for the size of every volume on it (`BoxEngine.volumeSizes`,
 * Docker's `GET /system/df`), and each running workspace's volume is compared with its owner's cap
 * (the figure, the sum of its files' sizes — a sparse file at its full length — is stored in
 * `workspaces.disk_bytes` / `disk_checked_at`). A workspace over its cap is stopped and marked
 * `failed` with an error naming the cap; a task running in it fails with that message at its next
 * command. The next turn starts the workspace again (so the agent or the user
 * can delete files), and the next check stops it again while it is still over.
 *
 * The engine counts, not the box: the agent is root in its box and chooses what any program there
 * (`du` too, wherever it lives) prints or how long it takes. When the engine gives no figure (the
 * call fails or times out, or the volume is not among its answer) the workspace is not measured
 * that time — logged, its last figure kept — and the next check tries again. Neither stopping it
 * (a hiccup of the engine would stop every workspace on the host) nor asking the box (the answer
 * would be the agent's) is better.
 *
 * Each host is checked on its own: a host slow to answer holds up only its own next check
 * (`skipBusy`), not the other hosts'. The engine walks every file of every volume on the host (and
 * before API 1.42 of every image and container layer too): about what a `du` in each box cost, in
 * one call — some 50 ms for a host with twenty volumes — so the check stays at every minute.
 */
import type { Box } from "./box.ts";
import type { Logger } from "../log.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import type { KeyedMutex } from "./mutex.ts";
import type { WorkspaceRow, WorkspaceStore } from "./store.ts";

export const DISK_CHECK_EVERY_MS = 60_000;

export interface DiskDeps {
  /** The names of the hosts to check (those answering). */
  hosts(): string[];
  /** The sizes of the volumes on a host, by name (BoxEngine.volumeSizes). */
  volumeSizes(host: string): Promise<Map<string, number>>;
  /** The row's box on its host (throws when the host is unknown or down). */
  box(row: WorkspaceRow): Box;
  store: WorkspaceStore;
  locks: KeyedMutex;
  log: Logger;
  now: () => number;
  /** The cap of a user's workspaces in bytes (null: none). */
  capBytes(userId: string): Promise<number | null>;
}

export interface DiskReport {
  checked: number;
  stopped: string[];
}

const MB = 1024 * 1024;

export function overCapMessage(bytes: number, cap: number): string {
  return (
    `The workspace's files take ${Math.ceil(bytes / MB)} MB, over this server's disk cap of ${Math.round(cap / MB)} MB per workspace (workspace_disk_mb); ` +
    "it was stopped. Its next turn starts it again: delete files there (or delete the workspace), or it is stopped again at the next check"
  );
}

/**
 * The disk checks of each host, one at a time per host. `check` measures every host's running
 * workspaces; a host whose previous check still runs is waited for and checked again, or with
 * `skipBusy` (the minute worker) left to that check, so a slow host does not delay the others.
 */
export class DiskChecker {
  private passes = new Map<string, Promise<DiskReport>>();

  constructor(private d: DiskDeps) {}

  async check(opts: { skipBusy?: boolean } = {}): Promise<DiskReport> {
    const report: DiskReport = { checked: 0, stopped: [] };
    const hosts = this.d.hosts().filter((host) => !(opts.skipBusy && this.passes.has(host)));
    if (hosts.length === 0) return report;
    // One read of the running rows for the whole check, by host. A failed read fails each host's
    // pass, as a failure of its own would (logged there; the catch here only marks it handled).
    const running = this.d.store.running().then((rows) => Map.groupBy(rows, (row) => row.host));
    running.catch(() => {});
    for (const r of await Promise.all(hosts.map((host) => this.start(host, running)))) {
      report.checked += r.checked;
      report.stopped.push(...r.stopped);
    }
    return report;
  }

  /** Settles once no check runs (the worker's stop). */
  async idle(): Promise<void> {
    while (this.passes.size) await Promise.allSettled([...this.passes.values()]);
  }

  private async start(host: string, running: Promise<Map<string, WorkspaceRow[]>>): Promise<DiskReport> {
    for (let prev = this.passes.get(host); prev; prev = this.passes.get(host)) await prev.catch(() => {});
    const pass = checkHost(this.d, host, running).catch((e) => {
      this.d.log.warn("disk check failed", { docker_host: host, error: dockerMessage(e) });
      return { checked: 0, stopped: [] };
    });
    this.passes.set(host, pass);
    try {
      return await pass;
    } finally {
      if (this.passes.get(host) === pass) this.passes.delete(host);
    }
  }
}

/**
 * Measures one host's running workspaces once; stops those over their owner's cap. The rows were
 * read for the whole check (before this host's previous pass ended, when it had to wait for one):
 * each is read again under its lock before it is stopped.
 */
async function checkHost(d: DiskDeps, host: string, running: Promise<Map<string, WorkspaceRow[]>>): Promise<DiskReport> {
  const report: DiskReport = { checked: 0, stopped: [] };
  const capped: { row: WorkspaceRow; cap: number }[] = [];
  for (const row of (await running).get(host) ?? []) {
    if (!row.docker_id) continue;
    const cap = await d.capBytes(row.user_id);
    if (cap !== null) capped.push({ row, cap });
  }
  if (capped.length === 0) return report;
  let sizes: Map<string, number>;
  try {
    sizes = await d.volumeSizes(host);
  } catch (e) {
    d.log.warn("disk check failed: the Docker host did not size its volumes", { docker_host: host, workspaces: capped.length, error: dockerMessage(e) });
    return report;
  }
  for (const { row: candidate, cap } of capped) {
    const bytes = sizes.get(candidate.volume);
    if (bytes === undefined) {
      d.log.warn("disk check: the Docker host gave no size for the workspace's volume", { workspace: candidate.id, docker_host: host, volume: candidate.volume });
      continue;
    }
    report.checked++;
    await d.store.update(candidate.id, { disk_bytes: bytes, disk_checked_at: d.now() });
    if (bytes <= cap) continue;
    await d.locks.run(candidate.id, async () => {
      const row: WorkspaceRow | null = await d.store.byId(candidate.id);
      if (!row || row.status !== "running" || row.docker_id !== candidate.docker_id) return;
      const message = overCapMessage(bytes, cap);
      // Marked first: a command killed by the stop reports this message, not a generic death.
      await d.store.update(row.id, { status: "failed", error: message });
      try {
        await d.box(row).stop(2);
      } catch (e) {
        const status = dockerStatus(e);
        if (status !== 304 && status !== 404) d.log.warn("could not stop a workspace over its disk cap", { workspace: row.id, error: dockerMessage(e) });
      }
      report.stopped.push(row.id);
      d.log.warn("workspace stopped: over its disk cap", { workspace: row.id, session: row.session_id, user: row.user_id, disk_bytes: bytes, cap_bytes: cap });
    });
  }
  return report;
}
