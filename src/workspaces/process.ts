/**
 * A long-lived process in a workspace with stdin, stdout and stderr attached (an MCP server over
 * stdio): the same Docker exec and pid wrapper as exec.ts, but the streams stay open until the
 * process exits or `kill` freezes and kills its tree.
 */
import type Docker from "dockerode";
import { killTree, startExec } from "./exec.ts";
import { Demuxer } from "./output.ts";

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

export async function openProcess(container: Docker.Container, opts: ProcessOptions): Promise<AttachedProcess> {
  const { stream } = await startExec(container, opts, true);
  let pid: number | null = null;
  let pidText = "";
  let alive = true;
  let killWanted = false;
  const exited = new Promise<void>((resolve) => {
    const done = () => {
      alive = false;
      resolve();
    };
    stream.on("end", done);
    stream.on("close", done);
    stream.on("error", done);
  });
  const proc: AttachedProcess = {
    write: (data) => {
      // Bytes are copied: the caller may reuse its buffer before the stream has written it.
      if (alive) stream.write(typeof data === "string" ? data : Buffer.from(data));
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
      if (pid !== null) await killTree(container, pid).catch(() => {});
      const t = setTimeout(() => stream.destroy(), 2000);
      await exited;
      clearTimeout(t);
    },
  };
  const demux = new Demuxer((type, payload) => {
    if (type === 1 && pid === null) {
      const nl = payload.indexOf(10);
      pidText += new TextDecoder().decode(nl < 0 ? payload : payload.subarray(0, nl));
      if (nl < 0) return;
      pid = Number(pidText) || 0;
      if (killWanted) void killTree(container, pid).catch(() => {});
      payload = payload.subarray(nl + 1);
      if (!payload.byteLength) return;
    }
    if (type === 1) proc.onStdout(payload);
    else if (type === 2) proc.onStderr(payload);
  });
  stream.on("data", (c: Uint8Array) => demux.push(c));
  return proc;
}
