/**
 * `runcell doctor`: the installation checks an operator runs, one result each — OK, WARN or FAIL,
 * with the fix (src/cli/doctor.ts prints them, or `--json`): the data dir (owner, mode, writable),
 * its lock (the running server's pid), the database's integrity and its schema against this
 * binary, disk space, Docker and its version, the workspace image, the clock, the admin password,
 * the public URL behind a proxy, the model providers (never their keys), the webhooks' SSRF guard,
 * the vault key and the host's git (repositories).
 *
 * Doctor reads and never changes: no data dir is created, the database is opened read-only (it
 * works next to a running server; SQLite may create its -wal/-shm files, owned like the database),
 * the lock is probed, not taken; the only other write is a probe file in the data dir, removed at
 * once. With --database postgres://… the database checks read PostgreSQL instead (connected, never
 * migrated; its URL is shown without the password).
 */
import { SQL } from "bun";
import { Database } from "bun:sqlite";
import { accessSync, constants, existsSync, readFileSync, type Stats, statfsSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Config, SECRET_FLAGS } from "../config.ts";
import { DB_FILE } from "../db/data-dir.ts";
import { LOCK_FILE, lockHolder } from "../db/lock.ts";
import { BINARY_SCHEMA, newerSchemaWords, type SchemaInfo, schemaInfo } from "../db/migrate.ts";
import { describePostgresError, redactDatabaseUrl } from "../db/pg/client.ts";
import { databaseArgs } from "../db/pg/database-args.ts";
import { PG_MIGRATIONS } from "../db/pg/migrations.ts";
import type { Dialect } from "../db/tables.ts";
import { isDenied, isMissing, readableFix, unreadableReason } from "../lib/file-access.ts";
import { KEY_FILE, readKey, Sealer, VaultKeyError } from "../lib/sealer.ts";
import { sealedSamples, unopened } from "../vault/key-check.ts";
import { VERSION } from "../version.ts";
import { DockerEngine, type EngineAuth } from "../workspaces/docker.ts";
import { ADMIN_PASSWORD_MIN, adminPasswordProblem } from "./password.ts";

export type CheckStatus = "OK" | "WARN" | "FAIL";

/** One line of doctor's report (also the `--json` element). */
export interface CheckResult {
  check: string;
  status: CheckStatus;
  message: string;
  /** What to do about it (WARN and FAIL; null when OK). */
  fix: string | null;
}

/** What the checks share: the configuration, the environment, and probes run at most once. */
export interface DoctorContext {
  config: Config;
  env: Record<string, string | undefined>;
  /** The (first) Docker engine's answer (version, info), or why it did not answer. */
  docker(): Promise<DockerProbe>;
  /** The answer of another --docker-host, by its name. */
  dockerHost?(name: string): Promise<DockerProbe>;
  /** Where the state is: the data dir's SQLite file, or PostgreSQL (--database). */
  dialect: Dialect;
  /** The SQLite file's path, or the PostgreSQL URL without its password. */
  location: string;
  /**
   * The rows of a read-only query, on either database; null when there is no database (no SQLite
   * file yet, or it cannot be opened or reached: dbError). A query that fails rejects. On
   * PostgreSQL, COUNT and bigint columns come back as strings (Number() them), jsonb parsed,
   * bytea as a Buffer.
   */
  rows<T = Record<string, unknown>>(sql: string): Promise<T[] | null>;
  /** Why the database cannot be opened (SQLite) or reached (PostgreSQL); null when it can, or there is none. */
  dbError(): Promise<string | null>;
  /** SQLite only: the file opened read-only (schemaInfo reads it); null on PostgreSQL or without a file. */
  sqlite(): Database | null;
  /** The lock's holder: pid, null (free), -1 (held, pid unknown), or the probe's error. */
  lock(): number | null | Error;
}

export type CheckFn = (ctx: DoctorContext) => Promise<CheckResult> | CheckResult;

export type DockerProbe =
  | {
      ok: true;
      engine: DockerEngine;
      version: string;
      apiVersion: string;
      os: string;
      /** The engine's clock (info.SystemTime), and our clock at the middle of that request. */
      systemTime: number | null;
      sampledAt: number;
      rootDir: string | null;
    }
  | { ok: false; error: string; code?: string };

const ok = (check: string, message: string): CheckResult => ({ check, status: "OK", message, fix: null });
const warn = (check: string, message: string, fix: string): CheckResult => ({ check, status: "WARN", message, fix });
const fail = (check: string, message: string, fix: string): CheckResult => ({ check, status: "FAIL", message, fix });

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const size = (bytes: number) => (bytes >= GiB ? `${(bytes / GiB).toFixed(1)} GiB` : bytes >= MiB ? `${Math.round(bytes / MiB)} MiB` : `${Math.ceil(bytes / 1024)} KiB`);
const octal = (mode: number) => "0" + (mode & 0o777).toString(8).padStart(3, "0");
const errCode = (e: unknown) => (e as NodeJS.ErrnoException | null)?.code;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`${what} timed out after ${ms / 1000} s`), { code: "ETIMEDOUT" })), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** uid → user name from /etc/passwd (the number alone when it is not there). */
function userName(uid: number): string {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name && Number(id) === uid) return name;
    }
  } catch {
    // no /etc/passwd (macOS, minimal containers)
  }
  return `uid ${uid}`;
}
const owner = (uid: number) => {
  const name = userName(uid);
  return name.startsWith("uid ") ? name : `${name} (uid ${uid})`;
};
const euid = () => (typeof process.geteuid === "function" ? process.geteuid() : -1);

/** The nearest path at or above `p` that exists (statfs and access need one). */
function existingAncestor(p: string): string {
  let cur = p;
  while (!existsSync(cur) && dirname(cur) !== cur) cur = dirname(cur);
  return cur;
}

/** A URL with a password in it (postgres://user:pass@host/db), anywhere on a command line. */
const URL_WITH_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]*@/i;

/**
 * A command line fit to print: the value of every secret flag (config.ts marks them) masked, and
 * a database URL's password — the URL itself says where the state is, so only its password goes.
 * Also any other argument that is a URL with a password (`migrate --to postgres://…`).
 */
export function redactCommand(args: string[]): string[] {
  const out = [...args];
  const mask = (flag: string, value: string) => (flag === "database" || URL_WITH_PASSWORD.test(value) ? redactDatabaseUrl(value) : "***");
  for (let i = 0; i < out.length; i++) {
    const m = /^--([a-z-]+)(=(.*))?$/s.exec(out[i]!);
    if (m && SECRET_FLAGS.has(m[1]!)) {
      if (m[2] !== undefined) out[i] = `--${m[1]}=${mask(m[1]!, m[3]!)}`;
      else if (i + 1 < out.length) out[i + 1] = mask(m[1]!, out[++i]!);
      continue;
    }
    if (m?.[3] && URL_WITH_PASSWORD.test(m[3])) out[i] = `--${m[1]}=${redactDatabaseUrl(m[3])}`;
    else if (URL_WITH_PASSWORD.test(out[i]!)) out[i] = redactDatabaseUrl(out[i]!);
  }
  return out;
}

/** The process's command line from /proc (Linux), without its secrets, for naming the lock's holder. */
function commandOf(pid: number): string | null {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    if (!args.length) return null;
    const line = redactCommand(args).map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(" ");
    return line.length > 160 ? line.slice(0, 157) + "…" : line;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The checks

const DATA_DIR = "data dir";
/** The database's size on disk: the file and its WAL (either may not exist yet). */
function databaseBytes(dataDir: string): number {
  let bytes = 0;
  for (const f of [DB_FILE, `${DB_FILE}-wal`]) {
    try {
      bytes += statSync(join(dataDir, f)).size;
    } catch {
      // not there (yet)
    }
  }
  return bytes;
}

/** Files of the data dir the server must be able to write. */
const DATA_FILES = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, KEY_FILE, LOCK_FILE, "runcell.toml", "runcell.json"];

const dataDir: CheckFn = ({ config }) => {
  const dir = config.dataDir;
  let st: Stats | null = null;
  try {
    st = statSync(dir);
  } catch (e) {
    if (errCode(e) !== "ENOENT" && errCode(e) !== "ENOTDIR") {
      return fail(DATA_DIR, `cannot read ${dir}: ${(e as Error).message}`, "run doctor as the data dir's owner (e.g. sudo -u runcell runcell doctor …), or pass the right --data-dir");
    }
  }
  if (!st) {
    const parent = existingAncestor(dirname(dir));
    if (!statSync(parent).isDirectory()) {
      return fail(DATA_DIR, `${dir} cannot be created: ${parent} is a file, not a directory`, "pass --data-dir a directory path (e.g. /var/lib/runcell), or move that file away");
    }
    try {
      accessSync(parent, constants.W_OK);
    } catch (e) {
      return fail(
        DATA_DIR,
        `${dir} does not exist and cannot be created: ${parent} is not writable (${errCode(e) ?? (e as Error).message})`,
        `create it for the service user: sudo install -d -m 0700 -o runcell ${dir} (runcell service install does), or pass another --data-dir`,
      );
    }
    return warn(DATA_DIR, `${dir} does not exist: no runcell has used this data dir yet (serve creates it, mode 0700)`, "check --data-dir (the service uses /var/lib/runcell), or start serve once");
  }
  if (!st.isDirectory()) return fail(DATA_DIR, `${dir} is not a directory`, "pass --data-dir a directory (e.g. /var/lib/runcell)");

  const probe = join(dir, `.doctor-${process.pid}`);
  try {
    writeFileSync(probe, "ok", { mode: 0o600 });
    unlinkSync(probe);
  } catch (e) {
    const code = errCode(e);
    const fix =
      code === "EROFS"
        ? "its filesystem is mounted read-only: remount it read-write (under systemd, the data dir must be in the unit's ReadWritePaths=)"
        : code === "EPERM"
          ? `it is immutable or on a filesystem that refuses writes: lsattr -d ${dir}; chattr -i ${dir}`
          : `give it to the user runcell runs as: sudo chown -R runcell: ${dir} && sudo chmod 700 ${dir}`;
    return fail(DATA_DIR, `${dir} is not writable by ${owner(euid())}: ${code ?? (e as Error).message}`, fix);
  }

  const mode = st.mode & 0o777;
  const facts = [`owner ${owner(st.uid)}`, `mode ${octal(mode)}`, "writable"];
  // Files that are not the data dir owner's: left by `sudo runcell …` run as root; the server
  // (as the owner) cannot write them.
  const foreign: string[] = [];
  for (const f of DATA_FILES) {
    try {
      const fst = statSync(join(dir, f));
      if (fst.uid !== st.uid) foreign.push(`${f} (${userName(fst.uid)})`);
    } catch {
      // not there
    }
  }
  if (foreign.length) {
    return fail(
      DATA_DIR,
      `${dir}: ${facts.join(", ")}; but ${foreign.join(", ")} belong to another user than the data dir: a server running as ${userName(st.uid)} cannot write them`,
      `sudo chown -R ${userName(st.uid).replace(/^uid /, "")}: ${dir}; run admin, token and migrate as the service user (sudo -u ${userName(st.uid).replace(/^uid /, "")} runcell …)`,
    );
  }
  if (mode & 0o077) {
    return warn(DATA_DIR, `${dir}: ${facts.join(", ")}; expected 0700: other users can read ${config.databaseUrl ? "the vault key" : "the database"}`, `chmod 700 ${dir}`);
  }
  const me = euid();
  if (me >= 0 && st.uid !== me) {
    if (me === 0) return ok(DATA_DIR, `${dir}: ${facts.join(", ")}; doctor runs as root, the server must run as ${userName(st.uid)} (the systemd unit does)`);
    else {
      return warn(DATA_DIR, `${dir}: ${facts.join(", ")}; owned by ${owner(st.uid)}, not this user (${owner(me)})`, `run runcell as ${userName(st.uid)}, or sudo chown -R ${userName(me)}: ${dir}`);
    }
  }
  return ok(DATA_DIR, `${dir}: ${facts.join(", ")}`);
};

const lock: CheckFn = (ctx) => {
  const holder = ctx.lock();
  const path = join(ctx.config.dataDir, LOCK_FILE);
  if (holder instanceof Error) {
    return warn("lock", `cannot probe ${path}: ${holder.message}`, "run doctor as the data dir's owner; the data dir must be on a local filesystem with flock(2)");
  }
  if (holder === null) return ok("lock", "not held: no runcell serve, migrate or restore is running on this data dir");
  if (holder === -1) {
    return warn("lock", `held by a process whose pid cannot be read from ${path}`, `find it with: fuser -v ${path} (or lsof ${path})`);
  }
  const cmd = commandOf(holder);
  return ok("lock", `held by pid ${holder}${cmd ? ` (${cmd})` : ""}: a runcell server (or migrate/restore) is running on this data dir`);
};

const database: CheckFn = async (ctx) => {
  if (ctx.dialect === "postgres") return postgresDatabase(ctx);
  const path = join(ctx.config.dataDir, DB_FILE);
  const error = await ctx.dbError();
  if (error) return fail("database", `cannot open ${path}: ${error}`, "check the file's owner and permissions; if it is damaged, restore the latest backup (runcell restore <file> --force)");
  if (!ctx.sqlite()) return ok("database", `${path} does not exist yet (serve creates it)`);
  const bytes = databaseBytes(ctx.config.dataDir);
  let rows: string[];
  try {
    rows = ((await ctx.rows<Record<string, unknown>>("PRAGMA quick_check(20)")) ?? []).map((r) => Object.values(r)[0] as string);
  } catch (e) {
    return fail("database", `${path}: quick_check failed: ${(e as Error).message}`, "stop the server and restore the latest backup: runcell restore <file> --force (the pre-migration ones are in <data dir>/backups/)");
  }
  if (rows.length !== 1 || rows[0] !== "ok") {
    return fail(
      "database",
      `${path}: quick_check found ${rows.length} problem(s): ${rows.slice(0, 3).join("; ")}${rows.length > 3 ? " …" : ""}`,
      "stop the server and restore the latest backup: runcell restore <file> --force (the pre-migration ones are in <data dir>/backups/)",
    );
  }
  return ok("database", `${path}: quick_check ok, ${size(bytes)}`);
};

/** --database: PostgreSQL answers (its version and the database's size); the URL is shown without its password. */
async function postgresDatabase(ctx: DoctorContext): Promise<CheckResult> {
  const where = ctx.location;
  const error = await ctx.dbError();
  if (error) {
    return fail(
      "database",
      `cannot reach PostgreSQL at ${where}: ${error}`,
      "start PostgreSQL, or correct --database (RUNCELL_DATABASE_URL): host, port, user, password, database name; doctor must reach it from here as the server does (pg_hba.conf, firewall)",
    );
  }
  const [row] = (await ctx.rows<{ version: string; bytes: string | number | null }>(
    "SELECT current_setting('server_version') AS version, pg_database_size(current_database()) AS bytes",
  )) ?? [];
  const version = String(row?.version ?? "?").split(" ")[0];
  const bytes = row?.bytes == null ? null : Number(row.bytes);
  return ok("database", `PostgreSQL ${version} at ${where}${bytes !== null && Number.isFinite(bytes) ? `, ${size(bytes)}` : ""} (back it up with pg_dump; runcell backup covers SQLite only)`);
}

const schema: CheckFn = async (ctx) => {
  if (ctx.dialect === "postgres") return postgresSchema(ctx);
  const db = ctx.sqlite();
  // null also when the file is there but cannot be opened: the database check says why.
  if (!db && (await ctx.dbError())) return warn("schema", "not checked: the database cannot be read", "fix the database check first");
  if (!db) return ok("schema", `no database yet: serve creates it with schema ${BINARY_SCHEMA}`);
  let info: SchemaInfo;
  try {
    info = schemaInfo(db);
  } catch (e) {
    return fail("schema", `cannot read the migrations table: ${(e as Error).message}`, "restore the latest backup (runcell restore <file> --force)");
  }
  const by = info.writer ? `written by runcell ${info.writer.version}` : "writer unknown";
  switch (info.state) {
    case "current":
      return ok("schema", `current: ${info.schema} (${by}), as this runcell ${VERSION} expects`);
    case "empty":
      return warn("schema", `the database has no schema yet; this runcell ${VERSION} creates ${info.binarySchema}`, "start serve (or run runcell migrate) once");
    case "older": {
      const holder = ctx.lock();
      const running = typeof holder === "number" && holder > 0 ? ` The server running now (pid ${holder}) is an older runcell.` : "";
      return warn(
        "schema",
        `older: ${info.schema} (${by}); this runcell ${VERSION} would apply ${info.pending.join(", ")}.${running}`,
        "restart the server with this binary: it backs the database up into <data dir>/backups/ and migrates it (or runcell migrate, with the server stopped)",
      );
    }
    case "newer": {
      const w = newerSchemaWords(info.writer);
      return fail(
        "schema",
        `newer: ${info.schema} (written by ${w.writtenBy}); this ${w.thisBinary} knows schema up to ${info.binarySchema} and refuses this database`,
        `run ${w.runInstead}, or restore a backup made before the upgrade (runcell restore <data dir>/backups/pre-migrate-….tar.gz --force)`,
      );
    }
  }
};

/** --database: the applied migrations against this binary's PG_MIGRATIONS (what serve and migrate would apply). */
async function postgresSchema(ctx: DoctorContext): Promise<CheckResult> {
  const known = PG_MIGRATIONS.map((m) => m.tag);
  const binarySchema = known[known.length - 1] ?? "none";
  const migrateFix = `restart the server with this binary (it applies them at start), or run: runcell migrate ${databaseArgs(ctx.config)}`;
  let applied: string[];
  try {
    const exists = await ctx.rows<{ ok: boolean }>("SELECT to_regclass('public._migrations') IS NOT NULL AS ok");
    if (!exists) return warn("schema", "not checked: PostgreSQL is not reachable", "fix the database check first");
    applied = exists[0]?.ok ? ((await ctx.rows<{ tag: string }>("SELECT tag FROM _migrations ORDER BY id")) ?? []).map((r) => r.tag) : [];
  } catch (e) {
    return fail("schema", `cannot read the migrations table: ${(e as Error).message}`, "check the --database user's privileges on the database (it must own runcell's tables)");
  }
  const dbSchema = applied[applied.length - 1] ?? null;
  const unknown = applied.filter((t) => !known.includes(t));
  if (unknown.length) {
    return fail(
      "schema",
      `newer: ${dbSchema} (migration(s) ${unknown.join(", ")} unknown to this runcell ${VERSION}, which knows schema up to ${binarySchema} and refuses this database)`,
      "run the newer runcell binary that migrated it, or restore a pg_dump made before the upgrade (pg_restore --clean)",
    );
  }
  if (!applied.length) return warn("schema", `the database has no schema yet; this runcell ${VERSION} creates ${binarySchema}`, `start serve once, or run: runcell migrate ${databaseArgs(ctx.config)}`);
  const pending = known.filter((t) => !applied.includes(t));
  if (pending.length) return warn("schema", `older: ${dbSchema}; this runcell ${VERSION} would apply ${pending.join(", ")}`, migrateFix);
  return ok("schema", `current: ${dbSchema}, as this runcell ${VERSION} expects`);
}

const disk: CheckFn = async (ctx) => {
  const dir = existingAncestor(ctx.config.dataDir);
  let free: number;
  let total: number;
  try {
    const s = statfsSync(dir);
    free = s.bavail * s.bsize;
    total = s.blocks * s.bsize;
  } catch (e) {
    return warn("disk", `cannot read the free space of ${dir}: ${(e as Error).message}`, `df -h ${dir}`);
  }
  // On PostgreSQL the database is not on this filesystem (a runcell.db left in the data dir is not used).
  const dbBytes = ctx.dialect === "postgres" ? 0 : databaseBytes(ctx.config.dataDir);
  const pct = total ? (free / total) * 100 : 100;
  const parts = [`${size(free)} free of ${size(total)} (${pct.toFixed(0)}%) on the data dir's filesystem`];
  const status: CheckStatus[] = [];
  if (free < 256 * MiB || free < dbBytes) status.push("FAIL");
  else if (free < GiB || pct < 5 || free < 2 * dbBytes) status.push("WARN");
  if (dbBytes) parts.push(`the database is ${size(dbBytes)} (a backup or pre-migration backup needs as much again)`);
  if (ctx.dialect === "postgres") parts.push("the database is in PostgreSQL (its space is the database server's)");
  // Workspace volumes live in Docker's root dir: check it too when the engine is on this host.
  const probe = await ctx.docker();
  if (probe.ok && probe.rootDir && ctx.config.dockerHost.startsWith("unix:") && existsSync(probe.rootDir)) {
    try {
      const s = statfsSync(probe.rootDir);
      const dfree = s.bavail * s.bsize;
      parts.push(`Docker's ${probe.rootDir}: ${size(dfree)} free`);
      if (dfree < GiB) status.push("WARN");
    } catch {
      // not readable by this user
    }
  }
  const message = parts.join("; ");
  if (status.includes("FAIL")) return fail("disk", message, "free space on that filesystem (old backups, docker system prune), or move the data dir to a larger one");
  if (status.includes("WARN")) return warn("disk", message, "free space soon (old backups in <data dir>/backups/ and the backup directory, docker system prune, journalctl --vacuum-size)");
  return ok("disk", message);
};

const docker: CheckFn = async (ctx) => {
  const host = ctx.config.dockerHost;
  const probe = await ctx.docker();
  // serve uses --docker-host / RUNCELL_DOCKER_HOST, never DOCKER_HOST: say so when they differ.
  const other = ctx.env.DOCKER_HOST && ctx.env.DOCKER_HOST !== host && !ctx.config.sources?.["docker-host"] ? ctx.env.DOCKER_HOST : null;
  const note = other ? ` (DOCKER_HOST=${other} is set, but runcell uses --docker-host / RUNCELL_DOCKER_HOST, here the default)` : "";
  if (!probe.ok) {
    const code = probe.code;
    const fix =
      code === "EACCES"
        ? "this user may not use the socket: add the service user to the docker group (sudo usermod -aG docker runcell; runcell service install does), or run doctor as that user"
        : code === "ENOENT"
          ? `no socket there: install and start Docker (sudo systemctl start docker; ./install.sh installs docker.io), or pass --docker-host${other ? ` ${other}` : ""}`
          : code === "ECONNREFUSED"
            ? "nothing answers there: start the engine (sudo systemctl start docker) or pass the right --docker-host"
            : "start the engine (sudo systemctl start docker) or pass the right --docker-host (unix://, tcp:// or ssh://user@host)";
    return fail("docker", `cannot reach ${host}: ${probe.error}${note}`, fix);
  }
  const message = `${host} answers: Docker Engine ${probe.version} (API ${probe.apiVersion}, ${probe.os})${note}`;
  if (other) return warn("docker", message, `if runcell should use that engine, pass --docker-host ${other} (or RUNCELL_DOCKER_HOST)`);
  return ok("docker", message);
};

/** With several --docker-host: each further host answers and has the workspace image (they are optional: a warning each). */
const dockerHosts: CheckFn = async (ctx) => {
  const others = ctx.config.dockerHosts.slice(1);
  if (others.length === 0) return ok("docker hosts", "one Docker host (the docker check above)");
  const lines: string[] = [];
  const bad: string[] = [];
  for (const h of others) {
    const probe = await (ctx.dockerHost?.(h.name) ?? probeDocker(h.url, h));
    if (!probe.ok) {
      bad.push(h.name);
      lines.push(`${h.name} (${h.url}): cannot reach it: ${probe.error}`);
      continue;
    }
    const image = await withTimeout(probe.engine.client.getImage(ctx.config.workspaceImage).inspect(), 5000, "image inspect").then(
      () => "has the workspace image",
      () => `lacks ${ctx.config.workspaceImage}`,
    );
    if (image.startsWith("lacks")) bad.push(h.name);
    lines.push(`${h.name} (${h.url}): Docker Engine ${probe.version}, ${image}`);
  }
  const message = `${ctx.config.dockerHosts[0]!.name} above; ${lines.join("; ")}`;
  if (bad.length) return warn("docker hosts", message, `start the engines of ${bad.join(", ")}, check their --docker-host URL and TLS files, and give them the workspace image (runcell image build --docker-host <url>); new workspaces go to the other hosts meanwhile`);
  return ok("docker hosts", message);
};

/** The image the README's install builds locally; it is on no registry, so it cannot be pulled. */
const BUILT_LOCALLY = "runcell/workspace:latest";

const workspaceImage: CheckFn = async (ctx) => {
  const image = ctx.config.workspaceImage;
  const probe = await ctx.docker();
  if (!probe.ok) return warn("workspace image", `${image}: not checked, Docker is not reachable`, "fix the docker check first");
  try {
    const info = await withTimeout(probe.engine.client.getImage(image).inspect(), 5000, "image inspect");
    return ok("workspace image", `${image} present (${Math.round(info.Size / 1e6)} MB)`);
  } catch (e) {
    const status = (e as { statusCode?: number }).statusCode;
    if (status !== 404) return fail("workspace image", `cannot inspect ${image}: ${(e as Error).message}`, "check the engine (docker image inspect " + image + ")");
    if (image === BUILT_LOCALLY) {
      return fail("workspace image", `${image} is not present (it is built locally, not pulled)`, "run `runcell image build` (or ./install.sh build), or set --workspace-image");
    }
    return warn("workspace image", `${image} is not present: it is pulled at the first session (that session waits for the pull)`, `pull it now: docker pull ${image}`);
  }
};

const clock: CheckFn = async (ctx) => {
  const now = Date.now();
  const facts: string[] = [`now ${new Date(now).toISOString()}`];
  let status: CheckStatus = "OK";
  let fix = "";
  // 1. Against the Docker engine's clock (another machine's with tcp:// or ssh://).
  const probe = await ctx.docker();
  if (probe.ok && probe.systemTime !== null) {
    const skew = (probe.sampledAt - probe.systemTime) / 1000;
    facts.push(`${Math.abs(skew) < 0.5 ? "matches" : skew > 0 ? `${skew.toFixed(1)} s ahead of` : `${(-skew).toFixed(1)} s behind`} the Docker engine's clock`);
    if (Math.abs(skew) > 300) {
      status = "FAIL";
      fix = "synchronize both clocks (timedatectl set-ntp true; chrony or systemd-timesyncd): signed webhook and file URLs carry timestamps others verify";
    } else if (Math.abs(skew) > 5) {
      status = "WARN";
      fix = "synchronize both clocks (timedatectl set-ntp true)";
    }
  } else facts.push("the Docker engine's clock is not available");
  // 2. Against the newest time the database recorded: a clock that went back reorders everything.
  {
    try {
      const rows = await ctx.rows<{ at: number | string | null }>("SELECT MAX(at) AS at FROM (SELECT MAX(at) AS at FROM audit_log UNION ALL SELECT MAX(updated_at) FROM settings) AS newest");
      const latest = rows?.[0]?.at == null ? null : Number(rows[0].at);
      if (latest && latest - now > 60_000) {
        facts.push(`the database holds a time ${((latest - now) / 60_000).toFixed(0)} min in the future (${new Date(latest).toISOString()})`);
        if (status !== "FAIL") {
          status = "WARN";
          fix = "the clock went back (or was ahead before): set it right (timedatectl set-ntp true)";
        }
      }
    } catch {
      // an older schema without these tables
    }
  }
  // 3. What systemd says about NTP, where it runs.
  if (existsSync("/run/systemd/system") && Bun.which("timedatectl")) {
    const r = Bun.spawnSync(["timedatectl", "show", "-p", "NTPSynchronized", "--value"], { stdout: "pipe", stderr: "ignore", timeout: 2000 });
    const v = r.stdout.toString().trim();
    if (v === "yes") facts.push("NTP synchronized");
    else if (v === "no") {
      facts.push("not NTP-synchronized");
      if (status === "OK") {
        status = "WARN";
        fix = "sudo timedatectl set-ntp true (or install chrony)";
      }
    }
  }
  const message = facts.join("; ");
  return status === "OK" ? ok("clock", message) : status === "WARN" ? warn("clock", message, fix) : fail("clock", message, fix);
};

const ADMIN_PASSWORD = "admin password";
const ADMIN_PASSWORD_FIX = "run `runcell admin set-password`, or start serve with --admin-password-file FILE or RUNCELL_ADMIN_PASSWORD";

const adminPassword: CheckFn = async (ctx) => {
  const { config } = ctx;
  if (config.adminPasswordFile) {
    let text: string;
    try {
      text = readFileSync(config.adminPasswordFile, "utf8").replace(/\r?\n$/, "");
    } catch (e) {
      const file = config.adminPasswordFile;
      if (!isMissing(e)) return fail(ADMIN_PASSWORD, `${file} ${unreadableReason(e)}`, isDenied(e) ? readableFix(file) : "check the file, or drop --admin-password-file");
      return fail(ADMIN_PASSWORD, `${file} does not exist`, "create the file (chmod 600) or drop --admin-password-file");
    }
    if (text.length < ADMIN_PASSWORD_MIN) {
      return fail(ADMIN_PASSWORD, `${config.adminPasswordFile} holds fewer than ${ADMIN_PASSWORD_MIN} characters`, "put a longer password in it");
    }
    const problem = adminPasswordProblem(text);
    if (problem) return fail(ADMIN_PASSWORD, `${config.adminPasswordFile}: ${problem}`, "put a password of printable ASCII in it");
    return ok(ADMIN_PASSWORD, `set from ${config.adminPasswordFile} at start`);
  }
  if (config.adminPassword) {
    if (config.adminPassword.length < ADMIN_PASSWORD_MIN) {
      return fail(ADMIN_PASSWORD, `RUNCELL_ADMIN_PASSWORD has fewer than ${ADMIN_PASSWORD_MIN} characters`, "use a longer password");
    }
    const problem = adminPasswordProblem(config.adminPassword);
    if (problem) return fail(ADMIN_PASSWORD, `RUNCELL_ADMIN_PASSWORD: ${problem}`, "use a password of printable ASCII");
    return ok(ADMIN_PASSWORD, "set from RUNCELL_ADMIN_PASSWORD at start");
  }
  let stored = false;
  try {
    stored = !!(await ctx.rows("SELECT 1 AS ok FROM settings WHERE key = 'admin_password_hash'"))?.length;
  } catch {
    stored = false;
  }
  if (stored) return ok(ADMIN_PASSWORD, "set (argon2id hash in the database)");
  return fail(ADMIN_PASSWORD, "none is set: every /admin/* call and /metrics answer 401", ADMIN_PASSWORD_FIX);
};

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
const isLoopbackHost = (h: string) => LOOPBACK.has(h) || /^127\./.test(h);

const publicUrl: CheckFn = ({ config }) => {
  const u = new URL(config.publicUrl);
  const loopback = isLoopbackHost(u.hostname);
  if (u.pathname !== "/" && u.pathname !== "") {
    return fail("public url", `${config.publicUrl} has a path`, "serve runcell at the root of its host (https://agents.example.com)");
  }
  if (u.protocol === "http:" && !loopback) {
    return fail(
      "public url",
      `${config.publicUrl} is plain http on a non-loopback host: cookies and tokens travel unencrypted`,
      "put runcell behind a TLS proxy (Caddy or nginx, see README: Operations) and pass --public-url https://… --trust-proxy",
    );
  }
  const listensOpen = !isLoopbackHost(config.host) && config.host !== "";
  if (u.protocol === "https:" && !config.trustProxy) {
    return warn(
      "public url",
      `${config.publicUrl} (cookies are Secure), but --trust-proxy is off: behind the TLS proxy every client has the proxy's address — one rate-limit bucket for all, the proxy's address in logs and the audit log`,
      "pass --trust-proxy (RUNCELL_TRUST_PROXY=true) and have the proxy set X-Forwarded-For",
    );
  }
  if (config.trustProxy && listensOpen) {
    return warn(
      "public url",
      `${config.publicUrl} with --trust-proxy, but serve listens on ${config.host}:${config.port}: a client reaching that port directly can set X-Forwarded-For and choose the address it is limited and logged under`,
      `listen on loopback behind the proxy: --http 127.0.0.1:${config.port} (or firewall the port)`,
    );
  }
  if (u.protocol === "https:") return ok("public url", `${config.publicUrl} behind a proxy (--trust-proxy; cookies are Secure), serve listens on ${config.host}:${config.port}`);
  return ok("public url", `${config.publicUrl} (loopback; behind a TLS proxy pass --public-url https://… --trust-proxy)`);
};

/** The server's environment variable holding each provider's key (used for the providers' own endpoints only). */
const PROVIDER_KEYS = { anthropic: "ANTHROPIC_API_KEY", openai: "OPENAI_API_KEY" } as const;

const providers: CheckFn = async (ctx) => {
  const set = (Object.keys(PROVIDER_KEYS) as (keyof typeof PROVIDER_KEYS)[]).filter((p) => !!ctx.env[PROVIDER_KEYS[p]]);
  const facts = (Object.keys(PROVIDER_KEYS) as (keyof typeof PROVIDER_KEYS)[]).map((p) => `${p} ${set.includes(p) ? `key set (${PROVIDER_KEYS[p]})` : "no server key"}`);
  // Profiles that depend on a server key this environment does not have, or on a vault secret that does not exist.
  const missingServerKey = new Map<string, number>();
  let missingSecret = 0;
  let profileCount = 0;
  // Whether there is a database to read (its rows come below).
  const db = (await ctx.dbError()) === null && (ctx.dialect === "postgres" || ctx.sqlite() !== null);
  if (db) {
    try {
      const secrets = new Set(((await ctx.rows<{ k: string }>("SELECT user_id || ':' || name AS k FROM secrets")) ?? []).map((r) => r.k));
      // model: JSON text on SQLite, jsonb (parsed already) on PostgreSQL.
      for (const row of (await ctx.rows<{ user_id: string; model: unknown }>("SELECT user_id, model FROM profiles")) ?? []) {
        profileCount++;
        let model: { provider?: string; base_url?: string | null; api_key_secret?: string | null };
        try {
          model = typeof row.model === "string" ? JSON.parse(row.model) : (row.model as typeof model);
          if (!model || typeof model !== "object") continue;
        } catch {
          continue;
        }
        const p = model.provider as keyof typeof PROVIDER_KEYS;
        if (model.api_key_secret) {
          if (!secrets.has(`${row.user_id}:${model.api_key_secret}`)) missingSecret++;
        } else if (p in PROVIDER_KEYS && !model.base_url && !set.includes(p)) missingServerKey.set(p, (missingServerKey.get(p) ?? 0) + 1);
      }
    } catch {
      // an older schema: leave the profiles out
    }
  }
  if (db) facts.push(`${profileCount} profile(s)`);
  const problems: string[] = [];
  for (const [p, n] of missingServerKey) problems.push(`${n} profile(s) use ${p} without a key of their own and the server has no ${PROVIDER_KEYS[p as keyof typeof PROVIDER_KEYS]}`);
  if (missingSecret) problems.push(`${missingSecret} profile(s) name a vault secret (model.api_key_secret) that does not exist`);
  if (problems.length) {
    return warn("providers", `${facts.join(", ")}; ${problems.join("; ")}: their tasks fail`, "put the key in the server's environment (/etc/runcell/runcell.env under systemd, then restart; run doctor with the same environment), or give those profiles a vault key");
  }
  if (!set.length) {
    return warn(
      "providers",
      `${facts.join(", ")}: new profiles use the offline demo model unless they bring a vault key`,
      "set ANTHROPIC_API_KEY or OPENAI_API_KEY in the server's environment (/etc/runcell/runcell.env under systemd); doctor sees only its own environment",
    );
  }
  return ok("providers", facts.join(", "));
};

const webhooks: CheckFn = ({ config }) => {
  if (config.allowPrivateWebhooks) {
    return warn(
      "webhooks",
      "SSRF guard off (--allow-private-webhooks): webhook URLs may point at loopback and private addresses, so any user can make the server call internal services",
      "drop --allow-private-webhooks (RUNCELL_ALLOW_PRIVATE_WEBHOOKS) unless every user is trusted and the receivers are on your network",
    );
  }
  const hosts = config.allowModelHosts.length ? `; private model hosts allowed: ${config.allowModelHosts.join(", ")}` : "";
  return ok("webhooks", `SSRF guard on: webhook URLs resolving to loopback or private addresses are refused${hosts}`);
};

const vaultKey: CheckFn = async (ctx) => {
  const external = ctx.config.vaultKeyFile;
  const path = external ?? join(ctx.config.dataDir, KEY_FILE);
  let st: Stats | null = null;
  try {
    st = statSync(path);
  } catch (e) {
    // Not reachable is not missing: the key may be there, and the missing-key hint would overwrite it.
    if (!isMissing(e)) return fail("vault key", `${path}${external ? " (--vault-key-file)" : ""} ${unreadableReason(e)}: serve will not start`, isDenied(e) ? readableFix(path) : `check ${path}`);
    st = null;
  }
  const count = async (sql: string) => {
    try {
      return Number((await ctx.rows<{ n: number | string }>(sql))?.[0]?.n ?? 0) || 0;
    } catch {
      return 0;
    }
  };
  if (!st) {
    if (external) return fail("vault key", `${path} (--vault-key-file) does not exist: serve will not start`, `copy the key that belongs to this database there, or for a new installation: head -c 32 /dev/urandom | base64 > ${path}; chmod 600 ${path}`);
    const sealed =
      (await count("SELECT COUNT(*) AS n FROM secrets")) + (await count("SELECT COUNT(*) AS n FROM integrations WHERE secret_ciphertext IS NOT NULL")) + (await count("SELECT COUNT(*) AS n FROM playbooks"));
    if (sealed) {
      return fail(
        "vault key",
        `${path} is missing, and the database holds ${sealed} sealed value(s): they cannot be decrypted`,
        ctx.dialect === "postgres"
          ? "put back the secret.key that belongs to this database (the one kept with its pg_dump), or point --vault-key-file at it"
          : "put back the secret.key that belongs to this database (runcell restore puts it back from a backup that holds it), or start serve with --vault-key-file <the key it was stored with> (a backup made with --vault-key-file holds no key)",
      );
    }
    return ok("vault key", `${path} not created yet (serve creates it)`);
  }
  let key: Buffer;
  try {
    key = readKey(path);
  } catch (e) {
    // A malformed key file (it was read) is the only one this hint is for; an unreadable one says how to let serve read it.
    return fail("vault key", (e as Error).message, e instanceof VaultKeyError && e.malformed ? "the file must hold 32 random bytes in base64 (head -c 32 /dev/urandom | base64)" : readableFix(path));
  }
  // The key must open what the database holds: one sealed value of each kind is tried (as serve does at start).
  const rows = async <T>(sql: string): Promise<T[] | null> => {
    try {
      return await ctx.rows<T>(sql);
    } catch {
      return null;
    }
  };
  const samples = await sealedSamples(rows, { signingKey: false });
  const sample = samples.length > 0;
  if (unopened(Sealer.fromKey(key), samples)) {
    return fail("vault key", `${path} does not open this database's secrets: it is not the key they were stored with`, external ? "point --vault-key-file at the key of this database (the secret.key of its data dir, or of its backup)" : "put back the secret.key that belongs to this database (runcell restore)");
  }
  if (st.mode & 0o077) return warn("vault key", `${path} has mode ${octal(st.mode)}: others can read the key of every stored secret`, `chmod 600 ${path}`);
  const opens = sample ? "; it opens the stored secrets" : "";
  if (external) {
    const stray = existsSync(join(ctx.config.dataDir, KEY_FILE)) ? `; ${join(ctx.config.dataDir, KEY_FILE)} is not used` : "";
    return ok("vault key", `${path} (--vault-key-file, mode ${octal(st.mode)})${opens}${stray}; back it up apart from the data dir: backups do not hold it`);
  }
  return ok("vault key", `${path} present (mode ${octal(st.mode)})${opens}; keep it with your ${ctx.dialect === "postgres" ? "pg_dump backups: they do not hold it" : "backups"}`);
};

/** Repositories are cloned and pushed with the host's git (src/git/); without it, profiles with repositories fail their tasks. */
const git: CheckFn = ({ env }) => {
  const path = Bun.which("git", { PATH: env.PATH ?? process.env.PATH ?? "" });
  if (!path) return warn("git", "git is not installed: tasks of profiles or sessions with repositories fail (runcell clones and pushes with the host's git)", "apt-get install git (or your system's package)");
  const r = Bun.spawnSync([path, "--version"], { stdout: "pipe", stderr: "ignore" });
  const version = r.stdout.toString().trim().replace(/^git version /, "");
  const [major, minor] = version.split(".").map(Number);
  if (!(major! > 2 || (major === 2 && minor! >= 37))) {
    return warn("git", `git ${version} at ${path} is older than 2.37: clones from non-exempt hosts cannot be pinned to the checked address (http.curloptResolve)`, "install git 2.37 or newer");
  }
  return ok("git", `git ${version} at ${path} (repositories are cloned and pushed with it)`);
};

export interface Check {
  name: string;
  run: CheckFn;
}

/** The checks, in the order doctor prints them. */
export const CHECKS: Check[] = [
  { name: DATA_DIR, run: dataDir },
  { name: "lock", run: lock },
  { name: "database", run: database },
  { name: "schema", run: schema },
  { name: "disk", run: disk },
  { name: "docker", run: docker },
  { name: "docker hosts", run: dockerHosts },
  { name: "workspace image", run: workspaceImage },
  { name: "clock", run: clock },
  { name: ADMIN_PASSWORD, run: adminPassword },
  { name: "public url", run: publicUrl },
  { name: "providers", run: providers },
  { name: "webhooks", run: webhooks },
  { name: "vault key", run: vaultKey },
  { name: "git", run: git },
];

async function probeDocker(host: string, auth: EngineAuth = {}): Promise<DockerProbe> {
  let engine: DockerEngine;
  try {
    engine = new DockerEngine(host, auth);
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
  try {
    const v = await withTimeout(engine.client.version(), 5000, "the version request");
    let systemTime: number | null = null;
    let sampledAt = Date.now();
    let rootDir: string | null = null;
    try {
      const t0 = Date.now();
      const info = await withTimeout(engine.client.info(), 5000, "the info request");
      sampledAt = (t0 + Date.now()) / 2;
      const t = Date.parse(info.SystemTime);
      systemTime = Number.isFinite(t) ? t : null;
      rootDir = typeof info.DockerRootDir === "string" ? info.DockerRootDir : null;
    } catch {
      // version answered; info is optional
    }
    return { ok: true, engine, version: v.Version, apiVersion: v.ApiVersion, os: `${v.Os}/${v.Arch}`, systemTime, sampledAt, rootDir };
  } catch (e) {
    return { ok: false, error: (e as Error).message, code: errCode(e) };
  }
}

/** How long doctor waits for PostgreSQL to answer. */
const PG_CONNECT_TIMEOUT_S = 5;

export function createContext(config: Config, env: Record<string, string | undefined> = process.env): DoctorContext & { close(): Promise<void> } {
  let dockerProbe: Promise<DockerProbe> | null = null;
  let holder: number | null | Error | undefined;
  const lock = () => {
    if (holder === undefined) {
      try {
        holder = lockHolder(config.dataDir);
      } catch (e) {
        holder = e as Error;
      }
    }
    return holder;
  };
  const common = {
    config,
    env,
    docker: () => (dockerProbe ??= probeDocker(config.dockerHost, config.dockerHosts[0]!)),
    lock,
  };

  const url = config.databaseUrl;
  if (url) {
    // PostgreSQL: connected at the first query, never migrated; a small pool of its own.
    let pg: Promise<SQL | null> | undefined;
    let pgError: string | null = null;
    const connect = () =>
      (pg ??= (async () => {
        let sql: SQL | null = null;
        try {
          // Made inside the try: the driver refuses a URL option's value (sslmode=…) here.
          sql = new SQL(url, { max: 2, idleTimeout: 10, connectionTimeout: PG_CONNECT_TIMEOUT_S });
          await withTimeout(sql.unsafe("SELECT 1"), (PG_CONNECT_TIMEOUT_S + 2) * 1000, "connecting");
          return sql;
        } catch (e) {
          pgError = describePostgresError(e, url);
          await sql?.close({ timeout: 1 }).catch(() => {});
          return null;
        }
      })());
    return {
      ...common,
      dialect: "postgres",
      location: redactDatabaseUrl(url),
      async rows<T>(text: string) {
        const sql = await connect();
        if (!sql) return null;
        try {
          return [...(await sql.unsafe(text))] as T[];
        } catch (e) {
          throw new Error(describePostgresError(e, url));
        }
      },
      async dbError() {
        await connect();
        return pgError;
      },
      sqlite: () => null,
      async close() {
        const sql = await pg;
        await sql?.close({ timeout: 5 }).catch(() => {});
      },
    };
  }

  let db: Database | null | undefined;
  let dbError: string | null = null;
  const path = join(config.dataDir, DB_FILE);
  const openDb = () => {
    if (db !== undefined) return db;
    db = null;
    if (!existsSync(path)) return db;
    try {
      const d = new Database(path, { readonly: true });
      d.exec("PRAGMA busy_timeout = 5000");
      d.query("SELECT COUNT(*) FROM sqlite_master").get(); // fails now on a file that is not a database
      db = d;
    } catch (e) {
      dbError = (e as Error).message;
    }
    return db;
  };
  return {
    ...common,
    dialect: "sqlite",
    location: path,
    async rows<T>(text: string) {
      const d = openDb();
      return d ? (d.query(text).all() as T[]) : null;
    },
    async dbError() {
      openDb();
      return dbError;
    },
    sqlite: openDb,
    async close() {
      db?.close();
    },
  };
}

/** Runs the checks in order; a check that throws is reported as FAIL (doctor itself never crashes). */
export async function runChecks(config: Config, opts: { checks?: Check[]; env?: Record<string, string | undefined> } = {}): Promise<CheckResult[]> {
  const ctx = createContext(config, opts.env);
  const out: CheckResult[] = [];
  try {
    for (const c of opts.checks ?? CHECKS) {
      try {
        out.push(await c.run(ctx));
      } catch (e) {
        out.push(fail(c.name, `the check itself failed: ${(e as Error).message}`, "report this with the output of runcell doctor --json"));
      }
    }
  } finally {
    await ctx.close();
  }
  return out;
}
