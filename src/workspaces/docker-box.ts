/**
 * The runner interface (box.ts) on a Docker container: exec with Docker's multiplexed stream taken
 * apart here, the archive API for files (its path-stat header for `stat`), inspect for `state`,
 * and the engine's 404/409 answers turned into the interface's errors.
 */
import type Docker from "dockerode";
import type { Duplex } from "node:stream";
import { decodeStat, type PathStat } from "./archive.ts";
import { type Box, BoxGone, type BoxExec, type BoxState, type BoxExecOptions, ContainerNotRunning, PathMissing } from "./box.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import { Demuxer } from "./output.ts";

class DockerExec implements BoxExec {
  readonly ended: Promise<void>;

  constructor(
    private exec: Docker.Exec,
    private stream: Duplex,
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
      const info = await this.exec.inspect();
      return info.Running ? null : info.ExitCode;
    } catch (e) {
      if (dockerStatus(e) === 404) return null;
      throw e;
    }
  }
}

export class DockerBox implements Box {
  constructor(private container: Docker.Container) {}

  get id(): string {
    return this.container.id;
  }

  async exec(opts: BoxExecOptions): Promise<BoxExec> {
    try {
      const exec = await this.container.exec({
        Cmd: opts.cmd,
        AttachStdin: opts.stdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        WorkingDir: opts.cwd,
        Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
      });
      const stream = (await exec.start({ hijack: opts.stdin, stdin: opts.stdin, Detach: false })) as unknown as Duplex;
      return new DockerExec(exec, stream);
    } catch (e) {
      const status = dockerStatus(e);
      throw status === 404 || status === 409 ? new ContainerNotRunning(dockerMessage(e)) : e;
    }
  }

  async stat(path: string): Promise<PathStat | null> {
    try {
      const res = (await this.container.infoArchive({ path })) as { headers?: Record<string, string> };
      return decodeStat(res.headers?.["x-docker-container-path-stat"]);
    } catch (e) {
      if (dockerStatus(e) === 404) return null;
      throw e;
    }
  }

  async readArchive(path: string): Promise<AsyncIterable<Uint8Array>> {
    try {
      return (await this.container.getArchive({ path })) as unknown as AsyncIterable<Uint8Array>;
    } catch (e) {
      if (dockerStatus(e) === 404 && /could not find the file/i.test(dockerMessage(e))) throw new PathMissing(dockerMessage(e));
      if (dockerStatus(e) === 404) throw new BoxGone(dockerMessage(e));
      throw e;
    }
  }

  async writeArchive(dir: string, tar: NodeJS.ReadableStream): Promise<void> {
    await this.container.putArchive(tar, { path: dir });
  }

  async state(): Promise<BoxState> {
    try {
      const info = await this.container.inspect();
      const st = info.State;
      return { exists: true, running: st.Running && !st.Paused, detail: st.OOMKilled ? "killed: out of memory" : `${st.Status}, exit code ${st.ExitCode}` };
    } catch (e) {
      if (dockerStatus(e) === 404) return { exists: false, running: false, detail: "the container no longer exists" };
      throw e;
    }
  }

  async stop(graceSeconds: number): Promise<void> {
    await this.container.stop({ t: graceSeconds });
  }
}
