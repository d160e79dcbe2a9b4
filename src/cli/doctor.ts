import { existsSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE, prepareDataDir } from "../app.ts";
import { type Config, parseArgs, resolveConfig } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import { DockerEngine } from "../workspaces/docker.ts";
import { adminPasswordCheck } from "../admin/doctor-check.ts";
import { type Command, failUsage } from "./command.ts";

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** How to fix it (FAIL only). */
  fix?: string;
}

type CheckFn = (config: Config) => Promise<Check> | Check;

const dataDirWritable: CheckFn = (config) => {
  try {
    prepareDataDir(config.dataDir);
    const probe = join(config.dataDir, `.doctor-${process.pid}`);
    writeFileSync(probe, "ok");
    unlinkSync(probe);
    const mode = statSync(config.dataDir).mode & 0o777;
    return { name: "data dir", ok: true, detail: `${config.dataDir} is writable (mode ${mode.toString(8)})` };
  } catch (e) {
    return { name: "data dir", ok: false, detail: `${config.dataDir}: ${(e as Error).message}`, fix: "create it or pass --data-dir to a directory this user owns" };
  }
};

const database: CheckFn = (config) => {
  const path = join(config.dataDir, DB_FILE);
  if (!existsSync(path)) return { name: "database", ok: true, detail: `${path} does not exist yet (created by the first serve)` };
  try {
    const handle = openDatabase(path);
    try {
      const row = handle.sqlite.query<{ integrity_check: string }, []>("PRAGMA integrity_check").get();
      if (row?.integrity_check !== "ok") {
        return { name: "database", ok: false, detail: `integrity check: ${row?.integrity_check}`, fix: "restore the latest backup (see README: Operations)" };
      }
      const { applied, pending } = migrationStatus(handle.sqlite);
      return { name: "database", ok: true, detail: `${path} integrity ok, ${applied.length} migration(s) applied, ${pending.length} pending` };
    } finally {
      handle.close();
    }
  } catch (e) {
    return { name: "database", ok: false, detail: (e as Error).message, fix: "check the file's permissions, or run the runcell version that wrote it" };
  }
};

const docker: CheckFn = async (config) => {
  const engine = new DockerEngine(config.dockerHost);
  if (!(await engine.available(0))) {
    return {
      name: "docker",
      ok: false,
      detail: `cannot reach ${config.dockerHost}: ${engine.status.error}`,
      fix: "start the engine (sudo systemctl start docker, or ./install.sh installs docker.io) or pass --docker-host",
    };
  }
  return { name: "docker", ok: true, detail: `${config.dockerHost} answers, engine ${engine.status.version}` };
};

const workspaceImage: CheckFn = async (config) => {
  const engine = new DockerEngine(config.dockerHost);
  try {
    const info = await engine.client.getImage(config.workspaceImage).inspect();
    return { name: "workspace image", ok: true, detail: `${config.workspaceImage} present (${Math.round(info.Size / 1e6)} MB)` };
  } catch (e) {
    const status = (e as { statusCode?: number }).statusCode;
    return {
      name: "workspace image",
      ok: false,
      detail: status === 404 ? `${config.workspaceImage} is not present` : `cannot inspect ${config.workspaceImage}: ${(e as Error).message}`,
      fix: "run `runcell image build` (builds it locally, no registry needed) or set --workspace-image",
    };
  }
};

const publicUrl: CheckFn = (config) => {
  const u = new URL(config.publicUrl);
  const loopback = ["localhost", "127.0.0.1", "[::1]"].includes(u.hostname);
  if (u.pathname !== "/" && u.pathname !== "") {
    return { name: "public url", ok: false, detail: `${config.publicUrl} has a path`, fix: "serve runcell at the root of its host (https://agents.example.com)" };
  }
  if (u.protocol === "http:" && !loopback) {
    return {
      name: "public url",
      ok: false,
      detail: `${config.publicUrl} is plain http on a non-loopback host: cookies and tokens travel unencrypted`,
      fix: "put runcell behind a TLS proxy and pass --public-url https://… --trust-proxy",
    };
  }
  return { name: "public url", ok: true, detail: `${config.publicUrl}${u.protocol === "https:" ? " (cookies are Secure)" : " (loopback)"}` };
};

export const CHECKS: CheckFn[] = [dataDirWritable, database, docker, workspaceImage, publicUrl];

export async function runChecks(config: Config, checks: CheckFn[] = CHECKS): Promise<Check[]> {
  const out: Check[] = [];
  for (const c of checks) out.push(await c(config));
  return out;
}

export const doctorCommand: Command = {
  name: "doctor",
  summary: "Check the installation: data dir, database, Docker, workspace image, public URL, admin password.",
  usage: "runcell doctor [flags]",
  examples: ["runcell doctor", "runcell doctor --data-dir /var/lib/runcell --docker-host unix:///run/docker.sock"],
  configFlags: true,
  async run(argv) {
    let config;
    try {
      config = resolveConfig(parseArgs(argv).flags);
    } catch (e) {
      return failUsage("doctor", e);
    }
    const results = await runChecks(config, [...CHECKS, ...extraChecks]);
    for (const r of results) {
      console.log(`${r.ok ? "OK  " : "FAIL"} ${r.name}: ${r.detail}${r.ok || !r.fix ? "" : `\n     fix: ${r.fix}`}`);
    }
    return results.every((r) => r.ok) ? 0 : 1;
  },
};

/** Checks contributed by other modules (the admin password check lives with the admin code). */
export const extraChecks: CheckFn[] = [];
extraChecks.push(adminPasswordCheck);
