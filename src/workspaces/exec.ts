/**
 * Docker exec with the controls Docker does not have. The command runs under a one-line /bin/sh
 * wrapper that prints its own pid (inside the container) on stdout and then `exec`s the command,
 * so the process keeps that pid and is, like every docker exec, a session and process-group
 * leader. Docker has no "kill this exec" call, so a timeout or an abort runs a second exec that
 * freezes the process tree (walking /proc by parent pid), then SIGKILLs the group and every
 * process of the tree. Only POSIX sh and /proc are needed: any image with /bin/sh works.
 */
import type Docker from "dockerode";
import type { Duplex } from "node:stream";
import { dockerMessage, dockerStatus } from "./docker.ts";
import { CappedOutput, Demuxer } from "./output.ts";
import { WORKSPACE_ROOT } from "./paths.ts";

export interface ExecOptions {
  cmd: string[];
  stdin?: string | Uint8Array;
  timeoutMs?: number;
  maxOutputBytes?: number;
  signal?: AbortSignal;
  cwd?: string;
  env?: Record<string, string>;
}

export interface ExecResult {
  exitCode: number | null;
  output: string;
  truncated: boolean;
  timedOut: boolean;
  cancelled: boolean;
}

export const DEFAULT_MAX_OUTPUT = 1024 * 1024;
/** After the kill exec, how long to wait for the stream to end before giving up on it. */
const KILL_GRACE_MS = 1500;

const WRAPPER = 'echo "$$"; exec "$@"';

const KILL_TREE = `r=$1
kill -STOP "$r" 2>/dev/null
all=$r q=$r
while [ -n "$q" ]; do
  n=
  for d in /proc/[0-9]*; do
    { read -r s < "$d/stat"; } 2>/dev/null || continue
    s=\${s##*) }
    set -- $s
    for p in $q; do
      if [ "$2" = "$p" ]; then c=\${d#/proc/}; kill -STOP "$c" 2>/dev/null; n="$n $c"; all="$all $c"; break; fi
    done
  done
  q=$n
done
kill -KILL -"$r" 2>/dev/null
kill -KILL $all 2>/dev/null
exit 0`;

/** The container is missing or not running (exec create/start answered 404 or 409). */
export class ContainerNotRunning extends Error {}

function wrapDockerError(e: unknown): unknown {
  const status = dockerStatus(e);
  return status === 404 || status === 409 ? new ContainerNotRunning(dockerMessage(e)) : e;
}

/** Kills a process tree inside the container (see the header comment). */
export async function killTree(container: Docker.Container, pid: number): Promise<void> {
  const exec = await container.exec({ Cmd: ["/bin/sh", "-c", KILL_TREE, "runcell-kill", String(pid)], AttachStdout: true, AttachStderr: true, WorkingDir: "/" });
  const stream = (await exec.start({})) as NodeJS.ReadableStream & { destroy(): void };
  await new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      stream.destroy();
      resolve();
    }, KILL_GRACE_MS);
    stream.on("data", () => {});
    stream.on("end", () => (clearTimeout(t), resolve()));
    stream.on("close", () => (clearTimeout(t), resolve()));
    stream.on("error", () => (clearTimeout(t), resolve()));
  });
}

/**
 * Creates and starts the wrapped command (its pid comes first on stdout), stdout and stderr
 * attached, stdin too when asked; ContainerNotRunning when the container is gone or stopped.
 */
export async function startExec(container: Docker.Container, opts: Pick<ExecOptions, "cmd" | "cwd" | "env">, withStdin: boolean): Promise<{ exec: Docker.Exec; stream: Duplex }> {
  try {
    const exec = await container.exec({
      Cmd: ["/bin/sh", "-c", WRAPPER, "runcell-exec", ...opts.cmd],
      AttachStdin: withStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      WorkingDir: opts.cwd ?? WORKSPACE_ROOT,
      Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
    });
    const stream = (await exec.start({ hijack: withStdin, stdin: withStdin, Detach: false })) as unknown as Duplex;
    return { exec, stream };
  } catch (e) {
    throw wrapDockerError(e);
  }
}

export async function runExec(container: Docker.Container, opts: ExecOptions, onKillError?: (e: unknown) => void): Promise<ExecResult> {
  const out = new CappedOutput(opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT);
  const result = { exitCode: null as number | null, timedOut: false, cancelled: false };
  if (opts.signal?.aborted) return { ...result, output: "", truncated: false, cancelled: true };

  const withStdin = opts.stdin !== undefined;
  const { exec, stream } = await startExec(container, opts, withStdin);

  let pid: number | null = null;
  let pidText = "";
  let killWanted = false;
  let killing: Promise<void> | null = null;
  const kill = () => {
    killWanted = true;
    if (pid !== null && !killing) killing = killTree(container, pid).catch((e) => onKillError?.(e));
  };
  const demux = new Demuxer((type, payload) => {
    if (pid === null && type === 1) {
      const nl = payload.indexOf(10);
      pidText += new TextDecoder().decode(nl < 0 ? payload : payload.subarray(0, nl));
      if (nl < 0) return;
      pid = Number(pidText) || 0;
      if (killWanted) kill();
      payload = payload.subarray(nl + 1);
      if (!payload.byteLength) return;
    }
    out.push(payload);
  });

  await new Promise<void>((resolve) => {
    let settled = false;
    let timer: Timer | null = null;
    let grace: Timer | null = null;
    const finish = () => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      if (grace) clearTimeout(grace);
      opts.signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const stopNow = () => {
      kill();
      grace ??= setTimeout(() => {
        stream.destroy();
        finish();
      }, KILL_GRACE_MS + 500);
    };
    const onAbort = () => {
      if (settled || result.timedOut) return;
      result.cancelled = true;
      stopNow();
    };
    stream.on("data", (c: Uint8Array) => demux.push(c));
    stream.on("end", finish);
    stream.on("close", finish);
    stream.on("error", finish);
    if (opts.timeoutMs && opts.timeoutMs > 0) {
      timer = setTimeout(() => {
        if (settled || result.cancelled) return;
        result.timedOut = true;
        stopNow();
      }, opts.timeoutMs);
    }
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    // Aborted while the exec was being created: the event has already fired.
    if (opts.signal?.aborted) onAbort();
    if (withStdin) stream.end(typeof opts.stdin === "string" ? Buffer.from(opts.stdin) : Buffer.from(opts.stdin!));
  });

  if (killing) await killing;
  try {
    const info = await exec.inspect();
    result.exitCode = info.Running ? null : info.ExitCode;
  } catch (e) {
    if (dockerStatus(e) !== 404) throw e;
  }
  return { ...result, output: out.text(), truncated: out.truncated };
}

/** Whether the container exists and is running (false for a 404). */
export async function isRunning(container: Docker.Container): Promise<{ running: boolean; detail: string }> {
  try {
    const info = await container.inspect();
    const st = info.State;
    return { running: st.Running && !st.Paused, detail: st.OOMKilled ? "killed: out of memory" : `${st.Status}, exit code ${st.ExitCode}` };
  } catch (e) {
    if (dockerStatus(e) === 404) return { running: false, detail: "the container no longer exists" };
    throw e;
  }
}
