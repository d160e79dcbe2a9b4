/**
 * The operator's commands with --database postgres://… (real subprocesses against the PostgreSQL
 * pass's server, each test on a fresh database): `migrate` creates the schema, then says it is up
 * to date, `--status` lists it; `doctor` reads PostgreSQL (version, schema against PG_MIGRATIONS,
 * the admin password and the vault's secrets stored there) and fails, naming the host but never the
 * password, when it cannot reach it; `admin create-user` and `token create` write to it; `backup`
 * refuses and says how to use pg_dump instead; with an older single-server build still serving the
 * database (its advisory lock held), serve and the migrating commands refuse before changing anything.
 */
import { SQL } from "bun";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../../src/admin/doctor.ts";
import { PG_MIGRATIONS } from "../../src/db/pg/migrations.ts";
import { KEY_FILE, Sealer } from "../../src/lib/sealer.ts";
import { aadFor } from "../../src/vault/secrets.ts";
import { VERSION } from "../../src/version.ts";
import { runCli } from "../helpers/cli.ts";
import { spawnServer } from "../helpers/server-process.ts";
import { createDatabase, dropDatabase, PG_SERVER } from "../helpers/pg.ts";

/** Trust authentication ignores it; it must never show in any output. */
const PASSWORD = "pw-never-printed-7f3a";
const ALL_TAGS = PG_MIGRATIONS.map((m) => m.tag).join(", ");
const LATEST = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.tag;

const databases: string[] = [];
const dirs: string[] = [];

/** A new, empty database (no schema): its URL, with PASSWORD in it. */
async function freshDatabase(): Promise<{ url: string; sql: SQL }> {
  const u = new URL(await createDatabase());
  databases.push(u.toString());
  u.password = PASSWORD;
  return { url: u.toString(), sql: new SQL(u.toString(), { max: 1 }) };
}

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "runcell-pg-cli-"));
  dirs.push(d);
  return d;
}

async function doctor(url: string, dir: string, extra: string[] = []): Promise<{ code: number; results: Map<string, CheckResult>; text: string }> {
  const r = await runCli(["doctor", "--json", "--database", url, "--data-dir", dir, "--docker-host", "unix:///nonexistent/docker.sock", ...extra]);
  const text = r.stdout + r.stderr;
  expect(text).not.toContain(PASSWORD);
  const results = new Map((JSON.parse(r.stdout) as CheckResult[]).map((c) => [c.check, c]));
  return { code: r.code, results, text };
}

describe.skipIf(!PG_SERVER)("the CLI with --database postgres://…", () => {
  const open: SQL[] = [];
  afterAll(async () => {
    for (const s of open) await s.close().catch(() => {});
    for (const url of databases) await dropDatabase(url);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("migrate creates the schema, then says it is up to date; --status lists applied and pending", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    const before = await runCli(["migrate", "--status", "--database", url, "--data-dir", dir]);
    expect(before.code, before.stderr).toBe(0);
    expect(before.stdout).toContain("applied: none");
    expect(before.stdout).toContain(`pending: ${ALL_TAGS}`);

    const first = await runCli(["migrate", "--database", url, "--data-dir", dir]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(`applied ${PG_MIGRATIONS.length} migration(s)`);
    expect(first.stdout).toContain(LATEST);
    const tables = await sql.unsafe("SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('users', 'settings', 'secrets')");
    expect(Number(tables[0].n)).toBe(3);

    const again = await runCli(["migrate", "--database", url, "--data-dir", dir]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("is up to date");

    const status = await runCli(["migrate", "--status", "--database", url, "--data-dir", dir]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`applied: ${ALL_TAGS}`);
    expect(status.stdout).toContain("pending: none");
    for (const r of [before, first, again, status]) expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  });

  test("doctor reads PostgreSQL: database and schema OK, the admin password and the vault's secrets stored there; never migrates", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();

    // An empty database: reached, no schema yet (doctor does not create it).
    const empty = await doctor(url, dir);
    expect(empty.results.get("database")).toMatchObject({ status: "OK" });
    expect(empty.results.get("database")!.message).toMatch(/^PostgreSQL \d+/);
    expect(empty.results.get("database")!.message).toContain("127.0.0.1");
    expect(empty.results.get("schema")).toMatchObject({ status: "WARN" });
    expect(empty.results.get("schema")!.message).toContain("no schema yet");
    // The fix can be pasted: the URL's password is not printed, so it names where the URL is.
    expect(empty.results.get("schema")!.fix).toEndWith("runcell migrate --database <the URL you gave --database>");
    const fromEnv = await runCli(["doctor", "--json", "--data-dir", dir, "--docker-host", "unix:///nonexistent/docker.sock"], { env: { RUNCELL_DATABASE_URL: url } });
    const envSchema = (JSON.parse(fromEnv.stdout) as CheckResult[]).find((c) => c.check === "schema")!;
    expect(envSchema.fix).toEndWith('runcell migrate --database "$RUNCELL_DATABASE_URL"');
    expect(fromEnv.stdout + fromEnv.stderr).not.toContain(PASSWORD);
    expect(empty.results.get("admin password")).toMatchObject({ status: "FAIL" });
    const none = await sql.unsafe("SELECT to_regclass('public._migrations') IS NOT NULL AS ok");
    expect(none[0].ok).toBe(false);

    // Migrated, with an admin password and a user set through the CLI.
    expect((await runCli(["migrate", "--database", url, "--data-dir", dir])).code).toBe(0);
    const pw = await runCli(["admin", "set-password", "--stdin", "--database", url, "--data-dir", dir], { stdin: "a long admin passphrase\n" });
    expect(pw.code, pw.stderr).toBe(0);
    // It names where the hash went: the database, password masked — not the data dir, which holds no copy.
    expect(pw.stdout).toContain(`argon2id hash stored in ${url.replace(PASSWORD, "***")}`);
    expect(pw.stdout).not.toContain(dir);
    expect(pw.stdout).not.toContain(PASSWORD);
    const good = await doctor(url, dir);
    expect(good.results.get("database")).toMatchObject({ status: "OK" });
    expect(good.results.get("schema")).toMatchObject({ status: "OK" });
    expect(good.results.get("schema")!.message).toContain(`current: ${LATEST}`);
    expect(good.results.get("admin password")).toMatchObject({ status: "OK", message: "set (argon2id hash in the database)" });
    expect(good.results.get("providers")!.message).toContain("0 profile(s)");
    expect(good.results.get("lock")).toMatchObject({ status: "OK" });
    expect(good.results.get("vault key")).toMatchObject({ status: "OK" });
    expect(good.text).not.toContain("quick_check");

    // A sealed secret (bytea): the data dir's key opens it; another key does not.
    const made = await runCli(["admin", "create-user", "--email", "vault@example.com", "--database", url, "--data-dir", dir]);
    expect(made.code, made.stderr).toBe(0);
    const [user] = await sql.unsafe("SELECT id FROM users WHERE email = 'vault@example.com'");
    const key = crypto.getRandomValues(new Uint8Array(32));
    writeFileSync(join(dir, KEY_FILE), Buffer.from(key).toString("base64") + "\n", { mode: 0o600 });
    const sealed = Sealer.fromKey(key).seal("value", aadFor(user.id, "K"));
    await sql`INSERT INTO secrets (user_id, name, ciphertext, created_at, updated_at) VALUES (${user.id}, 'K', ${sealed}, 1, 1)`;
    const opens = await doctor(url, dir);
    expect(opens.results.get("vault key")).toMatchObject({ status: "OK" });
    expect(opens.results.get("vault key")!.message).toContain("it opens the stored secrets");
    writeFileSync(join(dir, KEY_FILE), Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
    const wrong = await doctor(url, dir);
    expect(wrong.code).toBe(1);
    expect(wrong.results.get("vault key")).toMatchObject({ status: "FAIL" });
    rmSync(join(dir, KEY_FILE));
    const missing = await doctor(url, dir);
    expect(missing.results.get("vault key")).toMatchObject({ status: "FAIL" });
    expect(missing.results.get("vault key")!.message).toContain("1 sealed value(s)");

    // Schema older (the latest migration not applied; with one migration only, none is) and newer
    // (one this binary does not know).
    await sql.unsafe(`DELETE FROM _migrations WHERE tag = '${LATEST}'`);
    const older = await doctor(url, dir);
    expect(older.results.get("schema")).toMatchObject({ status: "WARN" });
    expect(older.results.get("schema")!.message).toContain(PG_MIGRATIONS.length > 1 ? `would apply ${LATEST}` : `no schema yet; this runcell ${VERSION} creates ${LATEST}`);
    await sql.unsafe(`INSERT INTO _migrations (tag, applied_at) VALUES ('${LATEST}', 0), ('9999_future', 0)`);
    const newer = await doctor(url, dir);
    expect(newer.code).toBe(1);
    expect(newer.results.get("schema")).toMatchObject({ status: "FAIL" });
    expect(newer.results.get("schema")!.message).toContain("9999_future");
  });

  test("doctor: PostgreSQL not reachable (a wrong port) is a database FAIL with its fix, without the password", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const wrong = new URL(url);
    wrong.port = "1";
    const r = await doctor(wrong.toString(), dataDir());
    expect(r.code).toBe(1);
    const db = r.results.get("database")!;
    expect(db.status).toBe("FAIL");
    expect(db.message).toContain("cannot reach PostgreSQL at postgres://postgres:***@127.0.0.1:1/");
    expect(db.fix).toContain("--database");
    expect(r.results.get("schema")!.status).not.toBe("OK");
    // The human format too.
    const human = await runCli(["doctor", "--database", wrong.toString(), "--data-dir", dataDir(), "--docker-host", "unix:///nonexistent/docker.sock"]);
    expect(human.code).toBe(1);
    expect(human.stdout).toMatch(/FAIL database: cannot reach PostgreSQL/);
    expect(human.stdout + human.stderr).not.toContain(PASSWORD);
  });

  test("admin create-user and token create work on PostgreSQL (creating an empty database's schema first: no server can be using it)", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    const made = await runCli(["admin", "create-user", "--email", "ci@example.com", "--role", "admin", "--database", url, "--data-dir", dir]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toContain(`applied ${PG_MIGRATIONS.length} migration(s) to postgres://postgres:***@`);
    expect(made.stdout + made.stderr).not.toContain(PASSWORD);
    const tok = await runCli(["token", "create", "--email", "ci@example.com", "--name", "ci", "--database", url, "--data-dir", dir]);
    expect(tok.code, tok.stderr).toBe(0);
    expect(tok.stdout.trim()).toMatch(/^rc_\S+$/);
    const [user] = await sql.unsafe("SELECT id, role FROM users WHERE email = 'ci@example.com'");
    expect(user.role).toBe("admin");
    const tokens = await sql.unsafe("SELECT name FROM api_tokens WHERE user_id = $1", [user.id]);
    expect(tokens.map((t: { name: string }) => t.name)).toEqual(["ci"]);
    // Nothing went to the data dir's SQLite file.
    expect(await Bun.file(join(dir, "runcell.db")).exists()).toBe(false);
  });

  test("admin, token and audit never migrate a PostgreSQL schema (older servers may share it): older or newer is refused, exit 1, nothing changed", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    const commands = [
      ["admin", "create-user", "--email", "x@example.com"],
      ["token", "create", "--email", "x@example.com", "--name", "ci"],
      ["audit"],
    ];
    const tags = async () => ((await sql.unsafe("SELECT to_regclass('public._migrations') IS NOT NULL AS ok"))[0].ok ? (await sql.unsafe("SELECT tag FROM _migrations ORDER BY id")).map((r: { tag: string }) => r.tag) : null);

    // Older: the latest migration not applied (a server still running the previous runcell).
    expect((await runCli(["migrate", "--database", url, "--data-dir", dir])).code).toBe(0);
    await sql.unsafe(`DELETE FROM _migrations WHERE tag = '${LATEST}'`);
    const before = await tags();
    for (const c of commands) {
      const r = await runCli([...c, "--database", url, "--data-dir", dir]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`this runcell ${VERSION} would migrate it to ${LATEST}`);
      expect(r.stderr).toContain("Nothing was changed");
      // The command to run instead can be pasted: the URL was given with its password, which is not printed.
      expect(r.stderr).toContain("Run `runcell migrate --database <the URL you gave --database>`");
      expect(r.stderr.match(/Run `([^`]*)`/)?.[1]).not.toContain("***");
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    }
    // From the environment, or the data dir's runcell.toml: the suggestion, pasted into a shell as it
    // is (with --status, read-only), reaches the same database.
    const bin = dataDir();
    writeFileSync(join(bin, "runcell"), `#!/bin/sh\nexec bun ${join(import.meta.dir, "../../src/main.ts")} "$@"\n`, { mode: 0o755 });
    const withToml = dataDir();
    writeFileSync(join(withToml, "runcell.toml"), `database = "${url}"\n`);
    for (const [args, env, suggested] of [
      [["--data-dir", dir], { RUNCELL_DATABASE_URL: url }, 'runcell migrate --database "$RUNCELL_DATABASE_URL"'],
      [["--data-dir", withToml], {}, `runcell migrate --data-dir ${withToml}`],
    ] as const) {
      const r = await runCli(["audit", ...args], { env });
      expect(r.code, r.stderr).toBe(1);
      const command = r.stderr.match(/Run `(runcell migrate[^`]*)`/)?.[1];
      expect(command).toBe(suggested);
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
      const pasted = Bun.spawnSync(["sh", "-c", `${command} --status`], { env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME ?? "/root", ...env } });
      expect(pasted.exitCode, pasted.stderr.toString()).toBe(0);
      expect(pasted.stdout.toString()).toContain(`pending: ${LATEST}`);
    }
    expect(await tags()).toEqual(before);
    expect((await sql.unsafe("SELECT count(*)::int AS n FROM users"))[0].n).toBe(0);

    // Newer: a migration this binary does not know, written by a runcell that recorded itself.
    await sql.unsafe(`INSERT INTO _migrations (tag, applied_at) VALUES ('${LATEST}', 0), ('9999_future', 0)`);
    await sql.unsafe(`UPDATE settings SET value = '{"version":"9.9.9","commit":"abc1234","schema":"9999_future","migrated_at":"2030-01-01T00:00:00.000Z"}'::jsonb WHERE key = 'schema.writer'`);
    for (const c of commands) {
      const r = await runCli([...c, "--database", url, "--data-dir", dir]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain('this database was written by a newer runcell: runcell 9.9.9 (commit abc1234), schema "9999_future"');
      expect(r.stderr).toContain("Run runcell 9.9.9 or newer");
      expect(r.stderr).toContain("pg_dump");
      expect(r.stderr).not.toContain("    at ");
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    }
    expect(await tags()).toEqual([...before!, LATEST, "9999_future"]);

    // Unreachable: one line, no stack trace.
    const down = new URL(url);
    down.port = "1";
    for (const c of commands) {
      const r = await runCli([...c, "--database", down.toString(), "--data-dir", dir]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain("PostgreSQL at postgres://postgres:***@127.0.0.1:1/");
      expect(r.stderr).not.toContain("    at ");
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    }
  }, 60_000);

  test("migrate records which runcell wrote the schema (schema.writer), and an older binary's refusal names it", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    expect((await runCli(["migrate", "--database", url, "--data-dir", dir])).code).toBe(0);
    const [row] = await sql.unsafe("SELECT value FROM settings WHERE key = 'schema.writer'");
    expect(row.value).toMatchObject({ version: VERSION, schema: LATEST });
    expect(typeof row.value.commit).toBe("string");

    await sql.unsafe("INSERT INTO _migrations (tag, applied_at) VALUES ('9999_future', 0)");
    await sql.unsafe(`UPDATE settings SET value = '{"version":"9.9.9","commit":"abc1234","schema":"9999_future","migrated_at":"2030-01-01T00:00:00.000Z"}'::jsonb WHERE key = 'schema.writer'`);
    for (const args of [["serve", "--http", "127.0.0.1:0"], ["migrate"]]) {
      const r = await runCli([...args, "--database", url, "--data-dir", dataDir()]);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toContain('this database was written by a newer runcell: runcell 9.9.9 (commit abc1234), schema "9999_future"');
      expect(r.stderr).toContain("Run runcell 9.9.9 or newer, or restore a pg_dump made before the upgrade");
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    }
  });

  test("migrate --status refuses a database written by a newer runcell, exit 1, as on SQLite", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    expect((await runCli(["migrate", "--database", url, "--data-dir", dir])).code).toBe(0);
    await sql.unsafe("INSERT INTO _migrations (tag, applied_at) VALUES ('9999_future', 0)");
    const status = await runCli(["migrate", "--status", "--database", url, "--data-dir", dir]);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain(`runcell migrate: this database was written by a newer runcell: runcell ${VERSION}`);
    expect(status.stderr).toContain('(it has migration "9999_future", which this binary does not know)');
    expect(status.stdout).not.toContain("pending: none");
  });

  test("version --check-db --database (or RUNCELL_DATABASE_URL): 0 current, 3 older or no schema, 4 newer, 1 unreachable", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    const check = (extra: string[] = [], env: Record<string, string> = {}) => runCli(["version", "--check-db", "--data-dir", dir, ...extra], { env });
    const where = "postgres://postgres:***@127.0.0.1";

    const empty = await check(["--database", url]);
    expect(empty.code, empty.stderr).toBe(3);
    expect(empty.stdout).toContain(`database older: ${where}`);
    expect(empty.stdout).toContain("has no schema yet");

    expect((await runCli(["migrate", "--database", url, "--data-dir", dir])).code).toBe(0);
    const current = await check([], { RUNCELL_DATABASE_URL: url });
    expect(current.code, current.stderr).toBe(0);
    expect(current.stdout).toContain(`database current: ${where}`);
    expect(current.stdout).toContain(`has schema ${LATEST} (written by runcell ${VERSION})`);
    expect(current.stdout).not.toContain("runcell.db");
    // The first line names the schema this binary needs for PostgreSQL, not SQLite's.
    expect(current.stdout.split("\n")[0]).toEndWith(`, PostgreSQL schema ${LATEST})`);
    // runcell.toml naming the database: the same.
    const withToml = dataDir();
    writeFileSync(join(withToml, "runcell.toml"), `database = "${url}"\n`);
    const fromToml = await runCli(["version", "--check-db", "--data-dir", withToml]);
    expect(fromToml.code, fromToml.stderr).toBe(0);
    expect(fromToml.stdout).toContain(`PostgreSQL schema ${LATEST})\ndatabase current: ${where}`);
    const json = await check(["--json", "--database", url]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ dialect: "postgres", schema: LATEST });
    expect(JSON.parse(json.stdout).database).toMatchObject({ state: "current", schema: LATEST, written_by: { version: VERSION, schema: LATEST } });
    expect(JSON.parse(json.stdout).database.path).toStartWith(where);

    await sql.unsafe(`DELETE FROM _migrations WHERE tag = '${LATEST}'`);
    const older = await check(["--database", url]);
    expect(older.code).toBe(3);
    expect(older.stdout).toContain(`will apply ${LATEST}`);
    expect(older.stdout).not.toContain("backups/");

    await sql.unsafe(`INSERT INTO _migrations (tag, applied_at) VALUES ('${LATEST}', 0), ('9999_future', 0)`);
    const newer = await check(["--database", url]);
    expect(newer.code).toBe(4);
    expect(newer.stdout).toContain("does not know (9999_future)");

    const down = new URL(url);
    down.port = "1";
    const unreachable = await check(["--database", down.toString()]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain("PostgreSQL at postgres://postgres:***@127.0.0.1:1/");
    for (const r of [empty, current, fromToml, json, older, newer, unreachable]) expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  });

  test("backup refuses: the state is in PostgreSQL, use pg_dump and keep the vault key; the password is never printed", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    const dir = dataDir();
    const dest = join(dir, "out.tar.gz");
    const r = await runCli(["backup", "--database", url, "--data-dir", dir, dest]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("PostgreSQL");
    expect(r.stderr).toContain("pg_dump -Fc");
    expect(r.stderr).toContain(KEY_FILE);
    expect(r.stderr).toContain("127.0.0.1");
    expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    expect(await Bun.file(dest).exists()).toBe(false);
    // From the environment, without a destination, with --vault-key-file: refused the same way (exit 1, not a usage error).
    const env = await runCli(["backup", "--data-dir", dir, "--vault-key-file", "/etc/runcell/vault.key"], { env: { RUNCELL_DATABASE_URL: url } });
    expect(env.code).toBe(1);
    expect(env.stderr).toContain("/etc/runcell/vault.key");
    expect(env.stdout + env.stderr).not.toContain(PASSWORD);
  });

  test("an older single-server runcell serving the database (it holds the old server lock): serve and migrate refuse, exit 1, and change nothing", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    // The lock builds 55f1254..b9ec9eb^ held for as long as they served, from a connection of their own.
    const old = new SQL(url, { max: 1 });
    open.push(old);
    const held = await old.reserve();
    await held`SELECT pg_advisory_lock(${0x72756e73})`;
    try {
      const serve = await runCli(["serve", "--database", url, "--data-dir", dataDir(), "--http", "127.0.0.1:0"]);
      expect(serve.code, serve.stderr).toBe(1);
      expect(serve.stderr).toContain("an older runcell (single-server build");
      expect(serve.stderr).toContain("stop it first, then start this one");
      expect(serve.stderr.trim().split("\n").length).toBe(1);
      expect(serve.stdout + serve.stderr).not.toContain(PASSWORD);
      // `admin` never migrates PostgreSQL: it refuses the unmigrated database before any lock.
      const admin = await runCli(["admin", "create-user", "--email", "old@example.com", "--database", url, "--data-dir", dataDir()]);
      expect(admin.code).toBe(1);
      expect(admin.stderr).toContain("Nothing was changed");
      const migrate = await runCli(["migrate", "--database", url, "--data-dir", dataDir()]);
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toContain("an older runcell (single-server build");
      // Nothing migrated.
      const [none] = await sql.unsafe("SELECT to_regclass('public._migrations') IS NOT NULL AS ok");
      expect(none.ok).toBe(false);
    } finally {
      await held`SELECT pg_advisory_unlock(${0x72756e73})`;
      held.release();
    }
    // Stopped: this build migrates.
    const after = await runCli(["migrate", "--database", url, "--data-dir", dataDir()]);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toContain(`applied ${PG_MIGRATIONS.length} migration(s)`);
  });

  test("serve: migrates and serves from PostgreSQL; a second server on the same database serves beside it (a replica); an unreachable one names the host, never the password", async () => {
    const { url, sql } = await freshDatabase();
    open.push(sql);
    // Replicas share the vault key (a second server with a key of its own is refused at start: test/pg/vault-key.test.ts).
    const key = join(dataDir(), "vault.key");
    writeFileSync(key, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
    const first = await spawnServer({ dataDir: dataDir(), flags: ["--database", url, "--vault-key-file", key] });
    try {
      expect(await (await fetch(first.url + "/healthz")).json()).toMatchObject({ status: "ok", db: "ok" });
      const [applied] = await sql.unsafe("SELECT count(*)::int AS n FROM _migrations");
      expect(applied.n).toBe(PG_MIGRATIONS.length);
      const second = await spawnServer({ dataDir: dataDir(), flags: ["--database", url, "--vault-key-file", key] });
      try {
        const [a, b] = await Promise.all([first.url, second.url].map(async (u) => (await fetch(u + "/healthz")).json()));
        expect(a).toMatchObject({ status: "ok", db: "ok" });
        expect(b).toMatchObject({ status: "ok", db: "ok" });
        const rows = await sql.unsafe("SELECT id FROM replicas");
        expect(rows.length).toBe(2);
        expect(second.output()).not.toContain(PASSWORD);
      } finally {
        await second.kill();
      }
      expect(first.output()).not.toContain(PASSWORD);
    } finally {
      await first.kill();
    }
    const down = new URL(url);
    down.port = "1";
    const refused = await runCli(["serve", "--database", down.toString(), "--data-dir", dataDir(), "--http", "127.0.0.1:0"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("PostgreSQL at postgres://postgres:***@127.0.0.1:1/");
    expect(refused.stdout + refused.stderr).not.toContain(PASSWORD);
  });
});
