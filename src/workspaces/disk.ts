/**
 * The disk cap of a workspace volume (the operator's `workspace_disk_mb`, per user overridable;
 * it binds admins too). Docker's local volumes have no size limit, so runcell measures: every
 * minute each running workspace's /workspace is summed with `du -sk` through Docker exec (the
 * figure is stored in `workspaces.disk_bytes` / `disk_checked_at`). A workspace over its cap is
 * stopped and marked `failed` with an error naming the cap; a task running in it fails with that
 * message at its next command. The next turn starts the workspace again (so the agent or the user
 * can delete files), and the next check stops it again while it is still over.
 */
import type { Box } from "./box.ts";
import type { Logger } from "../log.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import { type ExecOptions, type ExecResult, runExec } from "./exec.ts";
import type { KeyedMutex } from "./mutex.ts";
import { WORKSPACE_ROOT } from "./paths.ts";
import type { WorkspaceRow, WorkspaceStore } from "./store.ts";

export const DISK_CHECK_EVERY_MS = 60_000;

export interface DiskDeps {
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

/** `du -sk` of /workspace in bytes, or null when it could not be measured. */
async function measure(box: Box): Promise<number | null> {
  const opts: ExecOptions = { cmd: ["du", "-sk", WORKSPACE_ROOT], timeoutMs: 30_000, maxOutputBytes: 64 * 1024 };
  const r: ExecResult = await runExec(box, opts);
  // du exits 1 when some entry was unreadable, and still prints the total on its last line.
  const last = r.output.trim().split("\n").at(-1) ?? "";
  const kb = Number.parseInt(last, 10);
  return Number.isFinite(kb) && !r.timedOut ? kb * 1024 : null;
}

/** Measures every running workspace once; stops those over their owner's cap. */
export async function checkDisk(d: DiskDeps): Promise<DiskReport> {
  const report: DiskReport = { checked: 0, stopped: [] };
  for (const candidate of await d.store.running()) {
    const cap = await d.capBytes(candidate.user_id);
    if (cap === null || !candidate.docker_id) continue;
    let box: Box;
    let bytes: number | null;
    try {
      box = d.box(candidate);
      bytes = await measure(box);
    } catch (e) {
      d.log.warn("disk check failed", { workspace: candidate.id, error: dockerMessage(e) });
      continue;
    }
    if (bytes === null) continue;
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
        await box.stop(2);
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
