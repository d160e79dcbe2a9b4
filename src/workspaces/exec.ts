/**
 * Commands in a box (box.ts) with the controls an engine's exec does not have. The command runs
 * under a one-line /bin/sh wrapper that prints its own pid (inside the box) on stdout and then
 * `exec`s the command, so the process keeps that pid and is, like every docker exec, a session
 * and process-group leader. Docker (like Kubernetes) has no "kill this exec" call, so a timeout
 * or an abort runs a second exec that freezes the process tree (walking /proc by parent pid),
 * then SIGKILLs the group and every process of the tree. Only POSIX sh and /proc are needed: any
 * image with /bin/sh works. The wrapper also prints the process's start time (/proc/<pid>/stat):
 * a server that restarted while the command ran (and lost the stream) can kill what is left of it
 * later without killing another process given the same pid since (`killLeftover`). Processes a
 * server started with a marker variable in their environment (stdio MCP servers) are found and
 * killed by it after a restart, descendants included (`killMarked`).
 */
import type { Box, BoxExec } from "./box.ts";
import { CappedOutput } from "./output.ts";
import { WORKSPACE_ROOT } from "./paths.ts";

export interface ExecOptions {
  cmd: string[];
  stdin?: string | Uint8Array;
  timeoutMs?: number;
  maxOutputBytes?: number;
  signal?: AbortSignal;
  cwd?: string;
  env?: Record<string, string>;
  /** Called once the command runs, with its process inside the box (to kill it after a restart). */
  onStart?: (p: ExecProcess) => void;
}

/** The wrapped command's process in the box: pid, and start time in clock ticks after boot (null: unknown). */
export interface ExecProcess {
  pid: number;
  start: number | null;
}

export interface ExecResult {
  exitCode: number | null;
  output: string;
  truncated: boolean;
  timedOut: boolean;
  cancelled: boolean;
  /** Timed out or cancelled, and the kill failed (a paused container…): why. The command may still run. */
  notKilled?: string;
}

export const DEFAULT_MAX_OUTPUT = 1024 * 1024;
/** After the kill exec, how long to wait for the stream to end before giving up on it. */
const KILL_GRACE_MS = 1500;

// "<pid> <start time>": the start time is the 22nd field of /proc/<pid>/stat, the 20th after
// "pid (comm) " (a function shifts its own arguments, leaving the command's "$@" as it is).
const WRAPPER = `runcell_t() { shift 19; runcell_s=$1; }
runcell_s=
{ read -r runcell_l < /proc/$$/stat; } 2>/dev/null && runcell_t \${runcell_l##*) }
echo "$$ $runcell_s"
unset runcell_s runcell_l
exec "$@"`;

// The processes $q (already frozen) and, level by level, every descendant (frozen as found, by
// parent pid in /proc/<pid>/stat): all of them in $all.
const FREEZE_DESCENDANTS = `all=$q
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
done`;

// With a start time ($2): the tree is killed only if process $1 is still the one that started
// then ("killed" is printed); a pid now someone else's, or gone, is left alone.
const KILL_TREE = `r=$1
if [ -n "$2" ]; then
  { read -r s < "/proc/$r/stat"; } 2>/dev/null || exit 0
  t() { e=$1; shift 20; [ "$1" = "$e" ]; }
  t "$2" \${s##*) } || exit 0
  echo killed
fi
kill -STOP "$r" 2>/dev/null
q=$r
${FREEZE_DESCENDANTS}
kill -KILL -"$r" 2>/dev/null
kill -KILL $all 2>/dev/null
exit 0`;

// Every process whose environment holds variable $1 with a value other than $2, with its
// descendants. The shells' \`read\` drops the NUL bytes between /proc/<pid>/environ's entries, so
// a line holds several glued together: "$1=$2" as a substring is the process's own value only
// while every value is of one length (the caller's). "killed <pids>" is printed.
const KILL_MARKED = `m=$1 keep=$2 q=
for d in /proc/[0-9]*; do
  p=\${d#/proc/}
  [ "$p" = "$$" ] && continue
  hit=
  { while IFS= read -r l || [ -n "$l" ]; do
      case $l in *"$m=$keep"*) hit=; break ;; *"$m="*) hit=1; break ;; esac
    done < "$d/environ"; } 2>/dev/null
  [ -n "$hit" ] && kill -STOP "$p" 2>/dev/null && q="$q $p"
done
[ -n "$q" ] || exit 0
echo "killed$q"
${FREEZE_DESCENDANTS}
kill -KILL $all 2>/dev/null
exit 0`;

/** Kills a process tree inside the box (see the header comment). */
export async function killTree(box: Box, pid: number): Promise<void> {
  await runKill(box, [String(pid)]);
}

/**
 * Kills the tree of a command a server started before it restarted, if that process still runs
 * (same pid, same start time); whether it did. ContainerNotRunning when the box is stopped or gone
 * (so is the command).
 */
export async function killLeftover(box: Box, p: { pid: number; start: number }): Promise<boolean> {
  return (await runKill(box, [String(p.pid), String(p.start)])).startsWith("killed");
}

/**
 * Kills every process in the box whose environment has `name` set to a value other than `keep`
 * (values of one length: see KILL_MARKED), with its descendants: processes an earlier server
 * started with a marker of its own. How many processes were marked.
 */
export async function killMarked(box: Box, name: string, keep: string): Promise<number> {
  const out = await runKill(box, [name, keep], KILL_MARKED);
  return /^killed(.*)$/m.exec(out)?.[1]!.trim().split(/\s+/).length ?? 0;
}

async function runKill(box: Box, args: string[], script = KILL_TREE): Promise<string> {
  const exec = await box.exec({ cmd: ["/bin/sh", "-c", script, "runcell-kill", ...args], cwd: "/", stdin: false });
  let out = "";
  exec.onOutput((type, chunk) => {
    if (type === 1) out += new TextDecoder().decode(chunk);
  });
  let timer: Timer | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      exec.destroy();
      resolve();
    }, KILL_GRACE_MS);
  });
  await Promise.race([exec.ended, late]);
  clearTimeout(timer);
  return out;
}

/**
 * Starts the wrapped command (its pid comes first on stdout), stdin open when asked;
 * ContainerNotRunning when the box is gone or stopped.
 */
export function startExec(box: Box, opts: Pick<ExecOptions, "cmd" | "cwd" | "env">, withStdin: boolean): Promise<BoxExec> {
  return box.exec({ cmd: ["/bin/sh", "-c", WRAPPER, "runcell-exec", ...opts.cmd], cwd: opts.cwd ?? WORKSPACE_ROOT, env: opts.env, stdin: withStdin });
}

/**
 * Splits the wrapper's pid line off the start of stdout: `onPid` gets the pid (and its process's
 * start time) once, `onOutput` everything else.
 */
export function pidThenOutput(onPid: (pid: number, start: number | null) => void, onOutput: (stream: 1 | 2, chunk: Uint8Array) => void): (stream: 1 | 2, chunk: Uint8Array) => void {
  let pid: number | null = null;
  let pidText = "";
  return (type, payload) => {
    if (pid === null && type === 1) {
      const nl = payload.indexOf(10);
      pidText += new TextDecoder().decode(nl < 0 ? payload : payload.subarray(0, nl));
      if (nl < 0) return;
      const [p, start] = pidText.trim().split(" ");
      pid = Number(p) || 0;
      onPid(pid, Number(start) || null);
      payload = payload.subarray(nl + 1);
      if (!payload.byteLength) return;
    }
    onOutput(type, payload);
  };
}

export async function runExec(box: Box, opts: ExecOptions, onKillError?: (e: unknown) => void): Promise<ExecResult> {
  const out = new CappedOutput(opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT);
  const result: { exitCode: number | null; timedOut: boolean; cancelled: boolean; notKilled?: string } = { exitCode: null, timedOut: false, cancelled: false };
  if (opts.signal?.aborted) return { ...result, output: "", truncated: false, cancelled: true };

  const withStdin = opts.stdin !== undefined;
  const exec = await startExec(box, opts, withStdin);

  let pid: number | null = null;
  let killWanted = false;
  let killing: Promise<void> | null = null;
  const kill = () => {
    killWanted = true;
    if (pid !== null && !killing) {
      killing = killTree(box, pid).catch((e) => {
        result.notKilled = (e as Error)?.message || String(e);
        onKillError?.(e);
      });
    }
  };

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
        exec.destroy();
        finish();
      }, KILL_GRACE_MS + 500);
    };
    const onAbort = () => {
      if (settled || result.timedOut) return;
      result.cancelled = true;
      stopNow();
    };
    exec.onOutput(
      pidThenOutput(
        (p, start) => {
          pid = p;
          if (p) opts.onStart?.({ pid: p, start });
          if (killWanted) kill();
        },
        (_type, payload) => out.push(payload),
      ),
    );
    void exec.ended.then(finish);
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
    if (withStdin) exec.end(typeof opts.stdin === "string" ? Buffer.from(opts.stdin) : Buffer.from(opts.stdin!));
  });

  if (killing) await killing;
  result.exitCode = await exec.exitCode();
  return { ...result, output: out.text(), truncated: out.truncated };
}
