/**
 * `runcell doctor`: the installation checks, one line each with the fix (src/cli/doctor.ts prints
 * them): data dir, database, Docker, the workspace image, the public URL, the admin password.
 */
import { existsSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config.ts";
import { openDatabase } from "../db/client.ts";
import { DB_FILE, prepareDataDir } from "../db/data-dir.ts";
import { migrationStatus } from "../db/migrate.ts";
import { DockerEngine } from "../workspaces/docker.ts";
import { ADMIN_PASSWORD_MIN } from "./password.ts";

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** How to fix it (FAIL only). */
  fix?: string;
}

export type CheckFn = (config: Config) => Promise<Check> | Check;

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

const ADMIN_PASSWORD = "admin password";
const ADMIN_PASSWORD_FIX = "run `runcell admin set-password`, or start serve with --admin-password-file FILE or RUNCELL_ADMIN_PASSWORD";

const adminPassword: CheckFn = (config) => {
  if (config.adminPasswordFile) {
    let text: string;
    try {
      text = readFileSync(config.adminPasswordFile, "utf8").replace(/\r?\n$/, "");
    } catch (e) {
      return { name: ADMIN_PASSWORD, ok: false, detail: `cannot read ${config.adminPasswordFile}: ${(e as Error).message}`, fix: "create the file (chmod 600) or drop --admin-password-file" };
    }
    if (text.length < ADMIN_PASSWORD_MIN) {
      return { name: ADMIN_PASSWORD, ok: false, detail: `${config.adminPasswordFile} holds fewer than ${ADMIN_PASSWORD_MIN} characters`, fix: "put a longer password in it" };
    }
    return { name: ADMIN_PASSWORD, ok: true, detail: `set from ${config.adminPasswordFile} at start` };
  }
  if (config.adminPassword) {
    if (config.adminPassword.length < ADMIN_PASSWORD_MIN) {
      return { name: ADMIN_PASSWORD, ok: false, detail: `RUNCELL_ADMIN_PASSWORD has fewer than ${ADMIN_PASSWORD_MIN} characters`, fix: "use a longer password" };
    }
    return { name: ADMIN_PASSWORD, ok: true, detail: "set from RUNCELL_ADMIN_PASSWORD at start" };
  }
  const path = join(config.dataDir, DB_FILE);
  let stored = false;
  if (existsSync(path)) {
    try {
      const handle = openDatabase(path, { readonly: true });
      try {
        stored = !!handle.sqlite.query("SELECT 1 FROM settings WHERE key = 'admin_password_hash'").get();
      } finally {
        handle.close();
      }
    } catch {
      stored = false;
    }
  }
  if (stored) return { name: ADMIN_PASSWORD, ok: true, detail: "set (argon2id hash in the database)" };
  return { name: ADMIN_PASSWORD, ok: false, detail: "none is set: every /admin/* call and /metrics answer 401", fix: ADMIN_PASSWORD_FIX };
};

export const CHECKS: CheckFn[] = [dataDirWritable, database, docker, workspaceImage, publicUrl, adminPassword];

export async function runChecks(config: Config, checks: CheckFn[] = CHECKS): Promise<Check[]> {
  const out: Check[] = [];
  for (const c of checks) out.push(await c(config));
  return out;
}

