/**
 * `runcell backup <file.tar.gz | dir>`: one gzipped tar holding a consistent copy of the database
 * (SQLite `VACUUM INTO`, safe while the server runs: it reads one snapshot), the vault key, the
 * config file if any, and `manifest.json` (versions, schema, row counts per table, sha256 of each
 * file) — what `runcell restore` checks before it puts anything in place.
 *
 * Also the automatic pre-migration backup of `serve` and `migrate` (upgradeGuard): when this
 * binary is about to migrate an existing database, the old one goes to
 * `<data dir>/backups/pre-migrate-<schema>-<timestamp>.tar.gz` first (the last 3 are kept); a
 * database written by a newer runcell is refused before anything else.
 */
import { sha256Hex } from "../lib/crypto.ts";
import { Database } from "bun:sqlite";
import { chmodSync, createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { DB_FILE } from "../db/data-dir.ts";
import { redactDatabaseUrl } from "../db/pg/client.ts";
import { NewerDatabaseError, type SchemaInfo, schemaInfo, schemaInfoOfFile, type SchemaWriter } from "../db/migrate.ts";
import { KEY_FILE } from "../lib/sealer.ts";
import { writeTarGz, type TarSource } from "../lib/tar.ts";
import { COMMIT, VERSION } from "../version.ts";
import { type Command, failUsage, UsageError } from "./command.ts";
import { parseStateArgs, resolveStateConfig, STATE_FLAGS } from "./state-config.ts";

export const MANIFEST_FILE = "manifest.json";
export const CONFIG_FILES = ["runcell.toml", "runcell.json"] as const;
export const BACKUPS_DIR = "backups";
export const BACKUP_FORMAT = "runcell-backup";
export const BACKUP_FORMAT_VERSION = 1;
/** Pre-migration backups kept in <data dir>/backups. */
const KEEP_PRE_MIGRATE = 3;
/** Above this size, long phases report their progress every 10%. */
const BIG_BYTES = 32 * 1024 * 1024;

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  format_version: number;
  created_at: string;
  /** The runcell that made the backup. */
  runcell_version: string;
  commit: string;
  /** The database's schema version: its newest applied migration. */
  schema_version: string | null;
  migrations: string[];
  /** The runcell that last migrated the database (null for databases from before it was recorded). */
  written_by: SchemaWriter | null;
  data_dir: string;
  /** Rows per table of the archived database. */
  tables: Record<string, number>;
  files: Record<string, { size: number; sha256: string }>;
}

/** A progress line for people, with fields for the JSON log (`warning: true` marks a warning). */
export type Progress = (line: string, fields?: Record<string, unknown>) => void;

/** A size for people: 812 B, 4.1 KB, 812.3 MB, 2.40 GB. */
export const mb = (bytes: number) =>
  bytes < 1e3 ? `${bytes} B` : bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} KB` : bytes < 1e9 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e9).toFixed(2)} GB`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** 2026-11-23T17:21:00.123Z → 20261123T172100123Z (sorts in time order, safe in file names). */
export const stamp = (d = new Date()) => d.toISOString().replace(/[-:.]/g, "");

/** Reports every 10% step of a long operation on a big input. */
export function tenths(report: Progress, label: string, total: number) {
  let last = 0;
  return (done: number) => {
    if (total < BIG_BYTES) return;
    const step = Math.min(10, Math.floor((done / total) * 10));
    if (step > last) {
      last = step;
      report(`  ${label}: ${step * 10}% (${mb(done)} of ${mb(total)})`, { phase: label, done, total });
    }
  };
}

export async function sha256File(path: string): Promise<string> {
  const h = new Bun.CryptoHasher("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) h.update(chunk);
  return h.digest("hex");
}


/** Rows per table (SQLite's own tables aside), in name order. */
export function rowCounts(sqlite: Database): Record<string, number> {
  const names = sqlite
    .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
    .all()
    .map((r) => r.name);
  const out: Record<string, number> = {};
  for (const n of names) out[n] = sqlite.query<{ n: number }, []>(`SELECT count(*) AS n FROM "${n.replace(/"/g, '""')}"`).get()!.n;
  return out;
}

export const totalRows = (tables: Record<string, number>) => Object.values(tables).reduce((a, b) => a + b, 0);

// VACUUM INTO runs in a worker so that the main thread can report the copy's progress (bun:sqlite
// calls are synchronous). The worker is inline source: nothing extra to embed in the binary.
const VACUUM_WORKER = `
import { Database } from "bun:sqlite";
self.onmessage = (e) => {
  const { src, dst } = e.data;
  let db;
  try {
    try { db = new Database(src, { readonly: true }); } catch { db = new Database(src, { readwrite: true, create: false }); }
    db.exec("PRAGMA busy_timeout = 30000");
    db.run("VACUUM INTO ?", [dst]);
    postMessage({ ok: true });
  } catch (err) {
    postMessage({ ok: false, message: String((err && err.message) || err) });
  } finally {
    try { db && db.close(); } catch {}
  }
};
`;

function vacuumSync(src: string, dst: string) {
  let db: Database;
  try {
    db = new Database(src, { readonly: true });
  } catch {
    db = new Database(src, { readwrite: true, create: false });
  }
  try {
    db.exec("PRAGMA busy_timeout = 30000");
    db.run("VACUUM INTO ?", [dst]);
  } finally {
    db.close();
  }
}

/** A consistent copy of the live database at `dst` (one read snapshot), reporting progress on big ones. */
async function vacuumInto(src: string, dst: string, total: number, report: Progress): Promise<void> {
  let worker: Worker;
  try {
    worker = new Worker(URL.createObjectURL(new Blob([VACUUM_WORKER], { type: "application/javascript" })));
  } catch {
    vacuumSync(src, dst);
    return;
  }
  const tick = tenths(report, "copying the database", total);
  const timer = setInterval(() => {
    try {
      tick(statSync(dst).size);
    } catch {
      // not created yet
    }
  }, 250);
  try {
    await new Promise<void>((ok, fail) => {
      worker.onmessage = (e: MessageEvent<{ ok: boolean; message?: string }>) => (e.data.ok ? ok() : fail(new Error(e.data.message)));
      worker.onerror = (e) => fail(new Error(e.message));
      worker.postMessage({ src, dst });
    });
  } finally {
    clearInterval(timer);
    worker.terminate();
  }
}

export interface BackupResult {
  path: string;
  size: number;
  manifest: BackupManifest;
}

/**
 * Writes the backup archive `dest` (which must not exist) from `dataDir`: the database copied
 * with VACUUM INTO into a staging dir beside `dest`, counted and hashed there, then archived with
 * the key and config file, through `<dest>.partial` renamed at the end. Throws with a sentence
 * for the operator; leaves nothing behind on failure.
 *
 * `vaultKeyFile`: the server's --vault-key-file, when the key lives outside the data dir (then the
 * backup holds no key, by design, and says where the key is instead of warning).
 */
export async function createBackup(dataDir: string, dest: string, report: Progress = () => {}, vaultKeyFile: string | null = null): Promise<BackupResult> {
  const started = Date.now();
  const source = join(dataDir, DB_FILE);
  if (!existsSync(source)) throw new Error(`no database at ${source} (is --data-dir right?)`);
  if (existsSync(dest)) throw new Error(`${dest} already exists; choose a new file name`);
  mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
  const staging = mkdtempSync(join(dirname(dest), ".runcell-backup-"));
  const partial = `${dest}.partial`;
  try {
    // 1. The database, consistent while serving.
    const live = new Database(source, { readonly: true });
    let total: number;
    try {
      live.exec("PRAGMA busy_timeout = 30000");
      const pages = live.query<{ page_count: number }, []>("PRAGMA page_count").get()!.page_count;
      const pageSize = live.query<{ page_size: number }, []>("PRAGMA page_size").get()!.page_size;
      total = pages * pageSize;
    } finally {
      live.close();
    }
    report(`copying the database ${source} (${mb(total)}, VACUUM INTO: one consistent snapshot, the server may keep running)`, { phase: "database", size: total });
    const copy = join(staging, DB_FILE);
    const t0 = Date.now();
    await vacuumInto(source, copy, total, report);
    chmodSync(copy, 0o600);

    // 2. What the copy holds: schema, writer, rows per table.
    const db = new Database(copy, { readonly: true });
    let info: SchemaInfo;
    let tables: Record<string, number>;
    try {
      info = schemaInfo(db);
      tables = rowCounts(db);
    } finally {
      db.close();
    }
    const dbSize = statSync(copy).size;
    report(`database copied: ${mb(dbSize)} in ${seconds(Date.now() - t0)}; schema ${info.schema ?? "none"}, ${Object.keys(tables).length} tables, ${totalRows(tables)} rows`, {
      phase: "database",
      size: dbSize,
      schema: info.schema,
      rows: totalRows(tables),
    });

    // 3. The small files, read once (what is hashed is what is archived).
    const small: { name: string; bytes: Uint8Array }[] = [];
    for (const name of [KEY_FILE, ...CONFIG_FILES]) {
      const p = join(dataDir, name);
      if (existsSync(p)) small.push({ name, bytes: readFileSync(p) });
    }
    if (vaultKeyFile) report(`the vault key is not in this backup: it is ${vaultKeyFile} (--vault-key-file); keep a copy of it apart from the backups`, { phase: "key" });
    else if (!small.some((f) => f.name === KEY_FILE)) report(`warning: no ${KEY_FILE} in ${dataDir}: stored secrets in this backup cannot be decrypted`, { phase: "key", warning: true });

    const files: BackupManifest["files"] = { [DB_FILE]: { size: dbSize, sha256: await sha256File(copy) } };
    for (const f of small) files[f.name] = { size: f.bytes.length, sha256: sha256Hex(f.bytes) };
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      format_version: BACKUP_FORMAT_VERSION,
      created_at: new Date().toISOString(),
      runcell_version: VERSION,
      commit: COMMIT,
      schema_version: info.schema,
      migrations: info.applied,
      written_by: info.writer,
      data_dir: dataDir,
      tables,
      files,
    };
    const manifestBytes = new TextEncoder().encode(JSON.stringify(manifest, null, 2) + "\n");

    // 4. The archive: manifest first (restore checks versions before extracting anything big).
    const mtime = Math.floor(Date.now() / 1000);
    const entries: TarSource[] = [
      { name: MANIFEST_FILE, size: manifestBytes.length, data: manifestBytes, mtime },
      { name: DB_FILE, size: dbSize, data: { path: copy }, mtime },
      ...small.map((f) => ({ name: f.name, size: f.bytes.length, data: f.bytes, mtime })),
    ];
    report(`writing ${dest}: ${entries.map((e) => (e.name === DB_FILE ? `${e.name} (${mb(e.size)})` : e.name)).join(", ")}`, { phase: "archive", path: dest });
    const tick = tenths(report, "archiving the database", dbSize);
    await writeTarGz(partial, entries, { onProgress: (name, done) => name === DB_FILE && tick(done) });
    renameSync(partial, dest);
    const size = statSync(dest).size;
    report(`backup written: ${dest} (${mb(size)}) in ${seconds(Date.now() - started)}`, { phase: "done", path: dest, size });
    return { path: dest, size, manifest };
  } catch (e) {
    rmSync(partial, { force: true });
    throw e;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Deletes all but the newest `keep` files of `dir` whose names match `pattern` (its first group: a sortable stamp). */
export function pruneBackups(dir: string, pattern: RegExp, keep: number): string[] {
  if (!existsSync(dir)) return [];
  const found = readdirSync(dir)
    .map((name) => ({ name, key: pattern.exec(name)?.[1] }))
    .filter((f): f is { name: string; key: string } => !!f.key)
    .sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
  const removed: string[] = [];
  for (const f of found.slice(keep)) {
    unlinkSync(join(dir, f.name));
    removed.push(join(dir, f.name));
  }
  return removed;
}

export const PRE_MIGRATE_PATTERN = /^pre-migrate-.+-(\d{8}T\d{9}Z)\.tar\.gz$/;
const DAILY_PATTERN = /^runcell-backup-(\d{8}T\d{9}Z)\.tar\.gz$/;

/** The automatic backup before a migration failed: nothing was migrated. */
export class PreMigrationBackupError extends Error {
  constructor(cause: unknown) {
    super(`the pre-migration backup failed, nothing was migrated: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = "PreMigrationBackupError";
  }
}

/**
 * Run by `serve` and `migrate` (holding the data dir's lock) before the database is migrated:
 * refuses a database written by a newer runcell (NewerDatabaseError, naming the version that
 * wrote it), and when this binary has migrations to apply to an existing database, backs it up
 * first into `<data dir>/backups/pre-migrate-<schema>-<timestamp>.tar.gz`, keeping the last 3.
 * Returns the backup's path, or null when there was nothing to migrate (or no database yet).
 * Its failures are sentences for the operator, each saying what failed: NewerDatabaseError,
 * UnreadableDatabaseError (the database cannot be read) or PreMigrationBackupError.
 */
export async function upgradeGuard(dataDir: string, report: Progress = () => {}, vaultKeyFile: string | null = null): Promise<{ backup: string | null; info: SchemaInfo | null }> {
  const info = schemaInfoOfFile(join(dataDir, DB_FILE));
  if (!info) return { backup: null, info: null };
  if (info.state === "newer") throw new NewerDatabaseError(info.unknown[0]!, info.schema!, info.writer, info.binarySchema);
  if (info.state !== "older") return { backup: null, info };
  try {
    return { backup: await preMigrationBackup(dataDir, info, report, vaultKeyFile), info };
  } catch (e) {
    throw new PreMigrationBackupError(e);
  }
}

async function preMigrationBackup(dataDir: string, info: SchemaInfo, report: Progress, vaultKeyFile: string | null): Promise<string> {
  const dir = join(dataDir, BACKUPS_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Leftovers of a backup that was killed half-way (an hour old: not one running beside us).
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    if ((n.startsWith(".runcell-backup-") || n.endsWith(".tar.gz.partial")) && Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
  }
  const dest = join(dir, `pre-migrate-${info.schema}-${stamp()}.tar.gz`);
  report(`the database has schema ${info.schema}, this runcell ${VERSION} applies ${info.pending.join(", ")}: backing it up first`, {
    phase: "pre-migrate",
    schema: info.schema,
    pending: info.pending,
  });
  await createBackup(dataDir, dest, report, vaultKeyFile);
  const removed = pruneBackups(dir, PRE_MIGRATE_PATTERN, KEEP_PRE_MIGRATE);
  if (removed.length) report(`removed older pre-migration backups (the last ${KEEP_PRE_MIGRATE} are kept): ${removed.map((p) => basename(p)).join(", ")}`, { phase: "prune", removed });
  return dest;
}

const isArchiveName = (p: string) => /\.(tar\.gz|tgz)$/.test(p);

export const backupCommand: Command = {
  name: "backup",
  summary: "Write a backup archive (.tar.gz): a consistent copy of the database while serving, the secrets key, the config file, a manifest.",
  usage: "runcell backup [--data-dir DIR] [--keep N] <file.tar.gz | directory>",
  details: `  <file.tar.gz>   write this archive (it must not exist; .tgz works too)
  <directory>     write <directory>/runcell-backup-<UTC timestamp>.tar.gz (created 0700 if missing);
                  this is what \`runcell backup <dir>\` of earlier versions now does
  --keep N        with a directory: afterwards keep only the newest N runcell-backup-*.tar.gz in it

  The archive holds manifest.json (runcell version, schema version, rows per table, sha256 of each
  file), runcell.db, secret.key and runcell.toml|json. It is made while the server runs; progress
  is printed per phase (every 10% for databases over 32 MB). Restore with \`runcell restore <file>\`.
  With --database postgres://… (RUNCELL_DATABASE_URL) it refuses: back the state up with pg_dump
  and keep the vault key with the dump; this command copies the embedded SQLite database only.
  Exit status: 0 written, 1 failed (nothing left behind), 2 bad usage.`,
  examples: [
    "runcell backup /srv/backups/runcell-$(date +%F).tar.gz",
    "runcell backup --data-dir /var/lib/runcell --keep 14 /srv/backups/runcell/",
  ],
  configFlags: STATE_FLAGS,
  async run(argv) {
    let config;
    let target: string;
    let keep: number | null = null;
    try {
      const args = parseStateArgs(argv, "backup", { keep: true });
      // --database: refused below, whatever the destination.
      if (args.flags.has("database") || process.env.RUNCELL_DATABASE_URL) {
        config = resolveStateConfig(args.flags);
        if (config.databaseUrl) {
          console.error(postgresBackupAdvice(config.databaseUrl, config.vaultKeyFile));
          return 1;
        }
      }
      if (args.positionals.length !== 1) throw new UsageError("expected one destination: a .tar.gz file or a directory (see --help)");
      target = resolve(args.positionals[0]!);
      const k = args.extra.get("keep");
      if (k !== undefined) {
        keep = Number(k);
        if (!Number.isInteger(keep) || keep < 1) throw new UsageError("--keep: expected a whole number ≥ 1");
      }
      config = resolveStateConfig(args.flags);
    } catch (e) {
      return failUsage("backup", e);
    }
    if (config.databaseUrl) {
      // From the config file's `database`.
      console.error(postgresBackupAdvice(config.databaseUrl, config.vaultKeyFile));
      return 1;
    }
    const toDir = !isArchiveName(target) || (existsSync(target) && statSync(target).isDirectory());
    if (keep !== null && !toDir) return failUsage("backup", new UsageError("--keep applies to a destination directory, not to a file"));
    const source = join(config.dataDir, DB_FILE);
    if (!existsSync(source)) {
      console.error(`runcell backup: no database at ${source} (is --data-dir right?)`);
      return 1;
    }
    const dest = toDir ? join(target, `runcell-backup-${stamp()}.tar.gz`) : target;
    if (existsSync(dest)) {
      console.error(`runcell backup: ${dest} already exists; choose a new file name`);
      return 1;
    }
    try {
      const r = await createBackup(config.dataDir, dest, (line) => console.log(line), config.vaultKeyFile);
      if (toDir && keep !== null) {
        const removed = pruneBackups(target, DAILY_PATTERN, keep);
        if (removed.length) console.log(`removed ${removed.length} older backup(s) (--keep ${keep}): ${removed.map((p) => basename(p)).join(", ")}`);
      }
      console.log(`schema ${r.manifest.schema_version}, ${Object.keys(r.manifest.tables).length} tables, ${totalRows(r.manifest.tables)} rows; files: ${Object.keys(r.manifest.files).join(", ")}`);
      if (r.manifest.files[KEY_FILE]) console.log(`keep it safe: it holds ${KEY_FILE}, which decrypts the stored secrets`);
      console.log(`restore: runcell restore ${dest} --data-dir <empty data dir>`);
      return 0;
    } catch (e) {
      console.error(`runcell backup: ${(e as Error).message}`);
      return 1;
    }
  },
};

/** The URL for pg_dump/pg_restore's command line: without its password (~/.pgpass or PGPASSWORD give it). */
export function pgToolTarget(url: string): string {
  try {
    const u = new URL(url);
    u.password = "";
    return u.toString();
  } catch {
    return redactDatabaseUrl(url);
  }
}

/** `backup --database …`: why it refuses, and what to run instead (the URL without its password). */
function postgresBackupAdvice(url: string, vaultKeyFile: string | null | undefined): string {
  const target = pgToolTarget(url);
  const key = vaultKeyFile ? `${vaultKeyFile} (--vault-key-file)` : `the data dir's ${KEY_FILE}`;
  return [
    `runcell backup: the state is in PostgreSQL (${redactDatabaseUrl(url)}); runcell backup copies the embedded SQLite database only.`,
    `Back PostgreSQL up with pg_dump (the password from ~/.pgpass or PGPASSWORD), e.g.:`,
    `  pg_dump -Fc -f runcell-$(date +%F).dump '${target}'`,
    `and keep the vault key with the dump: ${key} decrypts the stored secrets, and the dump does not hold it.`,
    `Restore: pg_restore --clean --if-exists -d <url> runcell-….dump, with the same vault key.`,
  ].join("\n");
}
