/**
 * The Docker engine connection (dockerode over the local socket, tcp:// with TLS, or ssh:// with a
 * key or the ssh-agent and a checked host key) and a cached reachability probe for /healthz and
 * doctor. Workspace lifecycle lives in workspaces/service.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type Docker from "dockerode";
import type { DockerHostSpec } from "../lib/docker-hosts.ts";
import { hostVerifier } from "./ssh-host-key.ts";

/** How to reach an engine beyond its URL (a host's parameters, src/lib/docker-hosts.ts). */
export type EngineAuth = Partial<Pick<DockerHostSpec, "tlsDir" | "sshKey" | "hostKey">>;

/**
 * dockerode's options for an engine URL. With `tlsDir` (Docker's client files ca.pem, cert.pem,
 * key.pem), tcp:// is TLS with that client certificate, the engine verified against ca.pem.
 */
export function dockerOptions(host: string, auth: EngineAuth = {}, onHostKeyRefused: (why: string) => void = () => {}): Docker.DockerOptions {
  const u = new URL(host);
  const tlsDir = auth.tlsDir ?? null;
  /** A file the host's parameters name (TLS files, the ssh key), or an error naming the host. */
  const read = (path: string) => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`Docker host ${host}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  };
  if (tlsDir && (u.protocol === "tcp:" || u.protocol === "https:")) {
    return { host: u.hostname, port: Number(u.port || 2376), protocol: "https", ca: read(join(tlsDir, "ca.pem")), cert: read(join(tlsDir, "cert.pem")), key: read(join(tlsDir, "key.pem")) };
  }
  switch (u.protocol) {
    case "unix:":
      return { socketPath: u.pathname };
    case "tcp:":
    case "http:":
      return { host: u.hostname, port: Number(u.port || 2375), protocol: "http" };
    case "https:":
      return { host: u.hostname, port: Number(u.port || 2376), protocol: "https" };
    case "ssh:": {
      const port = Number(u.port || 22);
      const privateKey = auth.sshKey ? read(auth.sshKey) : undefined;
      const sshOptions = {
        // The key file, else the ssh-agent; never a password.
        ...(privateKey ? { privateKey } : { agent: process.env.SSH_AUTH_SOCK }),
        hostVerifier: hostVerifier(u.hostname, port, auth.hostKey ?? null, onHostKeyRefused),
        readyTimeout: 10_000,
      };
      return { host: u.hostname, port, username: u.username || undefined, protocol: "ssh", sshOptions } as Docker.DockerOptions;
    }
    default:
      throw new Error(`unsupported Docker host "${host}" (use unix://, tcp:// or ssh://)`);
  }
}

/** The environment docker-modem reads its defaults from. */
const DOCKER_ENV = ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_PATH_PREFIX", "DOCKER_CLIENT_TIMEOUT"];

function withoutDockerEnv<T>(make: () => T): T {
  const saved: Record<string, string> = {};
  for (const k of DOCKER_ENV) {
    const v = process.env[k];
    if (v !== undefined) {
      saved[k] = v;
      delete process.env[k];
    }
  }
  try {
    return make();
  } finally {
    Object.assign(process.env, saved);
  }
}

export class DockerEngine {
  private _client: Docker | null = null;
  private last: { ok: boolean; at: number; version?: string; error?: string } = { ok: false, at: 0 };
  private inflight: Promise<boolean> | null = null;

  private options: Docker.DockerOptions;
  /** Why the ssh:// host's key was last refused (the probe's error says so rather than "Host denied"). */
  private hostKeyRefused: string | null = null;

  constructor(
    readonly host: string,
    auth: EngineAuth = {},
  ) {
    // Validates the address (and reads the TLS or ssh key files) now.
    this.options = dockerOptions(host, auth, (why) => (this.hostKeyRefused = why));
  }

  /**
   * dockerode is loaded on first use (it and its ssh/http stack cost ~100 ms of start-up). Its
   * connection is made from `--docker-host` alone: docker-modem merges defaults read from the
   * environment (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, …) under the options given, so
   * an operator's DOCKER_HOST=tcp://… would win over a unix:// socket. They are hidden from it
   * while it is made (synchronously: nothing else runs meanwhile).
   */
  get client(): Docker {
    if (!this._client) {
      const Dockerode = require("dockerode") as typeof Docker;
      this._client = withoutDockerEnv(() => new Dockerode(this.options));
    }
    return this._client;
  }

  /** Pings the engine (at most once per `maxAgeMs`, waiting at most `timeoutMs`); never throws. */
  async available(maxAgeMs = 5000, timeoutMs = 2000): Promise<boolean> {
    if (Date.now() - this.last.at < maxAgeMs) return this.last.ok;
    this.inflight ??= (async () => {
      let timer: Timer | undefined;
      this.hostKeyRefused = null;
      try {
        const v = await Promise.race([
          this.client.version(),
          new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(`timed out after ${timeoutMs / 1000}s`)), timeoutMs))),
        ]);
        this.last = { ok: true, at: Date.now(), version: v.Version };
      } catch (e) {
        this.last = { ok: false, at: Date.now(), error: this.hostKeyRefused ?? (e as Error).message };
      } finally {
        clearTimeout(timer);
        this.inflight = null;
      }
      return this.last.ok;
    })();
    return this.inflight;
  }

  /** Last probe result without waiting (for the hot /healthz path). */
  get status() {
    return this.last;
  }
}

/** HTTP status of a failed Engine API call (dockerode puts it on the error), if any. */
export function dockerStatus(e: unknown): number | undefined {
  return (e as { statusCode?: number } | null)?.statusCode;
}

/** The engine's own message for a failed call ("No such container: …"), else the error's. */
export function dockerMessage(e: unknown): string {
  const err = e as { json?: { message?: string } | null; reason?: string; message?: string } | null;
  const raw = err?.json?.message ?? err?.message ?? String(e);
  return raw.replace(/^\(HTTP code \d+\) [^-]*- /, "").trim() || err?.reason || "unknown error";
}

/** True when the call failed because the engine could not be reached at all. */
export function isUnreachable(e: unknown): boolean {
  const code = (e as { code?: string } | null)?.code;
  return code === "ENOENT" || code === "ECONNREFUSED" || code === "EACCES" || code === "ECONNRESET" || code === "EHOSTUNREACH" || code === "ETIMEDOUT";
}
