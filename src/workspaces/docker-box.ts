/**
 * The runner interface (box.ts) on Docker. A box is a container: exec with Docker's multiplexed
 * stream taken apart here, the archive API for files (its path-stat header for `stat`), inspect
 * for `state`. The engine is dockerode's client: containers made from spec.ts's options, listed
 * and volumes filtered by label, images pulled by image.ts. The Engine API's 404/409 answers
 * become the interface's errors here and nowhere else.
 *
 * Every call that should take moments (create, start, inspect, stop, remove, rename, listings,
 * volumes, starting an exec) is bounded by the host's call timeout (`--docker-timeout`): a stuck
 * engine fails it with EngineTimeout instead of holding a workspace's lock, a start-gate slot and
 * a task for ever. Image pulls (image.ts: long, with progress), the output of an exec and file
 * transfers are not bounded by it; sizing the volumes has a longer bound of its own.
 */
import type Docker from "dockerode";
import type { Duplex } from "node:stream";
import {
  type Box,
  type BoxEngine,
  type BoxExec,
  type BoxExecOptions,
  BoxGone,
  type BoxState,
  EngineTimeout,
  type BoxSummary,
  ContainerNotRunning,
  ImageMissing,
  InitMissing,
  NameTaken,
  PathMissing,
  type PathStat,
  PathUnresolvable,
  type VolumeSummary,
} from "./box.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import type { ImagePuller } from "./image.ts";
import { Demuxer } from "./output.ts";
import { type ContainerInput, containerOptions } from "./spec.ts";

/** The archive API's `X-Docker-Container-Path-Stat` header: base64 of the stat's JSON. */
function decodeStat(header: string | undefined): PathStat | null {
  if (!header) return null;
  try {
    return JSON.parse(Buffer.from(header, "base64").toString("utf8")) as PathStat;
  } catch {
    return null;
  }
}

/**
 * The engine's 500 for a path that cannot name anything, as PathUnresolvable: its own scoped
 * symlink walk says "too many links" for a loop (the kernel's ELOOP says "too many levels of
 * symbolic links"), ENOTDIR says "not a directory" (`a.txt/x`). Any other 500 is the engine's own
 * failure and stays one. The message names the engine's host path (overlay2/…/merged): callers
 * word their own.
 */
function unresolvable(e: unknown): PathUnresolvable | null {
  if (dockerStatus(e) !== 500) return null;
  const m = dockerMessage(e);
  if (/too many (levels of symbolic )?links/i.test(m)) return new PathUnresolvable("symlink loop", m);
  if (/not a directory/i.test(m)) return new PathUnresolvable("not a directory", m);
  return null;
}

/** Drops an archive stream that is not going to be read. */
const dropStream = (s: unknown) => (s as { destroy?: () => void } | null)?.destroy?.();

/** How long an engine call may take unless the host says otherwise (`--docker-timeout`'s default; tests). */
const DEFAULT_CALL_TIMEOUT_MS = 60_000;

/**
 * How long the engine may take to size its volumes (`volumeSizes`): it walks every file in them,
 * so a host with many files takes long where other calls take moments. The disk check of one host
 * waits at most this long, without holding up other hosts' checks (disk.ts).
 */
export const DISK_USAGE_TIMEOUT_MS = 5 * 60_000;

/**
 * Runs one Engine API call, given an abort signal that fires after `ms`: the call then fails with
 * EngineTimeout (the request aborted). For a call whose answer is a stream that must outlive the
 * limit (an exec's output), `late` takes the signal's place: the call is not aborted but raced,
 * and an answer that comes after the limit is handed to `late` to be dropped.
 */
async function bounded<T>(call: string, ms: number, fn: (abortSignal: AbortSignal | undefined) => Promise<T>, late?: (value: T) => void): Promise<T> {
  const ctl = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      ctl.abort();
      reject(new EngineTimeout(call, ms));
    }, ms);
  });
  const work = fn(late ? undefined : ctl.signal);
  try {
    return await Promise.race([work, expired]);
  } catch (e) {
    if (!ctl.signal.aborted) throw e;
    work.then(late, () => {});
    throw new EngineTimeout(call, ms);
  } finally {
    clearTimeout(timer);
  }
}

/** A 404 is "already gone": fine for a removal. */
const goneIsFine = (e: unknown) => {
  if (dockerStatus(e) !== 404) throw e;
};

class DockerExec implements BoxExec {
  readonly ended: Promise<void>;

  constructor(
    private exec: Docker.Exec,
    private stream: Duplex,
    private ms: number,
  ) {
    this.ended = new Promise<void>((resolve) => {
      stream.on("end", resolve);
      stream.on("close", resolve);
      stream.on("error", () => resolve());
    });
  }

  onOutput(fn: (stream: 1 | 2, chunk: Uint8Array) => void): void {
    const demux = new Demuxer((type, payload) => {
      if (type === 1 || type === 2) fn(type, payload);
    });
    // The stream flows from the first data listener on: nothing is lost before it.
    this.stream.on("data", (c: Uint8Array) => demux.push(c));
  }

  write(data: Uint8Array): void {
    this.stream.write(data);
  }

  end(data?: Uint8Array): void {
    if (data) this.stream.end(data);
    else this.stream.end();
  }

  destroy(): void {
    this.stream.destroy();
  }

  async exitCode(): Promise<number | null> {
    try {
      const info = await bounded("inspect the command", this.ms, (abortSignal) => this.exec.inspect({ abortSignal }));
      return info.Running ? null : info.ExitCode;
    } catch (e) {
      if (dockerStatus(e) === 404) return null;
      throw e;
    }
  }
}

export class DockerBox implements Box {
  constructor(
    private container: Docker.Container,
    /** The call timeout (`bounded`). */
    private ms: number,
  ) {}

  get id(): string {
    return this.container.id;
  }

  async exec(opts: BoxExecOptions): Promise<BoxExec> {
    try {
      const exec = await bounded("create a command", this.ms, (abortSignal) =>
        this.container.exec({
          abortSignal,
          Cmd: opts.cmd,
          AttachStdin: opts.stdin,
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
          WorkingDir: opts.cwd,
          Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
        } as Docker.ExecCreateOptions),
      );
      // The answer is the command's output stream, which lives as long as the command: raced, not aborted.
      const stream = await bounded(
        "start a command",
        this.ms,
        () => exec.start({ hijack: opts.stdin, stdin: opts.stdin, Detach: false }) as unknown as Promise<Duplex>,
        (late) => late.destroy(),
      );
      return new DockerExec(exec, stream, this.ms);
    } catch (e) {
      const status = dockerStatus(e);
      if (status !== 404 && status !== 409) throw e;
      // The engine says "No such exec instance" for any container that is not running at the
      // start: the container's own state says what happened to it.
      const now = await this.state().catch(() => null);
      throw new ContainerNotRunning(now ? `${dockerMessage(e)} (the container: ${now.detail})` : dockerMessage(e));
    }
  }

  async stat(path: string): Promise<PathStat | null> {
    try {
      const res = (await bounded("look at a path", this.ms, (abortSignal) => this.container.infoArchive({ path, abortSignal }))) as { headers?: Record<string, string> };
      return decodeStat(res.headers?.["x-docker-container-path-stat"]);
    } catch (e) {
      if (dockerStatus(e) === 404) return null;
      if (dockerStatus(e) === 500) throw (await this.whyNot(path)) ?? e;
      throw e;
    }
  }

  /**
   * Why the engine answered a path's stat with a 500: the stat is a HEAD, whose answer has no body,
   * so the engine's message comes from the same path's GET (its body dropped unread if it works).
   */
  private async whyNot(path: string): Promise<PathUnresolvable | null> {
    try {
      dropStream(await bounded("look at a path", this.ms, () => this.container.getArchive({ path }), dropStream));
      return null;
    } catch (e) {
      return unresolvable(e);
    }
  }

  async readArchive(path: string): Promise<AsyncIterable<Uint8Array>> {
    try {
      return (await this.container.getArchive({ path })) as unknown as AsyncIterable<Uint8Array>;
    } catch (e) {
      if (dockerStatus(e) === 404 && /could not find the file/i.test(dockerMessage(e))) throw new PathMissing(dockerMessage(e));
      if (dockerStatus(e) === 404) throw new BoxGone(dockerMessage(e));
      throw unresolvable(e) ?? e;
    }
  }

  async writeArchive(dir: string, tar: NodeJS.ReadableStream): Promise<void> {
    await this.container.putArchive(tar, { path: dir });
  }

  async state(): Promise<BoxState> {
    try {
      const info = await bounded("inspect the container", this.ms, (abortSignal) => this.container.inspect({ abortSignal }));
      const st = info.State;
      return { exists: true, running: st.Running && !st.Paused, detail: st.OOMKilled ? "killed: out of memory" : `${st.Status}, exit code ${st.ExitCode}` };
    } catch (e) {
      if (dockerStatus(e) === 404) return { exists: false, running: false, detail: "the container no longer exists" };
      throw e;
    }
  }

  async start(): Promise<void> {
    try {
      await bounded("start the container", this.ms, (abortSignal) => this.container.start({ abortSignal }));
    } catch (e) {
      if (dockerStatus(e) === 304) return; // running already
      // Paused by hand (`docker pause`): the engine will not start it, but unpausing resumes it as it was.
      if (/paused/i.test(dockerMessage(e))) {
        await bounded("unpause the container", this.ms, (abortSignal) => this.container.unpause({ abortSignal }));
        return;
      }
      if (dockerStatus(e) === 404) throw new BoxGone(dockerMessage(e));
      if (/docker-init|init binary|init-path/i.test(dockerMessage(e))) throw new InitMissing(dockerMessage(e));
      throw e;
    }
  }

  async stop(graceSeconds: number): Promise<void> {
    try {
      // The engine waits out the grace period before it answers.
      await bounded("stop the container", this.ms + graceSeconds * 1000, (abortSignal) => this.container.stop({ t: graceSeconds, abortSignal }));
    } catch (e) {
      // Stopped already, or gone: either way it is not running.
      if (dockerStatus(e) !== 304 && dockerStatus(e) !== 404) throw e;
    }
  }

  async remove(): Promise<void> {
    await bounded("remove the container", this.ms, (abortSignal) => this.container.remove({ force: true, abortSignal })).catch(goneIsFine);
  }

  async rename(name: string): Promise<void> {
    await bounded("rename the container", this.ms, (abortSignal) => this.container.rename({ name, abortSignal }));
  }
}

/** Docker's label filter: `key=value`, or `key` alone for any value. */
const labelFilter = (labels: Record<string, string>) => JSON.stringify({ label: Object.entries(labels).map(([k, v]) => (v === "" ? k : `${k}=${v}`)) });

export class DockerBoxEngine implements BoxEngine {
  constructor(
    private engine: { readonly client: Docker },
    private puller: ImagePuller,
    /** How long a call may take (`bounded`): `--docker-timeout`. */
    private ms = DEFAULT_CALL_TIMEOUT_MS,
  ) {}

  private get client(): Docker {
    return this.engine.client;
  }

  async create(spec: ContainerInput): Promise<Box> {
    try {
      const made = await bounded("create the container", this.ms, (abortSignal) => this.client.createContainer({ ...containerOptions(spec), abortSignal } as Docker.ContainerCreateOptions));
      return new DockerBox(made, this.ms);
    } catch (e) {
      if (dockerStatus(e) === 404 && /no such image/i.test(dockerMessage(e))) throw new ImageMissing(dockerMessage(e));
      if (dockerStatus(e) === 409) throw new NameTaken(dockerMessage(e));
      throw e;
    }
  }

  box(idOrName: string): Box {
    return new DockerBox(this.client.getContainer(idOrName), this.ms);
  }

  async list(labels: Record<string, string>): Promise<BoxSummary[]> {
    const found = await bounded("list containers", this.ms, (abortSignal) => this.client.listContainers({ all: true, filters: labelFilter(labels), abortSignal }));
    return found.map((c) => ({ id: c.Id, name: c.Names?.[0]?.replace(/^\//, "") ?? c.Id, image: c.Image, labels: c.Labels ?? {}, state: c.State, status: c.Status }));
  }

  async createVolume(name: string, labels: Record<string, string>): Promise<Record<string, string>> {
    // Docker answers an existing name with that volume as it is (its labels, not these), and
    // dockerode's createVolume keeps only the name of that answer: dialled here to read it.
    const created = await bounded("create the volume", this.ms, (abortSignal) =>
      new Promise<{ Labels?: Record<string, string> | null }>((resolve, reject) =>
        this.client.modem.dial(
          { path: "/volumes/create?", method: "POST", allowEmpty: true, options: { Name: name, Labels: labels }, abortSignal, statusCodes: { 200: true, 201: true, 500: "server error" } },
          (err, data) => (err ? reject(err) : resolve((data ?? {}) as { Labels?: Record<string, string> | null })),
        ),
      ),
    );
    return created.Labels ?? {};
  }

  async listVolumes(labels: Record<string, string>): Promise<VolumeSummary[]> {
    const found = (await bounded("list volumes", this.ms, (abortSignal) => this.client.listVolumes({ filters: labelFilter(labels), abortSignal }))).Volumes ?? [];
    return found.map((v) => ({ name: v.Name, labels: v.Labels ?? {} }));
  }

  async removeVolume(name: string): Promise<void> {
    await bounded("remove the volume", this.ms, (abortSignal) => this.client.getVolume(name).remove({ abortSignal })).catch(goneIsFine);
  }

  async volumeSizes(): Promise<Map<string, number>> {
    // `type=volume` (API 1.42+) spares the engine sizing every image and container too; older
    // engines ignore it and size everything. `verbose` lists the volumes from API 1.52 on, where
    // they moved from `Volumes` to `VolumeUsage.Items`.
    const df = (abortSignal: AbortSignal) =>
      new Promise<DiskUsageAnswer>((resolve, reject) =>
        this.client.modem.dial(
          { path: "/system/df?", method: "GET", options: { type: "volume", verbose: true }, abortSignal, statusCodes: { 200: true, 400: "bad parameter", 500: "server error" } },
          (err, data) => (err ? reject(err) : resolve((data ?? {}) as DiskUsageAnswer)),
        ),
      );
    const answer = await bounded("measure the volumes", Math.max(this.ms, DISK_USAGE_TIMEOUT_MS), async (abortSignal) => {
      for (;;) {
        try {
          return await df(abortSignal!);
        } catch (e) {
          // Engines before 23.0 refuse a second df while one runs (another replica's, an operator's
          // `docker system df`) instead of sharing it: wait for it to end.
          if (abortSignal?.aborted || !/disk usage operation is already running/i.test(dockerMessage(e))) throw e;
          await Bun.sleep(1000);
        }
      }
    });
    const sizes = new Map<string, number>();
    for (const v of answer.Volumes ?? answer.VolumeUsage?.Items ?? []) {
      // -1: the engine could not size it (a driver that does not report one).
      const size = v.UsageData?.Size;
      if (typeof size === "number" && size >= 0) sizes.set(v.Name, size);
    }
    return sizes;
  }

  pullImage(image: string): Promise<void> {
    return this.puller.pull(image);
  }
}

/** What runcell reads of `GET /system/df`: the volumes before API 1.52, and from it on. */
interface DiskUsageAnswer {
  Volumes?: DfVolume[] | null;
  VolumeUsage?: { Items?: DfVolume[] | null } | null;
}
interface DfVolume {
  Name: string;
  UsageData?: { Size?: number } | null;
}
