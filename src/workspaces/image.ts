/**
 * Getting a workspace image onto the Docker host: a missing image is pulled once (concurrent
 * requests share the pull), with progress in the log every couple of seconds; one that cannot be
 * had fails with CONTAINER_FAILED naming the image and the fix.
 */
import type Docker from "dockerode";
import { AppError } from "../lib/errors.ts";
import type { Logger } from "../log.ts";
import { dockerMessage } from "./docker.ts";

const PROGRESS_EVERY_MS = 2000;

interface PullEvent {
  status?: string;
  id?: string;
  error?: string;
  progressDetail?: { current?: number; total?: number };
}

/**
 * Why a pull failed, in words for the user who asked: the engine's own message names the host's
 * resolver, proxies and registry addresses, so it goes to the server log only.
 */
export function pullFailure(engineMessage: string): string {
  if (/no such host|dial tcp|i\/o timeout|connection refused|network is unreachable|TLS handshake|proxyconnect|Client\.Timeout/i.test(engineMessage)) {
    return "the registry could not be reached from the Docker host";
  }
  if (/not found|manifest unknown|pull access denied|repository does not exist|unauthorized|denied/i.test(engineMessage)) {
    return "the registry has no such image, or it needs a login";
  }
  if (/invalid reference|invalid tag|invalid repository/i.test(engineMessage)) return "the image name is not valid";
  return "the pull failed; the server log has the Docker engine's own words";
}

export function imageUnavailable(image: string, engineMessage: string): AppError {
  return new AppError(
    "CONTAINER_FAILED",
    `Workspace image "${image}" is not on the Docker host and could not be pulled (${pullFailure(engineMessage)}). ` +
      "Fix: run `runcell image build` to build runcell/workspace:latest locally (no registry needed), " +
      "or point --workspace-image (or the profile's image) at an image the host has.",
    { image },
  );
}

export class ImagePuller {
  private inflight = new Map<string, Promise<void>>();

  constructor(
    private engine: { readonly client: Docker },
    private log: Logger,
  ) {}

  private get docker(): Docker {
    return this.engine.client;
  }

  /** Pulls `image`; resolves when it is present, throws CONTAINER_FAILED when it cannot be had. */
  pull(image: string): Promise<void> {
    let p = this.inflight.get(image);
    if (!p) {
      p = this.doPull(image).finally(() => this.inflight.delete(image));
      this.inflight.set(image, p);
    }
    return p;
  }

  private async doPull(image: string): Promise<void> {
    const started = Date.now();
    this.log.info("workspace image missing; pulling it", { image });
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.docker.pull(image);
    } catch (e) {
      this.log.warn("workspace image pull failed", { image, error: dockerMessage(e) });
      throw imageUnavailable(image, dockerMessage(e));
    }
    const layers = new Map<string, { current: number; total: number; done: boolean }>();
    let lastLog = Date.now();
    let lastStatus = "";
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(
        stream,
        (err: Error | null, events: PullEvent[]) => {
          const failed = err ? dockerMessage(err) : events?.find((e) => e.error)?.error;
          if (failed) {
            this.log.warn("workspace image pull failed", { image, error: failed });
            reject(imageUnavailable(image, failed));
          } else resolve();
        },
        (ev: PullEvent) => {
          if (ev.status) lastStatus = ev.status;
          if (ev.id && ev.progressDetail) {
            const l = layers.get(ev.id) ?? { current: 0, total: 0, done: false };
            if (ev.progressDetail.total) l.total = ev.progressDetail.total;
            if (ev.progressDetail.current) l.current = ev.progressDetail.current;
            if (/complete|already exists/i.test(ev.status ?? "")) l.done = true;
            layers.set(ev.id, l);
          }
          if (Date.now() - lastLog >= PROGRESS_EVERY_MS) {
            lastLog = Date.now();
            const all = [...layers.values()];
            this.log.info("pulling workspace image", {
              image,
              status: lastStatus,
              layers_done: all.filter((l) => l.done).length,
              layers: all.length,
              downloaded_mb: Math.round(all.reduce((n, l) => n + l.current, 0) / 1e5) / 10,
              total_mb: Math.round(all.reduce((n, l) => n + l.total, 0) / 1e5) / 10,
              elapsed_ms: Date.now() - started,
            });
          }
        },
      );
    });
    this.log.info("workspace image pulled", { image, elapsed_ms: Date.now() - started });
  }
}
