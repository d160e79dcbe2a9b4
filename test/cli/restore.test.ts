/**
 * `runcell restore`: real archives made by `runcell backup` (and altered with the system's tar to
 * play the corruptions), restored by the CLI in a subprocess. Every refusal exits 1 and leaves the
 * data dir as it was: not empty without --force, a checksum mismatch, a damaged gzip stream, a
 * truncated file, row counts that differ from the manifest, a failed integrity check, a newer
 * schema (naming both versions), a foreign archive, RUNCELL_DATABASE_URL set or the target data
 * dir's runcell.toml|json naming a database (the state in PostgreSQL, which would ignore the file)
 * without --sqlite.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type BackupManifest, createBackup } from "../../src/cli/backup.ts";
import { openDatabase } from "../../src/db/client.ts";
import { BINARY_SCHEMA, migrate, SCHEMA_WRITER_KEY } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { VERSION } from "../../src/version.ts";
import { removeInstanceWorkspaces, startTestApp, type TestApp, tempDir } from "../helpers/app.ts";
import { waitTask } from "../helpers/agent.ts";
import { docker } from "../workspaces/helpers.ts";
import { runCli } from "../helpers/cli.ts";
import { api, createUser } from "../helpers/users.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dir(prefix = "runcell-restore-") {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** A data dir with an account and a secret (through the real app), and its backup archive. */
async function source(): Promise<{ dataDir: string; archive: string; email: string }> {
  const t = await startTestApp({ keepDataDir: true });
  const user = await createUser(t);
  await t.app.services.secrets.put(user.id, "KEEP", "restored-secret");
  await t.stop();
  dirs.push(t.dataDir);
  const archive = join(dir(), "good.tar.gz");
  await createBackup(t.dataDir, archive);
  return { dataDir: t.dataDir, archive, email: user.email };
}

/** Unpacks with the system tar, lets `edit` change the files, packs them again in the same order. */
function repack(archive: string, edit: (dir: string) => void, order = ["manifest.json", "runcell.db", "secret.key"]): string {
  const work = dir("runcell-repack-");
  expect(Bun.spawnSync(["tar", "-xzf", archive, "-C", work]).exitCode).toBe(0);
  edit(work);
  const out = join(dir(), "repacked.tar.gz");
  const r = Bun.spawnSync(["tar", "-czf", out, "-C", work, ...order.filter((f) => existsSync(join(work, f)))]);
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  return out;
}

/** The workspace instance id a data dir's database holds. */
function instanceIdOf(dataDir: string): string | null {
  const db = new Database(join(dataDir, "runcell.db"), { readonly: true });
  try {
    const row = db.query<{ value: string }, []>("SELECT value FROM settings WHERE key = 'workspaces.instance_id'").get();
    return row ? JSON.parse(row.value) : null;
  } finally {
    db.close();
  }
}

const manifestIn = (d: string): BackupManifest => JSON.parse(readFileSync(join(d, "manifest.json"), "utf8"));
const writeManifest = (d: string, m: BackupManifest) => writeFileSync(join(d, "manifest.json"), JSON.stringify(m, null, 2));
const sha = (p: string) => new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex");

/** Restores into a fresh (nonexistent) data dir and expects a refusal that leaves nothing. */
async function refused(archive: string, message: RegExp | string) {
  const target = join(dir(), "target");
  const r = await runCli(["restore", archive, "--data-dir", target]);
  expect(r.code, r.stdout + r.stderr).toBe(1);
  if (typeof message === "string") expect(r.stderr).toContain(message);
  else expect(r.stderr).toMatch(message);
  expect(existsSync(target)).toBe(false); // created for the restore, removed again
  return r;
}

describe("runcell restore", () => {
  test("into an empty data dir: checked, in place with mode 0600, the secret decrypts", async () => {
    const { archive, email } = await source();
    const target = dir(); // exists, empty
    const r = await runCli(["restore", archive, "--data-dir", target]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`restoring ${archive}`);
    expect(r.stdout).toMatch(/backup made .* by runcell \S+ from .*: schema \d{4}_\w+, \d+ tables, \d+ rows/);
    expect(r.stdout).toContain("checksums match the manifest: runcell.db, secret.key");
    expect(r.stdout).toContain("integrity_check ok; row counts equal the manifest");
    expect(readdirSync(target).sort()).toEqual(["runcell.db", "runcell.lock", "secret.key"]);
    for (const f of ["runcell.db", "secret.key"]) expect(statSync(join(target, f)).mode & 0o777).toBe(0o600);
    const t = await startTestApp({ dataDir: target });
    try {
      const user = (await t.app.services.users.byEmail(email))!;
      expect(await t.app.services.secrets.valuesFor(user.id)).toEqual(["restored-secret"]);
    } finally {
      await t.stop();
    }
  }, 60_000);

  test("a data dir that is not empty is refused without --force, untouched; --force moves its files aside", async () => {
    const { archive, email } = await source();
    const other = await startTestApp({ keepDataDir: true });
    await createUser(other, { email: "someone-else@example.com" });
    await other.stop();
    dirs.push(other.dataDir);
    const before = Object.fromEntries(readdirSync(other.dataDir).filter((f) => f !== "runcell.lock").map((f) => [f, sha(join(other.dataDir, f))]));

    const r = await runCli(["restore", archive, "--data-dir", other.dataDir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${other.dataDir} is not empty (`);
    expect(r.stderr).toContain("--force");
    const after = Object.fromEntries(readdirSync(other.dataDir).filter((f) => f !== "runcell.lock").map((f) => [f, sha(join(other.dataDir, f))]));
    expect(after).toEqual(before);

    const forced = await runCli(["restore", archive, "--data-dir", other.dataDir, "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    const aside = readdirSync(other.dataDir).find((f) => f.startsWith("replaced-"))!;
    expect(aside).toMatch(/^replaced-\d{8}T\d{9}Z$/);
    expect(forced.stdout).toMatch(new RegExp(`--force: moved the data dir's runcell\\.db, (runcell\\.db-wal, runcell\\.db-shm, )?secret\\.key to ${join(other.dataDir, aside)}`));
    expect(sha(join(other.dataDir, aside, "runcell.db"))).toBe(before["runcell.db"]!);
    const db = new Database(join(other.dataDir, "runcell.db"), { readonly: true });
    expect(db.query<{ email: string }, []>("SELECT email FROM users").all().map((u) => u.email)).toEqual([email]);
    db.close();
  }, 60_000);

  test.skipIf(process.getuid?.() !== 0)("run as root into a data dir the service user owns: what it puts there is that user's", async () => {
    const { archive } = await source();
    const NOBODY = 65534;
    const target = dir();
    chownSync(target, NOBODY, NOBODY);
    const r = await runCli(["restore", archive, "--data-dir", target]);
    expect(r.code, r.stderr).toBe(0);
    const owners = (d: string) => Object.fromEntries(readdirSync(d).map((f) => [f, statSync(join(d, f)).uid]));
    expect(owners(target)).toEqual({ "runcell.db": NOBODY, "runcell.lock": NOBODY, "secret.key": NOBODY });
    // The check doctor makes: no file in the data dir belongs to another user than the data dir.
    const doctor = await runCli(["doctor", "--data-dir", target, "--json"]);
    expect(JSON.parse(doctor.stdout).find((c: { check: string }) => c.check === "data dir")).toMatchObject({ status: "OK" });

    // --force: the replaced files' folder too (the files moved into it keep their owner).
    const forced = await runCli(["restore", archive, "--data-dir", target, "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    const aside = readdirSync(target).find((f) => f.startsWith("replaced-"))!;
    expect(owners(target)).toEqual({ "runcell.db": NOBODY, "runcell.lock": NOBODY, "secret.key": NOBODY, [aside]: NOBODY });
    expect(Object.values(owners(join(target, aside)))).toEqual([NOBODY, NOBODY]);
  }, 60_000);

  test("the workspace instance id: new in an empty data dir, the backup's with --keep-instance, the replaced database's with --force", async () => {
    const { archive, dataDir } = await source();
    const original = instanceIdOf(dataDir);
    expect(original).toMatch(/^[0-9a-f]{16}$/);

    const copy = dir();
    const r = await runCli(["restore", archive, "--data-dir", copy]);
    expect(r.code, r.stderr).toBe(0);
    expect(instanceIdOf(copy)).toMatch(/^[0-9a-f]{16}$/);
    expect(instanceIdOf(copy)).not.toBe(original);
    expect(r.stdout).toContain(`workspaces: a new instance id ${instanceIdOf(copy)}`);
    expect(r.stdout).toContain("--keep-instance");
    expect(readdirSync(copy).sort()).toEqual(["runcell.db", "runcell.lock", "secret.key"]);

    const successor = dir();
    const kept = await runCli(["restore", archive, "--data-dir", successor, "--keep-instance"]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(instanceIdOf(successor)).toBe(original);

    const other = await startTestApp({ keepDataDir: true });
    await other.stop();
    dirs.push(other.dataDir);
    const own = instanceIdOf(other.dataDir);
    const forced = await runCli(["restore", archive, "--data-dir", other.dataDir, "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(instanceIdOf(other.dataDir)).toBe(own);
    expect(forced.stdout).toContain(`keeping this data dir's instance id ${own}`);
  }, 60_000);

  test("a restored copy served beside the live original on the same engine never uses or removes the original's workspaces", async () => {
    const live = await startTestApp({ keepDataDir: true });
    dirs.push(live.dataDir);
    const liveInstance = live.app.services.workspaces.instanceId;
    let copy: TestApp | null = null;
    try {
      const user = await createUser(live);
      const profile = await api(live, "POST", "/v1/profiles", user.bearer, { name: "live", model: { provider: "demo", name: "demo" }, image: live.config.workspaceImage, network: "none" });
      const inBackup = await api(live, "POST", "/v1/sessions", user.bearer, { profile_id: profile.body.id });
      expect(inBackup.status, JSON.stringify(inBackup.body)).toBe(201);
      const archive = join(dir(), "live.tar.gz");
      await createBackup(live.dataDir, archive);
      const afterBackup = await api(live, "POST", "/v1/sessions", user.bearer, { profile_id: profile.body.id });
      expect(afterBackup.status).toBe(201);
      const running = () => docker.listContainers({ filters: JSON.stringify({ label: [`runcell.instance=${liveInstance}`], status: ["running"] }) });
      expect((await running()).length).toBe(2);

      const target = dir();
      expect((await runCli(["restore", archive, "--data-dir", target])).code).toBe(0);
      copy = await startTestApp({ dataDir: target }); // its start reconciles with the engine
      expect(copy.app.services.workspaces.instanceId).not.toBe(liveInstance);
      // The session copied in the backup: its turn does not take the live server's box over.
      const turn = await api(copy, "POST", "/v1/tasks", user.bearer, { session_id: inBackup.body.id, prompt: "hi" });
      const task = await waitTask(copy, user, turn.body.task_id);
      expect(task.status).toBe("failed");
      expect(task.error).toMatchObject({ code: "CONTAINER_FAILED", message: expect.stringContaining(`another runcell server on this Docker engine (instance ${liveInstance})`) });
      expect((await api(copy, "DELETE", `/v1/sessions/${inBackup.body.id}`, user.bearer)).status).toBe(204);
      await copy.app.services.workspaces.reconcile();
      expect((await running()).length).toBe(2);
      // A new session of the copy is its own.
      const own = await api(copy, "POST", "/v1/sessions", user.bearer, { profile_id: profile.body.id });
      expect(own.status, JSON.stringify(own.body)).toBe(201);
      expect((await running()).length).toBe(2);
      expect((await api(live, "POST", "/v1/tasks", user.bearer, { session_id: inBackup.body.id, prompt: "still mine" })).status).toBe(202);
    } finally {
      await copy?.stop();
      await live.stop();
      removeInstanceWorkspaces(liveInstance);
    }
  }, 90_000);

  test("a file altered after the backup: checksum mismatch", async () => {
    const { archive } = await source();
    const bad = repack(archive, (d) => {
      const db = new Database(join(d, "runcell.db"));
      db.exec("UPDATE users SET name = 'tampered'");
      db.close();
    });
    await refused(bad, /checksum mismatch for runcell\.db \(manifest sha256 [0-9a-f]{12}…, \d+ bytes; archive [0-9a-f]{12}…, \d+ bytes\): the archive is corrupted/);
    const badKey = repack(archive, (d) => writeFileSync(join(d, "secret.key"), "AAAA\n"));
    await refused(badKey, "checksum mismatch for secret.key");
    const missing = repack(archive, (d) => rmSync(join(d, "secret.key")));
    await refused(missing, "the archive lacks secret.key, which its manifest lists");
  }, 60_000);

  test("a damaged or truncated archive, and foreign archives", async () => {
    const { archive } = await source();
    const flipped = join(dir(), "flipped.tar.gz");
    const bytes = readFileSync(archive);
    for (let i = 0; i < 64; i++) bytes[Math.floor(bytes.length / 2) + i]! ^= 0xff;
    writeFileSync(flipped, bytes);
    await refused(flipped, /corrupted/);

    const truncated = join(dir(), "truncated.tar.gz");
    copyFileSync(archive, truncated);
    truncateSync(truncated, Math.floor(statSync(archive).size / 2));
    await refused(truncated, "the archive is corrupted or truncated");

    const notGzip = join(dir(), "plain.tar.gz");
    writeFileSync(notGzip, "this is not an archive at all");
    await refused(notGzip, /cannot read .*plain\.tar\.gz: .*(corrupted|gzip)/);

    const foreign = dir("runcell-foreign-");
    writeFileSync(join(foreign, "README"), "hello");
    const foreignArchive = join(dir(), "foreign.tar.gz");
    Bun.spawnSync(["tar", "-czf", foreignArchive, "-C", foreign, "README"]);
    await refused(foreignArchive, 'unexpected file "README": not a runcell backup');

    const noManifest = repack(archive, () => {}, ["runcell.db", "secret.key"]);
    await refused(noManifest, "manifest.json is not the archive's first file");
  }, 60_000);

  test("row counts that differ from the manifest, and a database that fails PRAGMA integrity_check", async () => {
    const { archive } = await source();
    const lying = repack(archive, (d) => {
      const m = manifestIn(d);
      m.tables.users = 99;
      writeManifest(d, m);
    });
    await refused(lying, /row counts differ from the manifest \(users: manifest 99, database 1\)/);

    // One byte of the users_email_unique index changed on disk: the index no longer matches the table.
    const broken = repack(archive, (d) => {
      const p = join(d, "runcell.db");
      const db = new Database(p, { readonly: true });
      const { rootpage } = db.query<{ rootpage: number }, []>("SELECT rootpage FROM sqlite_master WHERE name = 'users_email_unique'").get()!;
      const { page_size } = db.query<{ page_size: number }, []>("PRAGMA page_size").get()!;
      const email = db.query<{ email: string }, []>("SELECT email FROM users").get()!.email;
      db.close();
      const bytes = readFileSync(p);
      const page = bytes.subarray((rootpage - 1) * page_size, rootpage * page_size);
      const at = page.indexOf(Buffer.from(email));
      expect(at).toBeGreaterThan(0);
      page[at] = page[at]! === 0x7a ? 0x79 : page[at]! + 1;
      writeFileSync(p, bytes);
      const m = manifestIn(d);
      m.files["runcell.db"] = { size: statSync(p).size, sha256: sha(p) };
      writeManifest(d, m);
    });
    await refused(broken, /PRAGMA integrity_check failed on the backup's database: .*users_email_unique/);
  }, 60_000);

  test("a backup from a newer schema is refused before extraction, naming both versions", async () => {
    const d = dir();
    const h = openDatabase(join(d, "runcell.db"));
    migrate(h.sqlite, [...MIGRATIONS, { tag: "9999_future", sql: "CREATE TABLE future (x INTEGER);" }]);
    h.sqlite.query("UPDATE settings SET value = ? WHERE key = ?").run(JSON.stringify({ version: "9.9.9", commit: "abc", schema: "9999_future", migrated_at: new Date().toISOString() }), SCHEMA_WRITER_KEY);
    h.close();
    const archive = join(dir(), "future.tar.gz");
    const made = await createBackup(d, archive);
    expect(made.manifest.schema_version).toBe("9999_future");
    expect(made.manifest.written_by?.version).toBe("9.9.9");
    const r = await refused(archive, `the backup's database has schema "9999_future" (written by runcell 9.9.9 (commit abc)), newer than this runcell ${VERSION} knows (schema "${BINARY_SCHEMA}")`);
    expect(r.stderr).toContain("Restore it with runcell 9.9.9 or newer");
    expect(r.stdout).not.toContain("extracting");

    // The manifest can lie; the database inside is checked too.
    const hidden = repack(archive, (x) => {
      const m = manifestIn(x);
      m.migrations = MIGRATIONS.map((mm) => mm.tag);
      m.schema_version = BINARY_SCHEMA;
      writeManifest(x, m);
    });
    await refused(hidden, 'the backup\'s database has schema "9999_future" (written by runcell 9.9.9 (commit abc))');

    const newerFormat = repack(archive, (x) => {
      const m = manifestIn(x);
      m.format_version = 2;
      writeManifest(x, m);
    });
    await refused(newerFormat, "the backup's format (version 2) is newer than this runcell");
  }, 60_000);

  test("an older schema is restored as is, then `version --check-db` says older (exit 3) and serve migrates it", async () => {
    const d = dir();
    const h = openDatabase(join(d, "runcell.db"));
    migrate(h.sqlite, MIGRATIONS.slice(0, 2));
    h.close();
    const archive = join(dir(), "older.tar.gz");
    await createBackup(d, archive);
    const target = join(dir(), "t");
    const r = await runCli(["restore", archive, "--data-dir", target]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`its schema 0001_playbooks is older than this runcell's ${BINARY_SCHEMA}: the next \`runcell serve\` (or \`runcell migrate\`) migrates it`);
    expect(r.stdout).toContain("warning: the backup has no secret.key");
    const check = await runCli(["version", "--check-db", "--data-dir", target]);
    expect(check.code).toBe(3);
    expect(check.stdout).toContain("database older:");
    const m = await runCli(["migrate", "--data-dir", target]);
    expect(m.code, m.stderr).toBe(0);
    expect(m.stdout).toMatch(/pre-migration backup: .*\/backups\/pre-migrate-0001_playbooks-\d{8}T\d{9}Z\.tar\.gz/);
    expect(m.stdout).toContain(`applied ${MIGRATIONS.length - 2} migration(s): ${MIGRATIONS.slice(2).map((x) => x.tag).join(", ")}`);
    expect((await runCli(["version", "--check-db", "--data-dir", target])).code).toBe(0);
  }, 60_000);

  test("a backup directory of earlier versions (runcell.db + secret.key) restores, with integrity and schema checked", async () => {
    const { dataDir, email } = await source();
    const legacy = dir("runcell-legacy-");
    const src = new Database(join(dataDir, "runcell.db"), { readonly: true });
    src.run("VACUUM INTO ?", [join(legacy, "runcell.db")]);
    src.close();
    copyFileSync(join(dataDir, "secret.key"), join(legacy, "secret.key"));
    const target = join(dir(), "from-legacy");
    const r = await runCli(["restore", legacy, "--data-dir", target]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("is a backup directory of an earlier runcell (no manifest): checking integrity and schema only");
    expect(r.stdout).toMatch(/integrity_check ok \(\d+ tables, \d+ rows\)/);
    const db = new Database(join(target, "runcell.db"), { readonly: true });
    expect(db.query<{ email: string }, []>("SELECT email FROM users").get()!.email).toBe(email);
    db.close();
    expect(readFileSync(join(target, "secret.key"), "utf8")).toBe(readFileSync(join(dataDir, "secret.key"), "utf8"));
    const empty = dir("runcell-legacy-empty-");
    mkdirSync(join(empty, "sub"));
    await refused(empty, "is a directory without runcell.db: not a runcell backup");
  }, 60_000);

  test("RUNCELL_DATABASE_URL set: refused (1) with pg_restore advice, password never printed, nothing written; --sqlite restores anyway", async () => {
    const { archive } = await source();
    const target = join(dir(), "t");
    const env = { RUNCELL_DATABASE_URL: "postgres://runcell:pw-never-shown@db.internal:5432/runcell" };
    const r = await runCli(["restore", archive, "--data-dir", target], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toStartWith("runcell restore: the state is in PostgreSQL (RUNCELL_DATABASE_URL=postgres://runcell:***@db.internal:5432/runcell); ");
    expect(r.stderr).toContain("pg_restore --clean --if-exists -d 'postgres://runcell@db.internal:5432/runcell'");
    expect(r.stderr).toContain("--sqlite");
    expect(r.stderr).not.toContain("pw-never-shown");
    expect(existsSync(target)).toBe(false);
    const anyway = await runCli(["restore", archive, "--data-dir", target, "--sqlite"], { env });
    expect(anyway.code, anyway.stderr).toBe(0);
    expect(existsSync(join(target, "runcell.db"))).toBe(true);
    expect(anyway.stdout).toContain(`done: start runcell with --data-dir ${target}`);
  }, 60_000);

  test("the data dir's runcell.toml (or .json) names PostgreSQL: refused (1) naming that file, even with --force; --sqlite restores anyway", async () => {
    const { archive } = await source();
    const url = "postgres://runcell:pw-never-shown@db.internal:5432/runcell";
    for (const [file, text] of [
      ["runcell.toml", `database = "${url}"\nhttp = "127.0.0.1:7420"\n`],
      ["runcell.json", JSON.stringify({ database: url })],
    ] as const) {
      const target = dir();
      writeFileSync(join(target, file), text);
      for (const force of [[], ["--force"]]) {
        const r = await runCli(["restore", archive, "--data-dir", target, ...force]);
        expect(r.code, r.stdout + r.stderr).toBe(1);
        expect(r.stdout).toBe("");
        expect(r.stderr).toStartWith(`runcell restore: the state is in PostgreSQL (${join(target, file)}: database = postgres://runcell:***@db.internal:5432/runcell); `);
        expect(r.stderr).toContain("which a server on this data dir ignores");
        expect(r.stderr).toContain("pg_restore --clean --if-exists -d 'postgres://runcell@db.internal:5432/runcell'");
        expect(r.stderr).toContain("--sqlite");
        expect(r.stderr).not.toContain("pw-never-shown");
        expect(readdirSync(target)).toEqual([file]);
      }
      // The environment's setting is what serve would use: named first.
      const env = await runCli(["restore", archive, "--data-dir", target, "--force"], { env: { RUNCELL_DATABASE_URL: url } });
      expect(env.code).toBe(1);
      expect(env.stderr).toContain("(RUNCELL_DATABASE_URL=postgres://runcell:***@");
      const anyway = await runCli(["restore", archive, "--data-dir", target, "--force", "--sqlite"]);
      expect(anyway.code, anyway.stderr).toBe(0);
      expect(existsSync(join(target, "runcell.db"))).toBe(true);
    }
    // An empty `database` setting is no database (as serve reads it): SQLite, restored.
    const sqliteTarget = dir();
    writeFileSync(join(sqliteTarget, "runcell.toml"), `database = ""\n`);
    const plain = await runCli(["restore", archive, "--data-dir", sqliteTarget, "--force"]);
    expect(plain.code, plain.stderr).toBe(0);
  }, 60_000);

  test("usage (2) and a missing backup (1)", async () => {
    expect((await runCli(["restore"])).code).toBe(2);
    expect((await runCli(["restore", "a.tar.gz", "b.tar.gz"])).code).toBe(2);
    expect((await runCli(["restore", "a.tar.gz", "--http", "127.0.0.1:1"])).code).toBe(2);
    const target = join(dir(), "t");
    const r = await runCli(["restore", join(dir(), "missing.tar.gz"), "--data-dir", target]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("does not exist");
    expect(existsSync(target)).toBe(false);
    // RUNCELL_DATA_DIR is the default target.
    const { archive } = await source();
    const viaEnv = join(dir(), "env-target");
    const e = await runCli(["restore", archive], { env: { RUNCELL_DATA_DIR: viaEnv } });
    expect(e.code, e.stderr).toBe(0);
    expect(existsSync(join(viaEnv, "runcell.db"))).toBe(true);
  }, 60_000);
});
