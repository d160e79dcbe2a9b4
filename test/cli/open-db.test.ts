/**
 * `runcell admin …`, `token create` and `audit` open the database through src/cli/open-db.ts, as
 * real processes: a database that needs migrating is migrated only by the data dir's one owner,
 * after the same pre-migration backup as serve; while another process holds the lock (a server
 * running an older runcell) they refuse, naming its pid, and change nothing. A current database
 * needs no lock (they work next to a running server); a newer one is refused.
 *
 * The "older" database is made with this tree's migrations minus the newest one, the schema an
 * older runcell leaves; the lock's holder is this test process (acquireDataDirLock, a real flock).
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../src/db/data-dir.ts";
import { acquireDataDirLock, lockHolder } from "../../src/db/lock.ts";
import { BINARY_SCHEMA, migrate, schemaInfo } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { VERSION } from "../../src/version.ts";
import { runCli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/app.ts";

const OLD = MIGRATIONS.slice(0, -1);
const OLD_SCHEMA = OLD[OLD.length - 1]!.tag;
const dirs: string[] = [];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A data dir whose database an older runcell wrote (every migration but the newest). */
function olderDataDir(): string {
  const dir = tempDir("runcell-opendb-");
  dirs.push(dir);
  const db = new Database(join(dir, DB_FILE), { create: true });
  db.exec("PRAGMA journal_mode = WAL");
  migrate(db, OLD);
  db.close();
  return dir;
}

function schemaOf(dir: string) {
  const db = new Database(join(dir, DB_FILE), { readonly: true });
  try {
    return schemaInfo(db);
  } finally {
    db.close();
  }
}

const backups = (dir: string) => (existsSync(join(dir, "backups")) ? readdirSync(join(dir, "backups")) : []);
const users = (dir: string) => {
  const db = new Database(join(dir, DB_FILE), { readonly: true });
  try {
    return db.query<{ email: string }, []>("SELECT email FROM users").all().map((r) => r.email);
  } finally {
    db.close();
  }
};

describe("a database an older runcell wrote", () => {
  test("held by another process (a server running the older runcell): admin, token and audit refuse, naming its pid; nothing changes", async () => {
    expect(OLD.length).toBeGreaterThan(0);
    const dir = olderDataDir();
    expect(schemaOf(dir)).toMatchObject({ state: "older", schema: OLD_SCHEMA });
    const lock = acquireDataDirLock(dir);
    try {
      expect(lockHolder(dir)).toBe(process.pid);
      const created = await runCli(["admin", "create-user", "--data-dir", dir, "--email", "held@example.com"]);
      expect(created.code).toBe(1);
      expect(created.stderr).toContain("runcell admin create-user: the database has schema " + OLD_SCHEMA);
      expect(created.stderr).toContain(`would migrate it to ${BINARY_SCHEMA}`);
      expect(created.stderr).toContain(`in use by another runcell process (pid ${process.pid})`);
      expect(created.stderr).toContain("Nothing was changed.");
      expect(created.stdout).toBe("");

      const password = await runCli(["admin", "set-password", "--stdin", "--data-dir", dir], { stdin: "a long admin password\n" });
      expect(password.code).toBe(1);
      expect(password.stderr).toContain(`(pid ${process.pid})`);

      const token = await runCli(["token", "create", "--data-dir", dir, "--email", "held@example.com", "--name", "ci"]);
      expect(token.code).toBe(1);
      expect(token.stdout).toBe("");
      expect(token.stderr).toContain("runcell token create: the database has schema");

      const audit = await runCli(["audit", "--data-dir", dir]);
      expect(audit.code).toBe(1);
      expect(audit.stderr).toContain(`(pid ${process.pid})`);

      // Untouched: still the old schema, no backup, no account, the lock still ours.
      expect(schemaOf(dir)).toMatchObject({ state: "older", schema: OLD_SCHEMA });
      expect(backups(dir)).toEqual([]);
      expect(users(dir)).toEqual([]);
      expect(lockHolder(dir)).toBe(process.pid);
    } finally {
      lock.release();
    }
  });

  test("with the data dir free: backed up first (like serve), migrated under the lock, then the command runs", async () => {
    const dir = olderDataDir();
    const r = await runCli(["admin", "create-user", "--data-dir", dir, "--email", "free@example.com", "--role", "admin"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("created user");
    expect(r.stdout).toContain("free@example.com (role admin)");
    // The progress went to stderr (token create keeps stdout for the token alone).
    expect(r.stderr).toContain(`the database has schema ${OLD_SCHEMA}`);
    expect(r.stderr).toMatch(new RegExp(`pre-migration backup: .*backups/pre-migrate-${OLD_SCHEMA}-\\d{8}T\\d{9}Z\\.tar\\.gz`));
    expect(r.stderr).toContain(`applied 1 migration(s): ${BINARY_SCHEMA}`);
    const files = backups(dir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(new RegExp(`^pre-migrate-${OLD_SCHEMA}-.*\\.tar\\.gz$`));
    const info = schemaOf(dir);
    expect(info).toMatchObject({ state: "current", schema: BINARY_SCHEMA });
    expect(info.writer?.schema).toBe(BINARY_SCHEMA);
    expect(users(dir)).toEqual(["free@example.com"]);
    expect(lockHolder(dir)).toBeNull(); // released when done

    // The backup is a real one: restore accepts it (into a new data dir) with the old schema.
    const restored = tempDir("runcell-opendb-restored-");
    dirs.push(restored);
    rmSync(restored, { recursive: true });
    const rr = await runCli(["restore", join(dir, "backups", files[0]!), "--data-dir", restored]);
    expect(rr.code, rr.stderr + rr.stdout).toBe(0);
    expect(schemaOf(restored)).toMatchObject({ state: "older", schema: OLD_SCHEMA });
  });

  test("token create migrates with the progress on stderr only: stdout is the token alone", async () => {
    const dir = olderDataDir();
    // An account the older runcell made (its users table has no policy column yet).
    const db = new Database(join(dir, DB_FILE));
    db.run("INSERT INTO users (id, email, name, role, created_at, updated_at) VALUES ('usr_old', 'tok@example.com', 'tok', 'user', 1, 1)");
    db.close();
    const token = await runCli(["token", "create", "--data-dir", dir, "--email", "tok@example.com", "--name", "ci"]);
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout).toMatch(/^rc_\S+\n$/);
    expect(token.stderr).toContain("pre-migration backup: ");
    expect(token.stderr).toContain("created API token");
    expect(schemaOf(dir).state).toBe("current");
  });
});

describe("a current database", () => {
  test("works next to a running server: the lock held by another process does not matter, and no backup is made", async () => {
    const dir = olderDataDir();
    expect((await runCli(["migrate", "--data-dir", dir])).code).toBe(0);
    const before = backups(dir);
    const lock = acquireDataDirLock(dir);
    try {
      const r = await runCli(["admin", "create-user", "--data-dir", dir, "--email", "next@example.com"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
      const token = await runCli(["token", "create", "--data-dir", dir, "--email", "next@example.com", "--name", "laptop"]);
      expect(token.code, token.stderr).toBe(0);
      expect(token.stdout).toMatch(/^rc_\S+\n$/);
      expect(backups(dir)).toEqual(before);
      expect(lockHolder(dir)).toBe(process.pid);
    } finally {
      lock.release();
    }
  });

  test("a fresh data dir is created and migrated (no backup: there was nothing to keep)", async () => {
    const dir = join(tempDir("runcell-opendb-"), "fresh");
    dirs.push(dir);
    const r = await runCli(["admin", "create-user", "--data-dir", dir, "--email", "fresh@example.com"]);
    expect(r.code, r.stderr).toBe(0);
    expect(schemaOf(dir).state).toBe("current");
    expect(backups(dir)).toEqual([]);
  });
});

test("a database a newer runcell wrote is refused, untouched", async () => {
  const dir = olderDataDir();
  expect((await runCli(["migrate", "--data-dir", dir])).code).toBe(0);
  const db = new Database(join(dir, DB_FILE));
  db.run("INSERT INTO _migrations (tag, hash, applied_at) VALUES ('9999_from_the_future', 'x', 0)");
  db.close();
  const r = await runCli(["admin", "create-user", "--data-dir", dir, "--email", "future@example.com"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("this database was written by a newer runcell");
  expect(r.stderr).toContain("9999_from_the_future");
  expect(users(dir)).toEqual([]);
});

test("a database that cannot be read is named as such by serve, migrate and admin (not as a failed pre-migration backup), untouched", async () => {
  const dir = olderDataDir();
  expect((await runCli(["migrate", "--data-dir", dir])).code).toBe(0);
  // The schema's first page overwritten past the file header: SQLite opens the file, then cannot read it.
  const fd = openSync(join(dir, DB_FILE), "r+");
  writeSync(fd, Buffer.alloc(3996, 0xa5), 0, 3996, 100);
  closeSync(fd);
  const before = readFileSync(join(dir, DB_FILE));
  const backupsBefore = backups(dir);
  for (const args of [["migrate"], ["serve", "--http", "127.0.0.1:0"], ["admin", "create-user", "--email", "x@example.com"]]) {
    const r = await runCli([...args, "--data-dir", dir]);
    expect(r.code, `${args[0]}: ${r.stderr}`).toBe(1);
    expect(r.stderr).toMatch(`runcell ${args[0]}`);
    expect(r.stderr).toContain(`: cannot read the database ${join(dir, DB_FILE)}: database disk image is malformed`);
    expect(r.stderr).toContain("runcell restore");
    expect(r.stderr).not.toContain("pre-migration backup");
    expect(r.stderr).not.toContain("    at "); // a sentence, not a stack trace
  }
  expect(readFileSync(join(dir, DB_FILE)).equals(before)).toBe(true);
  expect(backups(dir)).toEqual(backupsBefore);
});

test("a newer schema written by a build of the same version: the refusal names the writer's commit, not the circular 'run this version'", async () => {
  const dir = olderDataDir();
  expect((await runCli(["migrate", "--data-dir", dir])).code).toBe(0);
  const db = new Database(join(dir, DB_FILE));
  db.run("INSERT INTO _migrations (tag, hash, applied_at) VALUES ('9999_same_version', 'x', 0)");
  const writer = (commit: string) => JSON.stringify({ version: VERSION, commit, schema: "9999_same_version", migrated_at: "2030-01-01T00:00:00Z" });
  db.run("UPDATE settings SET value = ? WHERE key = 'schema.writer'", [writer("abc1234")]);
  db.close();
  for (const args of [["migrate"], ["admin", "create-user", "--email", "x@example.com"]]) {
    const r = await runCli([...args, "--data-dir", dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`written by a newer runcell: runcell ${VERSION} (commit abc1234), schema "9999_same_version"`);
    expect(r.stderr).toContain(`knows schema up to "${BINARY_SCHEMA}"`);
    expect(r.stderr).toContain(`Run the build of commit abc1234 (runcell ${VERSION}) or a later one`);
    expect(r.stderr).not.toContain(`Run runcell ${VERSION} or newer`);
  }
  const doctor = await runCli(["doctor", "--data-dir", dir, "--json"]);
  const schema = (JSON.parse(doctor.stdout) as { check: string; message: string; fix: string }[]).find((c) => c.check === "schema")!;
  expect(schema.message).toContain(`written by runcell ${VERSION} (commit abc1234)`);
  expect(schema.fix).toContain("run the build of commit abc1234");
  // Its commit unknown (a build from source): still not "run runcell <this version>".
  const db2 = new Database(join(dir, DB_FILE));
  db2.run("UPDATE settings SET value = ? WHERE key = 'schema.writer'", [writer("dev")]);
  db2.close();
  const r = await runCli(["migrate", "--data-dir", dir]);
  expect(r.stderr).toContain(`Run the runcell build that wrote it (a later build than this one, though both are ${VERSION})`);
  expect(r.stderr).not.toContain(`Run runcell ${VERSION} or newer`);
});
