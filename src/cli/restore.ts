/**
 * `runcell restore <backup> [--data-dir DIR] [--force]`: puts a backup made by `runcell backup`
 * into a data dir, holding the data dir's lock, after checking everything that can be checked
 * before anything is in place: the manifest's format and schema (a backup from a newer schema is
 * refused, naming both versions), the sha256 and size of every file, `PRAGMA integrity_check`,
 * and the row count of every table against the manifest. The files are extracted into a staging
 * dir inside the data dir and renamed into place only when all of that passed.
 *
 * Also accepts a directory written by `runcell backup <dir>` of earlier versions (runcell.db and
 * secret.key, no manifest): then only the integrity and the schema are checked.
 */
import { Database } from "bun:sqlite";
import { chmodSync, copyFileSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileSetting, parseArgs } from "../config.ts";
import { DB_FILE, ownLikeDataDir } from "../db/data-dir.ts";
import { acquireDataDirLock, type DataDirLock, LOCK_FILE } from "../db/lock.ts";
import { BINARY_SCHEMA, newerSchemaWords, type SchemaWriter, schemaInfo } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { randomHex } from "../lib/crypto.ts";
import { KEY_FILE } from "../lib/sealer.ts";
import { REPLICA_ID_FILE } from "../replicas/registry.ts";
import { INSTANCE_SETTING } from "../workspaces/spec.ts";
import { readTarGz } from "../lib/tar.ts";
import { VERSION } from "../version.ts";
import { redactDatabaseUrl } from "../db/pg/client.ts";
import {
  BACKUP_FORMAT,
  BACKUP_FORMAT_VERSION,
  type BackupManifest,
  BACKUPS_DIR,
  CONFIG_FILES,
  MANIFEST_FILE,
  mb,
  pgToolTarget,
  rowCounts,
  stamp,
  tenths,
  totalRows,
} from "./backup.ts";
import { type Command, dataDirFrom, failUsage, UsageError } from "./command.ts";

/** The files a data dir's state is made of (what a restore writes, and what --force moves aside). */
const STATE_FILES = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, KEY_FILE, ...CONFIG_FILES];
/** Archive members a backup may hold. */
const MEMBERS = new Set<string>([MANIFEST_FILE, DB_FILE, KEY_FILE, ...CONFIG_FILES]);
/** Entries a data dir may hold and still count as empty. */
const IGNORED = new Set([LOCK_FILE, BACKUPS_DIR, "lost+found", REPLICA_ID_FILE]);

/** A refusal with the sentence to print; exit status 1. */
export class RestoreError extends Error {}

/** Whether a backup's migration list is newer than this binary's (a tag it does not know). */
function newerSchema(migrations: string[]): boolean {
  return migrations.some((tag, i) => MIGRATIONS[i]?.tag !== tag);
}

function newerMessage(schema: string | null, by: Pick<SchemaWriter, "version" | "commit"> | null): string {
  const w = newerSchemaWords(by);
  return (
    `the backup's database has schema "${schema}"${by ? ` (written by ${w.writtenBy})` : ""}, newer than this ${w.thisBinary} knows ` +
    `(schema "${BINARY_SCHEMA}"). Nothing was changed. Restore it with ${w.runInstead}.`
  );
}

/** Who wrote a backup's schema: the manifest's record of it, else the runcell that made the backup. */
const manifestWriter = (m: BackupManifest) => m.written_by ?? { version: m.runcell_version, commit: m.commit };

function checkManifest(m: unknown): BackupManifest {
  const x = m as Partial<BackupManifest> | null;
  if (!x || typeof x !== "object" || x.format !== BACKUP_FORMAT) throw new RestoreError(`${MANIFEST_FILE} is not a runcell backup manifest`);
  if (typeof x.format_version !== "number" || x.format_version > BACKUP_FORMAT_VERSION) {
    throw new RestoreError(`the backup's format (version ${x.format_version}) is newer than this runcell ${VERSION} reads (${BACKUP_FORMAT_VERSION}); restore it with runcell ${x.runcell_version ?? "of the version that made it"} or newer`);
  }
  if (!Array.isArray(x.migrations) || !x.files || typeof x.files !== "object" || !x.tables || typeof x.tables !== "object") {
    throw new RestoreError(`${MANIFEST_FILE} is incomplete (migrations, tables or files missing)`);
  }
  if (!x.files[DB_FILE]) throw new RestoreError(`${MANIFEST_FILE} lists no ${DB_FILE}`);
  for (const name of Object.keys(x.files)) if (!MEMBERS.has(name) || name === MANIFEST_FILE) throw new RestoreError(`${MANIFEST_FILE} lists an unexpected file "${name}"`);
  return x as BackupManifest;
}

/** Extracts a backup archive into `staging`, hashing every file; returns the manifest and the hashes. */
async function extractArchive(file: string, staging: string, say: (line: string) => void) {
  let manifest: BackupManifest | null = null;
  const found = new Map<string, { size: number; sha256: string }>();
  try {
    await readTarGz(
      file,
      async (entry) => {
        if (!MEMBERS.has(entry.name)) throw new RestoreError(`the archive holds an unexpected file "${entry.name}": not a runcell backup`);
        if (found.has(entry.name)) throw new RestoreError(`the archive holds "${entry.name}" twice`);
        if (entry.name === MANIFEST_FILE) {
          if (entry.size > 1 << 20) throw new RestoreError(`${MANIFEST_FILE} is too large to be a manifest`);
          const parts: Buffer[] = [];
          for await (const c of entry.body) parts.push(c);
          const text = Buffer.concat(parts).toString("utf8");
          found.set(MANIFEST_FILE, { size: entry.size, sha256: "" });
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            throw new RestoreError(`${MANIFEST_FILE} is not valid JSON: the archive is corrupted`);
          }
          manifest = checkManifest(parsed);
          say(
            `backup made ${manifest.created_at} by runcell ${manifest.runcell_version} from ${manifest.data_dir}: schema ${manifest.schema_version}, ` +
              `${Object.keys(manifest.tables).length} tables, ${totalRows(manifest.tables)} rows`,
          );
          // Refuse a newer schema before extracting anything big.
          if (newerSchema(manifest.migrations)) throw new RestoreError(newerMessage(manifest.schema_version, manifestWriter(manifest)));
          return;
        }
        if (!manifest) throw new RestoreError(`${MANIFEST_FILE} is not the archive's first file: not a runcell backup (or repacked in another order)`);
        const hash = new Bun.CryptoHasher("sha256");
        const out = createWriteStream(join(staging, entry.name), { mode: 0o600 });
        const tick = entry.name === DB_FILE ? tenths(say, `extracting ${DB_FILE}`, entry.size) : () => {};
        let done = 0;
        try {
          for await (const c of entry.body) {
            hash.update(c);
            done += c.length;
            if (!out.write(c)) await new Promise((r) => out.once("drain", r));
            tick(done);
          }
        } finally {
          await new Promise<void>((ok, fail) => out.end((e?: Error | null) => (e ? fail(e) : ok())));
        }
        found.set(entry.name, { size: done, sha256: hash.digest("hex") });
      },
    );
  } catch (e) {
    if (e instanceof RestoreError) throw e;
    throw new RestoreError(`cannot read ${file}: ${(e as Error).message}`);
  }
  if (!manifest) throw new RestoreError(`the archive holds no ${MANIFEST_FILE}: not a runcell backup`);
  const m: BackupManifest = manifest;
  for (const [name, want] of Object.entries(m.files)) {
    const got = found.get(name);
    if (!got) throw new RestoreError(`the archive lacks ${name}, which its manifest lists: the archive is incomplete`);
    if (got.size !== want.size || got.sha256 !== want.sha256) {
      throw new RestoreError(`checksum mismatch for ${name} (manifest sha256 ${want.sha256.slice(0, 12)}…, ${want.size} bytes; archive ${got.sha256.slice(0, 12)}…, ${got.size} bytes): the archive is corrupted`);
    }
  }
  for (const name of found.keys()) if (name !== MANIFEST_FILE && !m.files[name]) throw new RestoreError(`the archive holds ${name}, which its manifest does not list`);
  say(`checksums match the manifest: ${Object.keys(m.files).join(", ")}`);
  return m;
}

function copyLegacyDir(dir: string, staging: string, say: (line: string) => void) {
  if (!existsSync(join(dir, DB_FILE))) throw new RestoreError(`${dir} is a directory without ${DB_FILE}: not a runcell backup`);
  for (const name of [DB_FILE, KEY_FILE, ...CONFIG_FILES]) {
    if (existsSync(join(dir, name))) copyFileSync(join(dir, name), join(staging, name));
  }
  say(`${dir} is a backup directory of an earlier runcell (no manifest): checking integrity and schema only`);
}

/** The workspace instance id stored in a database (null: none, or not readable). */
function instanceIdIn(dbPath: string): string | null {
  if (!existsSync(dbPath)) return null;
  let db: Database | null = null;
  try {
    db = new Database(dbPath, { readonly: true });
    const row = db.query<{ value: string }, [string]>("SELECT value FROM settings WHERE key = ?").get(INSTANCE_SETTING);
    const id: unknown = row ? JSON.parse(row.value) : null;
    return typeof id === "string" ? id : null;
  } catch {
    return null;
  } finally {
    db?.close();
  }
}

/**
 * Which workspace instance id the restored database carries (its containers and volumes on the
 * Docker engine are labelled with it, and each server removes the unknown ones of its own id):
 * - `--keep-instance`: the backup's (this server replaces the original, which is gone);
 * - over a data dir that held a database (`--force`): that database's (the same server, rolled back);
 * - into an empty data dir: a new one, so a copy served beside the original never touches its
 *   workspaces.
 */
function chooseInstanceId(stagedDb: string, dataDir: string, keep: boolean, say: (line: string) => void) {
  const backup = instanceIdIn(stagedDb);
  if (keep) {
    say(`workspaces: keeping the backup's instance id${backup ? ` ${backup}` : ""} (--keep-instance): this server takes over the original's containers and volumes on the same Docker engine`);
    return;
  }
  const replaced = instanceIdIn(join(dataDir, DB_FILE));
  const id = replaced ?? randomHex(8);
  if (id === backup) return;
  const db = new Database(stagedDb);
  try {
    db.run("INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (key) DO UPDATE SET value = ?2, updated_at = ?3", [INSTANCE_SETTING, JSON.stringify(id), Date.now()]);
  } finally {
    db.close();
  }
  say(
    replaced
      ? `workspaces: keeping this data dir's instance id ${id} (its containers and volumes stay its own)`
      : `workspaces: a new instance id ${id}, so this copy never uses or removes the original server's containers and volumes` +
          (backup ? ` (instance ${backup}); to take them over once that server is gone for good, restore with --keep-instance` : ""),
  );
}

/** The data dir's entries that make it non-empty. */
function occupants(dataDir: string): string[] {
  return readdirSync(dataDir).filter((n) => !IGNORED.has(n));
}

export async function restore(backup: string, dataDir: string, opts: { force?: boolean; keepInstance?: boolean; say?: (line: string) => void } = {}): Promise<{ manifest: BackupManifest | null; tables: Record<string, number> }> {
  const say = opts.say ?? (() => {});
  if (!existsSync(backup)) throw new RestoreError(`${backup} does not exist`);
  const legacy = statSync(backup).isDirectory();
  // Staging dirs of a restore that was killed (this process holds the lock: nobody else restores).
  for (const n of readdirSync(dataDir)) if (n.startsWith(".restore-")) rmSync(join(dataDir, n), { recursive: true, force: true });
  const present = occupants(dataDir);
  if (present.length && !opts.force) {
    throw new RestoreError(
      `${dataDir} is not empty (${present.slice(0, 5).join(", ")}${present.length > 5 ? ", …" : ""}). Nothing was changed. ` +
        `Restore into an empty data dir, or pass --force to replace its database, key and config (the current ones are moved to ${dataDir}/replaced-<timestamp>/).`,
    );
  }
  say(`restoring ${backup}${legacy ? "" : ` (${mb(statSync(backup).size)})`} into ${dataDir}`);
  const staging = mkdtempSync(join(dataDir, ".restore-"));
  try {
    const manifest = legacy ? (copyLegacyDir(backup, staging, say), null) : await extractArchive(backup, staging, say);

    // The database itself: integrity, schema, rows.
    const dbPath = join(staging, DB_FILE);
    say(`checking the database (${mb(statSync(dbPath).size)}): PRAGMA integrity_check, schema, row counts`);
    const db = new Database(dbPath, { readonly: true });
    let tables: Record<string, number>;
    let info: ReturnType<typeof schemaInfo>;
    try {
      const integrity = db.query<{ integrity_check: string }, []>("PRAGMA integrity_check").all().map((r) => r.integrity_check);
      if (integrity.join() !== "ok") throw new RestoreError(`PRAGMA integrity_check failed on the backup's database: ${integrity.slice(0, 5).join("; ")}`);
      info = schemaInfo(db);
      tables = rowCounts(db);
    } finally {
      db.close();
    }
    if (info.state === "newer") throw new RestoreError(newerMessage(info.schema, info.writer ?? (manifest ? manifestWriter(manifest) : null)));
    if (manifest) {
      const names = new Set([...Object.keys(manifest.tables), ...Object.keys(tables)]);
      const diff = [...names].filter((n) => manifest.tables[n] !== tables[n]).map((n) => `${n}: manifest ${manifest.tables[n] ?? "absent"}, database ${tables[n] ?? "absent"}`);
      if (diff.length) throw new RestoreError(`row counts differ from the manifest (${diff.slice(0, 5).join("; ")})`);
      say(`integrity_check ok; row counts equal the manifest (${Object.keys(tables).length} tables, ${totalRows(tables)} rows)`);
    } else {
      say(`integrity_check ok (${Object.keys(tables).length} tables, ${totalRows(tables)} rows)`);
    }
    chooseInstanceId(dbPath, dataDir, opts.keepInstance === true, say);
    if (!existsSync(join(staging, KEY_FILE))) {
      say(
        `warning: the backup has no ${KEY_FILE} (it was made with --vault-key-file, or from a data dir without one): start serve with ` +
          `--vault-key-file <the key it was made with>, or copy that key to ${join(dataDir, KEY_FILE)} (mode 0600); without it the stored secrets cannot be decrypted and serve refuses to start`,
      );
    }

    // Into place.
    const moved: string[] = [];
    if (present.length) {
      const aside = join(dataDir, `replaced-${stamp()}`);
      for (const name of STATE_FILES) {
        if (!existsSync(join(dataDir, name))) continue;
        mkdirSync(aside, { recursive: true, mode: 0o700 });
        ownLikeDataDir(aside, dataDir);
        renameSync(join(dataDir, name), join(aside, name));
        moved.push(name);
      }
      if (moved.length) say(`--force: moved the data dir's ${moved.join(", ")} to ${aside}`);
    }
    const restored: string[] = [];
    for (const name of readdirSync(staging)) {
      chmodSync(join(staging, name), 0o600);
      ownLikeDataDir(join(staging, name), dataDir);
      renameSync(join(staging, name), join(dataDir, name));
      restored.push(name);
    }
    say(`restored into ${dataDir}: ${restored.join(", ")}`);
    if (info.state === "older") {
      say(`its schema ${info.schema} is older than this runcell's ${info.binarySchema}: the next \`runcell serve\` (or \`runcell migrate\`) migrates it, after a pre-migration backup into ${join(dataDir, BACKUPS_DIR)}`);
    }
    return { manifest, tables };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Where a server on the data dir would keep its state in PostgreSQL, and which setting says so. */
interface PostgresSetting {
  url: string;
  /** `RUNCELL_DATABASE_URL`, or the config file and its key (`/var/lib/runcell/runcell.toml: database`). */
  source: string;
  fromFile: boolean;
}

/**
 * The PostgreSQL database a server started on `dataDir` would use, as serve reads it (the
 * environment over the data dir's runcell.toml|json); null: its SQLite file. A config file that
 * cannot be read names nothing here (serve refuses it; --force moves it aside with the rest).
 */
function postgresSettingFor(dataDir: string, env: Record<string, string | undefined> = process.env): PostgresSetting | null {
  if (env.RUNCELL_DATABASE_URL) return { url: env.RUNCELL_DATABASE_URL, source: "RUNCELL_DATABASE_URL", fromFile: false };
  let setting;
  try {
    setting = fileSetting(dataDir, "database");
  } catch {
    return null;
  }
  if (!setting || setting.value === "" || setting.value === null) return null;
  return { url: String(setting.value), source: `${setting.path}: ${setting.key}`, fromFile: true };
}

/** `restore` onto a data dir whose server keeps its state in PostgreSQL: why it refuses, and what to run instead (the URL without its password). */
function postgresRestoreAdvice(pg: PostgresSetting): string {
  const where = pg.fromFile ? `${pg.source} = ${redactDatabaseUrl(pg.url)}` : `${pg.source}=${redactDatabaseUrl(pg.url)}`;
  const ignores = pg.fromFile ? "which a server on this data dir ignores" : "which a server with this environment ignores";
  return [
    `runcell restore: the state is in PostgreSQL (${where}); runcell restore puts back the embedded SQLite database only, ${ignores}. Nothing was changed.`,
    `Restore PostgreSQL from a pg_dump with pg_restore (the password from ~/.pgpass or PGPASSWORD), e.g.:`,
    `  pg_restore --clean --if-exists -d '${pgToolTarget(pg.url)}' runcell-….dump`,
    `with the vault key kept with the dump. To restore this backup's SQLite file into the data dir anyway (to copy it with runcell migrate --from-sqlite), add --sqlite.`,
  ].join("\n");
}

export const restoreCommand: Command = {
  name: "restore",
  summary: "Restore a backup archive into an empty (or --force'd) data dir, after checking it.",
  usage: "runcell restore <backup.tar.gz> [--data-dir DIR] [--force] [--keep-instance] [--sqlite]",
  details: `  --data-dir DIR  the data dir to restore into (default: $RUNCELL_DATA_DIR, else ./runcell_data); created 0700
  --force         restore into a data dir that is not empty: its runcell.db, secret.key and config
                  file are moved to <data dir>/replaced-<timestamp>/ first (nothing is deleted)
  --keep-instance keep the backup's workspace instance id: the restored server takes over the
                  original server's containers and volumes on the same Docker engine. Only when
                  that server is gone for good. Without it a restore into an empty data dir gets
                  a new instance id (a copy served beside the original never touches its
                  workspaces), and --force keeps the id of the database it replaces.
  --sqlite        restore even though RUNCELL_DATABASE_URL or the data dir's runcell.toml|json
                  names a PostgreSQL database (see below)

  Holds the data dir's lock (a running server must be stopped first). Checks, before anything is
  put in place: the manifest (a backup from a newer schema is refused), the sha256 of every file,
  PRAGMA integrity_check, and the row count of every table. A backup with an older schema is
  restored as is; the next serve migrates it. A directory made by \`runcell backup <dir>\` of
  earlier versions (runcell.db + secret.key) is accepted too (integrity and schema checked).
  With RUNCELL_DATABASE_URL set, or a \`database\` setting in the data dir's runcell.toml (or
  runcell.json), it refuses, as backup does, naming that setting: a server started there keeps its
  state in PostgreSQL and ignores the data dir's runcell.db; restore PostgreSQL with pg_restore.
  With --sqlite it restores the file anyway (to copy it with \`runcell migrate --from-sqlite\`, say).
  Exit status: 0 restored, 1 refused or failed (the data dir unchanged), 2 bad usage.`,
  examples: [
    "runcell restore /srv/backups/runcell-2026-11-23.tar.gz --data-dir /var/lib/runcell",
    "sudo systemctl stop runcell && runcell restore backup.tar.gz --data-dir /var/lib/runcell --force",
  ],
  async run(argv) {
    let backup: string;
    let dataDir: string;
    let force: boolean;
    let keepInstance: boolean;
    let sqlite: boolean;
    let ok = false;
    try {
      const args = parseArgs(argv, { "data-dir": true, force: false, "keep-instance": false, sqlite: false }, false);
      if (args.positionals.length !== 1) throw new UsageError("expected one backup file (see --help)");
      backup = resolve(args.positionals[0]!);
      dataDir = dataDirFrom(args.extra.get("data-dir"));
      force = args.extra.get("force") === true;
      keepInstance = args.extra.get("keep-instance") === true;
      sqlite = args.extra.get("sqlite") === true;
    } catch (e) {
      return failUsage("restore", e);
    }
    const postgres = sqlite ? null : postgresSettingFor(dataDir);
    if (postgres) {
      console.error(postgresRestoreAdvice(postgres));
      return 1;
    }
    if (!existsSync(backup)) {
      console.error(`runcell restore: ${backup} does not exist`);
      return 1;
    }
    const created = !existsSync(dataDir);
    let lock: DataDirLock;
    try {
      lock = acquireDataDirLock(dataDir);
    } catch (e) {
      console.error(`runcell restore: ${(e as Error).message}`);
      return 1;
    }
    try {
      await restore(backup, dataDir, { force, keepInstance, say: (line) => console.log(line) });
      console.log(`done: start runcell with --data-dir ${dataDir}`);
      ok = true;
      return 0;
    } catch (e) {
      console.error(`runcell restore: ${(e as Error).message}`);
      return 1;
    } finally {
      lock.release();
      // A data dir this command created and could not fill is removed again: nothing changed.
      if (created && !ok) rmSync(dataDir, { recursive: true, force: true });
    }
  },
};
