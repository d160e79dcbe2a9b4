/**
 * The runner interface: what the rest of runcell needs from one workspace's box — a Docker
 * container today (docker-box.ts). Commands, files, git copies, MCP stdio servers, the disk check
 * and the idle stop all go through it and nothing else; none of them sees an engine's API.
 * Creating, starting and removing boxes on a host (provision.ts, lifecycle.ts, reconcile.ts,
 * pool.ts) is the engine side, still Docker's own; docs/scale.md maps both onto Kubernetes and
 * Nomad.
 *
 * Paths are absolute paths inside the box. Errors that mean something to the callers are the
 * classes below; anything else is the engine's own failure, passed through.
 */
import type { PathStat } from "./archive.ts";

export interface BoxExecOptions {
  /** argv; no shell unless the caller puts one there. */
  cmd: string[];
  cwd: string;
  env?: Record<string, string>;
  /** Keep stdin open for `write`/`end` (otherwise the command reads end-of-file). */
  stdin: boolean;
}

/** A command started in a box. */
export interface BoxExec {
  /**
   * Receives the output as it comes (1: stdout, 2: stderr), in order. Set once, right after the
   * exec started; output that came before is held for it.
   */
  onOutput(fn: (stream: 1 | 2, chunk: Uint8Array) => void): void;
  /** Settles when the output has ended (the command exited, was killed, or the box stopped). */
  readonly ended: Promise<void>;
  write(data: Uint8Array): void;
  /** Ends stdin (after writing `data`). */
  end(data?: Uint8Array): void;
  /** Drops the streams (the command may run on: kill it first). */
  destroy(): void;
  /** The exit code after `ended` (null: still running, or unknown). */
  exitCode(): Promise<number | null>;
}

export interface Box {
  /** The engine's id of the box. */
  readonly id: string;
  /** Starts a command; ContainerNotRunning when the box is gone or stopped. */
  exec(opts: BoxExecOptions): Promise<BoxExec>;
  /** What is at `path`, not following a final symlink; null when nothing is — or when the box is gone (`state` tells which). */
  stat(path: string): Promise<PathStat | null>;
  /** `path` (file or directory) as a tar stream; PathMissing or BoxGone. Works on a stopped box. */
  readArchive(path: string): Promise<AsyncIterable<Uint8Array>>;
  /** Unpacks a tar stream into the existing directory `dir`. Works on a stopped box. */
  writeArchive(dir: string, tar: NodeJS.ReadableStream): Promise<void>;
  /** Whether the box exists and runs now, and if not why. */
  state(): Promise<BoxState>;
  /** Stops the box: SIGTERM, then SIGKILL after `graceSeconds`. */
  stop(graceSeconds: number): Promise<void>;
}

export interface BoxState {
  exists: boolean;
  running: boolean;
  /** Why it is not running ("exited, exit code 137", "killed: out of memory", "the container no longer exists"). */
  detail: string;
}

/** The box is missing or not running: a command cannot start (exec answered 404 or 409). */
export class ContainerNotRunning extends Error {}

/** The box no longer exists. */
export class BoxGone extends Error {}

/** Nothing exists at the path asked for. */
export class PathMissing extends Error {}
