/**
 * A long-lived process in a workspace with stdin, stdout and stderr attached (an MCP server over
 * stdio): the same exec and pid wrapper as exec.ts, but the streams stay open until the
 * process exits or `kill` freezes and kills its tree.
 */
import type { Box } from "./box.ts";
import { killTree, pidThenOutput, startExec } from "./exec.ts";

export interface ProcessOptions {
  cmd: string[];
  env?: Record<string, string>;
  cwd?: string;
}

export interface AttachedProcess {
  write(data: string | Uint8Array): void;
  /** Called with each stdout chunk (the wrapper's pid line already removed). */
  onStdout: (chunk: Uint8Array) => void;
  onStderr: (chunk: Uint8Array) => void;
  /** Settles when the streams close (the process exited, was killed, or the container stopped). */
  readonly exited: Promise<void>;
  readonly alive: boolean;
  /** Kills the process tree; resolves once the streams are closed. */
  kill(): Promise<void>;
}

export async function openProcess(box: Box, opts: ProcessOptions): Promise<AttachedProcess> {
  const exec = await startExec(box, opts, true);
  let pid: number | null = null;
  let alive = true;
  let killWanted = false;
  const exited = exec.ended.then(() => {
    alive = false;
  });
  const proc: AttachedProcess = {
    write: (data) => {
      // Bytes are copied: the caller may reuse its buffer before the stream has written it.
      if (alive) exec.write(typeof data === "string" ? Buffer.from(data) : Buffer.from(data));
    },
    onStdout: () => {},
    onStderr: () => {},
    exited,
    get alive() {
      return alive;
    },
    async kill() {
      if (!alive) return;
      killWanted = true;
      if (pid !== null) await killTree(box, pid).catch(() => {});
      const t = setTimeout(() => exec.destroy(), 2000);
      await exited;
      clearTimeout(t);
    },
  };
  exec.onOutput(
    pidThenOutput(
      (p) => {
        pid = p;
        if (killWanted) void killTree(box, p).catch(() => {});
      },
      (type, payload) => (type === 1 ? proc.onStdout(payload) : proc.onStderr(payload)),
    ),
  );
  return proc;
}
