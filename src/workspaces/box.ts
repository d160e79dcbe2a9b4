/**
 * The runner interface: what runcell needs from where workspaces run — a Docker engine today
 * (docker-box.ts). Two halves:
 * - `Box`: one workspace's box (a container). Commands, files, git copies, MCP stdio servers, the
 *   idle stop, starting, stopping and removing it.
 * - `BoxEngine`: one host's engine. Making boxes from runcell's own spec (spec.ts), finding them
 *   by label (reconciliation, the warm pool), their volumes and their sizes (the disk check), and
 *   getting an image there.
 * Nothing outside docker-box.ts (and the host's connection, docker.ts, and image pulls, image.ts)
 * sees an engine's API. docs/scale.md maps both halves onto Kubernetes and Nomad.
 *
 * Paths are absolute paths inside the box. Errors that mean something to the callers are the
 * classes below; anything else is the engine's own failure, passed through.
 */
import type { ContainerInput } from "./spec.ts";

/** What is at a path in a box (`Box.stat`). */
export interface PathStat {
  name: string;
  size: number;
  /** The type and permission bits as Go's os.FileMode (what Docker sends; archive.ts's entryType reads them). */
  mode: number;
  mtime: string;
  /** For a symlink: its target resolved inside the box's root; "" otherwise. */
  linkTarget: string;
}

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
  /**
   * What is at `path`, not following a final symlink; null when nothing is — or when the box is
   * gone (`state` tells which). PathUnresolvable when the path cannot name anything: a symlink
   * loop, or a component that is not a directory.
   */
  stat(path: string): Promise<PathStat | null>;
  /** `path` (file or directory) as a tar stream; PathMissing, PathUnresolvable or BoxGone. Works on a stopped box. */
  readArchive(path: string): Promise<AsyncIterable<Uint8Array>>;
  /** Unpacks a tar stream into the existing directory `dir`. Works on a stopped box. */
  writeArchive(dir: string, tar: NodeJS.ReadableStream): Promise<void>;
  /** Whether the box exists and runs now, and if not why. */
  state(): Promise<BoxState>;
  /** Starts the (created or stopped) box — a running one is fine, a paused one is unpaused; BoxGone, or InitMissing when the engine has no init for PID 1. */
  start(): Promise<void>;
  /** Stops the box: SIGTERM, then SIGKILL after `graceSeconds` (a stopped or gone box is fine). */
  stop(graceSeconds: number): Promise<void>;
  /** Removes the box, running or not (one already gone is fine). Its volume stays. */
  remove(): Promise<void>;
  rename(name: string): Promise<void>;
}

/** A box as a listing shows it. */
export interface BoxSummary {
  id: string;
  name: string;
  image: string;
  labels: Record<string, string>;
  /** "running", "exited", "created", … */
  state: string;
  /** Human words for the state ("Exited (137) 2 minutes ago"). */
  status: string;
}

export interface VolumeSummary {
  name: string;
  labels: Record<string, string>;
}

/** One host's engine. */
export interface BoxEngine {
  /** Makes a box (not started) from runcell's spec; ImageMissing or NameTaken. */
  create(spec: ContainerInput): Promise<Box>;
  /** The box with this id or name (it may not exist: its operations say so). */
  box(idOrName: string): Box;
  /** Every box, in any state, carrying all of `labels` (a value of "" matches the label with any value). */
  list(labels: Record<string, string>): Promise<BoxSummary[]>;
  /** Makes the named volume (an existing one is kept as it is); the labels it has now (an existing one's own). */
  createVolume(name: string, labels: Record<string, string>): Promise<Record<string, string>>;
  listVolumes(labels: Record<string, string>): Promise<VolumeSummary[]>;
  /** Removes the named volume (one already gone is fine). */
  removeVolume(name: string): Promise<void>;
  /**
   * Every volume's size in bytes, by name, as the engine itself counts it (a volume it cannot size
   * is absent): the disk cap's figure (disk.ts). Counted outside the boxes, so nothing running in
   * one can change it — unlike a `du` run inside, whose program belongs to the box.
   */
  volumeSizes(): Promise<Map<string, number>>;
  /** Gets `image` onto the host (concurrent calls share one pull); CONTAINER_FAILED when it cannot be had. */
  pullImage(image: string): Promise<void>;
}

export interface BoxState {
  exists: boolean;
  running: boolean;
  /** Why it is not running ("exited, exit code 137", "killed: out of memory", "the container no longer exists"). */
  detail: string;
}

/**
 * A container or volume the workspace needs is another runcell's: the same engine serves a server
 * whose data dir has another instance id (a backup restored beside the live server). It is neither
 * used nor removed.
 */
export class ForeignObject extends Error {}

/** The box is missing or not running: a command cannot start (exec answered 404 or 409). */
export class ContainerNotRunning extends Error {}

/** The box no longer exists. */
export class BoxGone extends Error {}

/** Nothing exists at the path asked for. */
export class PathMissing extends Error {}

/**
 * The path cannot name anything in the box (ELOOP, ENOTDIR): a symlink loop on the way, or a
 * component that is a file rather than a directory (`a.txt/x`). The caller's mistake, not the box's.
 */
export class PathUnresolvable extends Error {
  constructor(
    readonly reason: "symlink loop" | "not a directory",
    message: string,
  ) {
    super(message);
  }
}

/** The box's image is not on the host (pull it, then create again). */
export class ImageMissing extends Error {}

/** Another box holds the name (one left behind by an interrupted attempt, or another replica's). */
export class NameTaken extends Error {}

/** The engine cannot run the init process the spec asked for as PID 1 (make the box without one). */
export class InitMissing extends Error {}

/**
 * The engine did not answer a call that should take moments (create, start, inspect, remove…)
 * within the host's call timeout (`--docker-timeout`): it is stuck or badly overloaded. The call
 * was abandoned, so nothing waits on it for ever (a workspace's lock, a task's start).
 */
export class EngineTimeout extends Error {
  constructor(
    /** What was asked, in words ("create the container"). */
    readonly call: string,
    readonly ms: number,
  ) {
    super(`the Docker engine did not answer (${call}) within ${ms / 1000} s`);
  }
}
