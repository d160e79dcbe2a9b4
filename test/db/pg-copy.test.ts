/**
 * PostgreSQL, on a real server (scripts/test-postgres.sh; ./install.sh test starts it):
 * - the embedded PostgreSQL migrations make every table of src/db/pg/schema.ts with its columns,
 *   types and nullability as drizzle describes them, and a second run applies nothing;
 * - `runcell migrate --from-sqlite FILE --to postgres://…` copies every row of every table — a
 *   synthetic database with rows in all 21 tables, every column filled (NULLs too), compared value
 *   by value; an absent JSON value (SQL NULL, or the text `null` SQLite's prepared inserts store)
 *   arrives as SQL NULL, as the app writes it on PostgreSQL — and the vault's secrets still open
 *   with the data dir's key;
 * - refusals: a database that already holds data, a source behind the schema, bad flags.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { join } from "node:path";
import { rmSync } from "node:fs";
import { getTableName, is } from "drizzle-orm";
import { getTableConfig as sqliteConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import { getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import * as sqliteSchema from "../../src/db/schema.ts";
import { openDatabase } from "../../src/db/client.ts";
import { migrate, SCHEMA_WRITER_KEY } from "../../src/db/migrate.ts";
import { acquireDataDirLock } from "../../src/db/lock.ts";
import { PG_MIGRATIONS } from "../../src/db/pg/migrations.ts";
import { VERSION } from "../../src/version.ts";
import { migratePostgres } from "../../src/db/pg/migrate.ts";
import { tablesInDependencyOrder } from "../../src/db/pg/copy.ts";
import { Sealer } from "../../src/lib/sealer.ts";
import { aadFor } from "../../src/vault/secrets.ts";
import { tempDir } from "../helpers/app.ts";
import { createDatabase, dropDatabase } from "../helpers/pg.ts";
import { spawnServer } from "../helpers/server-process.ts";

const SERVER = process.env.RUNCELL_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:55432/postgres";
const ROOT = join(import.meta.dir, "../..");
let admin: SQL;
const made: string[] = [];

/** A new empty database on the test server; its URL. */
async function freshDatabase(): Promise<string> {
  const url = await createDatabase(SERVER);
  made.push(url);
  return url;
}

beforeAll(async () => {
  admin = new SQL(SERVER, { max: 1, connectionTimeout: 5 });
  try {
    await admin.unsafe("SELECT 1");
  } catch (e) {
    throw new Error(`no PostgreSQL at ${SERVER} (${(e as Error).message}): run \`bash scripts/test-postgres.sh start\` (./install.sh test does)`);
  }
});

afterAll(async () => {
  for (const url of made) await dropDatabase(url).catch(() => {});
  await admin.close();
});

function cli(args: string[]) {
  const r = Bun.spawnSync(["bun", join(ROOT, "src/main.ts"), ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe("the PostgreSQL schema on a real server", () => {
  test("migrations make every table with drizzle's columns; a second run applies nothing", async () => {
    const pg = new SQL(await freshDatabase(), { max: 1 });
    try {
      const first = await migratePostgres(pg);
      expect(first.applied.length).toBeGreaterThan(0);
      expect((await migratePostgres(pg)).applied).toEqual([]);
      for (const table of tablesInDependencyOrder()) {
        const name = getTableName(table);
        const cols = await pg.unsafe(
          "SELECT column_name, is_nullable, data_type, udt_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
          [name],
        );
        const expected = pgConfig(table).columns.map((c) => [c.name, c.notNull ? "NO" : "YES", c.getSQLType()]);
        const actual = cols.map((c: { column_name: string; is_nullable: string; data_type: string; udt_name: string }) => [c.column_name, c.is_nullable, c.data_type === "USER-DEFINED" ? c.udt_name : c.data_type]);
        expect({ table: name, columns: actual }).toEqual({ table: name, columns: expected });
      }
    } finally {
      await pg.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// A synthetic source: every table of the SQLite schema filled, every column set (NULL in every
// other row where allowed), foreign keys pointing at rows made before.

const ROWS = 7;

type Row = Record<string, unknown>;

function sqliteTables(): SQLiteTable[] {
  const all = Object.values(sqliteSchema as Record<string, unknown>).filter((t): t is SQLiteTable => is(t, SQLiteTable));
  const order = tablesInDependencyOrder().map((t) => getTableName(t));
  return order.map((n) => all.find((t) => getTableName(t) === n)!);
}

function valueFor(table: string, col: ReturnType<typeof sqliteConfig>["columns"][number], i: number, parents: Map<string, Row[]>, fk: { table: string; column: string } | undefined): unknown {
  if (fk) {
    const rows = parents.get(fk.table)!;
    return rows[i % rows.length]![fk.column];
  }
  const nullable = !col.notNull && !col.primary;
  // An absent JSON value as SQLite's prepared inserts store it: the JSON text `null` (src/db/prepared.ts).
  if (nullable && i % 2 === 1) return col.columnType === "SQLiteTextJson" && i % 4 === 3 ? "null" : null;
  const enumValues = (col as { enumValues?: string[] }).enumValues;
  if (enumValues?.length) return enumValues[i % enumValues.length];
  switch (col.columnType) {
    case "SQLiteBoolean":
      return i % 3 === 0 ? 1 : 0;
    case "SQLiteInteger":
      return 1_700_000_000_000 + i * 1_234 + table.length;
    case "SQLiteReal":
      return i + 0.25;
    case "SQLiteBlobBuffer":
      return new Uint8Array([0, 255, i, 10, 13, 0x5c]);
    case "SQLiteTextJson":
      return JSON.stringify(i % 2 ? { n: i, text: `ünïcødé "quoted" ${table}`, list: [1, null, true] } : [`item ${i}`, { nested: { deep: i } }]);
    default:
      return `${table}.${col.name}.${i}.${crypto.randomUUID().slice(0, 8)} ✓`;
  }
}

function fillSynthetic(db: Database): Map<string, Row[]> {
  const made = new Map<string, Row[]>();
  for (const table of sqliteTables()) {
    const cfg = sqliteConfig(table);
    const name = getTableName(table);
    const fks = new Map<string, { table: string; column: string }>();
    for (const fk of cfg.foreignKeys) {
      const ref = fk.reference();
      ref.columns.forEach((c, k) => fks.set(c.name, { table: getTableName(ref.foreignTable), column: ref.foreignColumns[k]!.name }));
    }
    const rows: Row[] = [];
    for (let i = 0; i < ROWS; i++) {
      const row: Row = {};
      for (const col of cfg.columns) row[col.name] = valueFor(name, col, i, made, fks.get(col.name));
      rows.push(row);
    }
    const cols = cfg.columns.map((c) => c.name);
    const insert = db.prepare(`INSERT INTO "${name}" (${cols.map((c) => `"${c}"`).join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`);
    for (const row of rows) insert.run(...(cols.map((c) => row[c]) as never[]));
    made.set(name, rows);
  }
  return made;
}

/**
 * A value as both sides should agree on it: booleans, JSON parsed, bytes as hex. SQLite holds JSON
 * as text, parsed here; PostgreSQL's jsonb arrives parsed already and is taken as it is — parsing a
 * string there too hid a copy that stored every document as one JSON string.
 */
function normal(v: unknown, sqlType: string, side: "sqlite" | "pg"): unknown {
  if (v === null || v === undefined) return null;
  if (sqlType === "boolean") return v === true || v === 1;
  if (sqlType === "jsonb") return side === "sqlite" ? JSON.parse(v as string) : v;
  if (sqlType === "bytea") return Buffer.from(v as Uint8Array).toString("hex");
  // Bun's SQL client reads int8 as a string (no precision lost); the schema's mode is number.
  if (sqlType === "bigint") return Number(v);
  return v;
}

describe("runcell migrate --from-sqlite FILE --to postgres://", () => {
  let dir: string;
  let file: string;
  let url: string;
  let source: Map<string, Row[]>;

  beforeAll(async () => {
    dir = tempDir("runcell-pg-copy-");
    file = join(dir, "runcell.db");
    const h = openDatabase(file);
    migrate(h.sqlite);
    source = fillSynthetic(h.sqlite);
    h.close();
    url = await freshDatabase();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("every row of every table, value by value, with progress and a verification", async () => {
    // The source really has rows everywhere: a table left empty would be a table not tested.
    expect([...source.values()].every((rows) => rows.length === ROWS)).toBe(true);
    expect(source.size).toBe(21);
    const r = cli(["migrate", "--from-sqlite", file, "--to", url]);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toContain("PostgreSQL schema created at");
    expect(r.out).toContain(`  users: ${ROWS} / ${ROWS} rows`);
    const src0 = new Database(file, { readonly: true });
    const total = tablesInDependencyOrder().reduce((n, t) => n + (src0.query(`SELECT count(*) AS n FROM "${getTableName(t)}"`).get() as { n: number }).n, 0);
    src0.close();
    // The synthetic rows, and the settings row naming the schema's writer: that one is each side's
    // own (PostgreSQL's names its schema, written by the migration), not copied.
    expect(total).toBe(ROWS * 21 + 1);
    expect(r.out).toContain(`copied ${total - 1} rows in 21 tables; row counts verified on both sides`);
    expect(r.out).toContain("secret.key");
    const src = new Database(file, { readonly: true });
    const pg = new SQL(url, { max: 1 });
    try {
      for (const table of tablesInDependencyOrder()) {
        const name = getTableName(table);
        const cols = pgConfig(table).columns;
        const key = pgConfig(table).primaryKeys[0]?.columns.map((c) => c.name) ?? cols.filter((c) => c.primary).map((c) => c.name);
        const order = key.map((k) => `"${k}"`).join(", ");
        const own = name === "settings" ? ` WHERE key <> '${SCHEMA_WRITER_KEY}'` : "";
        const a = (src.query(`SELECT * FROM "${name}"${own} ORDER BY ${order}`).all() as Row[]).map((row) => Object.fromEntries(cols.map((c) => [c.name, normal(row[c.name], c.getSQLType(), "sqlite")])));
        const b = ((await pg.unsafe(`SELECT * FROM "${name}"${own} ORDER BY ${order}`)) as Row[]).map((row) => Object.fromEntries(cols.map((c) => [c.name, normal(row[c.name], c.getSQLType(), "pg")])));
        expect({ table: name, rows: b }).toEqual({ table: name, rows: a });
        // An identity column's next value comes after the copied ids.
        for (const c of cols.filter((c) => c.generatedIdentity)) {
          const [r] = await pg.unsafe(`SELECT nextval(pg_get_serial_sequence($1, $2))::bigint AS next, (SELECT max("${c.name}") FROM "${name}")::bigint AS max`, [`"${name}"`, c.name]);
          expect({ table: name, next: Number(r.next) }).toEqual({ table: name, next: Number(r.max) + 1 });
        }
      }
      // A nullable JSON column holds SQL NULL where SQLite held NULL or the JSON text `null`, as the
      // app's own writes on PostgreSQL leave it (a JSON null there is not IS NULL).
      let nullableJson = 0;
      for (const table of tablesInDependencyOrder()) {
        const name = getTableName(table);
        for (const c of pgConfig(table).columns.filter((c) => c.getSQLType() === "jsonb" && !c.notNull)) {
          nullableJson++;
          const absent = (src.query(`SELECT count(*) AS n FROM "${name}" WHERE "${c.name}" IS NULL OR "${c.name}" = 'null'`).get() as { n: number }).n;
          expect(absent).toBeGreaterThan(0);
          const [n] = await pg.unsafe(`SELECT count(*) FILTER (WHERE "${c.name}" IS NULL)::int AS sql_null, count(*) FILTER (WHERE jsonb_typeof("${c.name}") = 'null')::int AS json_null FROM "${name}"`);
          expect({ column: `${name}.${c.name}`, ...n }).toEqual({ column: `${name}.${c.name}`, sql_null: absent, json_null: 0 });
        }
      }
      expect(nullableJson).toBeGreaterThan(0);
      const [writer] = await pg.unsafe(`SELECT value FROM settings WHERE key = '${SCHEMA_WRITER_KEY}'`);
      expect(writer.value).toMatchObject({ version: VERSION, schema: PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.tag });
    } finally {
      src.close();
      await pg.close();
    }
  });

  test("from the data dir of a running server (its lock held): refused, exit 1, nothing copied", async () => {
    const target = await freshDatabase();
    const lock = acquireDataDirLock(dir);
    try {
      const r = cli(["migrate", "--from-sqlite", file, "--to", target]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`${file} cannot be copied while a server uses it`);
      expect(r.err).toContain(`(pid ${process.pid}`);
    } finally {
      lock.release();
    }
    const pg = new SQL(target, { max: 1 });
    try {
      expect((await pg.unsafe("SELECT to_regclass('public.users') AS t"))[0].t).toBeNull();
    } finally {
      await pg.close();
    }
  });

  test("into a database that already holds data: refused, nothing changed", async () => {
    const r = cli(["migrate", "--from-sqlite", file, "--to", url]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("already holds runcell data");
    const pg = new SQL(url, { max: 1 });
    try {
      const [n] = await pg.unsafe('SELECT count(*)::int AS n FROM "users"');
      expect(n.n).toBe(ROWS);
    } finally {
      await pg.close();
    }
  });

  test("a vault secret copied from a real installation still opens with the data dir's key", async () => {
    const dataDir = tempDir("runcell-pg-vault-");
    try {
      const { createApp } = await import("../../src/app.ts");
      const { parseArgs, resolveConfig } = await import("../../src/config.ts");
      const { silentLogger } = await import("../../src/log.ts");
      const app = await createApp(resolveConfig(parseArgs(["--data-dir", dataDir, "--http", "127.0.0.1:0"]).flags, {}), { logger: silentLogger });
      const user = await app.services.users.create({ email: "vault@example.com", password: "vault password 1", role: "user" });
      await app.services.secrets.put(user.id, "ANTHROPIC_API_KEY", "sk-ant-the-real-one");
      await app.stop();
      const target = await freshDatabase();
      const r = cli(["migrate", "--from-sqlite", join(dataDir, "runcell.db"), "--to", target]);
      expect(r.code).toBe(0);
      const pg = new SQL(target, { max: 1 });
      try {
        const [row] = await pg.unsafe('SELECT ciphertext FROM "secrets" WHERE user_id = $1 AND name = $2', [user.id, "ANTHROPIC_API_KEY"]);
        expect(Sealer.fromDataDir(dataDir).open(row.ciphertext, aadFor(user.id, "ANTHROPIC_API_KEY"))).toBe("sk-ant-the-real-one");
      } finally {
        await pg.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("a session the app made without repositories: SQL NULL after the copy (IS NULL), as the app leaves it on PostgreSQL", async () => {
    const dataDir = tempDir("runcell-pg-nulls-");
    try {
      const { createApp } = await import("../../src/app.ts");
      const { parseArgs, resolveConfig } = await import("../../src/config.ts");
      const { silentLogger } = await import("../../src/log.ts");
      const app = await createApp(resolveConfig(parseArgs(["--data-dir", dataDir, "--http", "127.0.0.1:0", "--docker-host", "unix:///nonexistent/docker.sock"]).flags, {}), { logger: silentLogger });
      const user = await app.services.users.create({ email: "nulls@example.com", password: "nulls password 1", role: "user" });
      const profile = await app.services.profiles.create(user.id, { name: "p", model: { provider: "demo", name: "demo" }, network: "none" });
      const session = await app.services.agentSessions.create(user.id, profile.id, null);
      await app.stop();
      const target = await freshDatabase();
      const r = cli(["migrate", "--from-sqlite", join(dataDir, "runcell.db"), "--to", target]);
      expect(r.code, r.err).toBe(0);
      const pg = new SQL(target, { max: 1 });
      try {
        const [row] = await pg.unsafe("SELECT repositories IS NULL AS sql_null, jsonb_typeof(repositories) AS json_type FROM sessions WHERE id = $1", [session.id]);
        expect(row).toEqual({ sql_null: true, json_type: null });
      } finally {
        await pg.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  // The copy served: JSON documents (a profile's model and limits, settings such as the instance
  // id, the admin password's hash) must arrive as documents, not as JSON strings of them.
  test("a real installation copied, then served from PostgreSQL: profiles, the instance id and the admin password as they were", async () => {
    const dataDir = tempDir("runcell-pg-served-");
    const pgDir = tempDir("runcell-pg-served-pg-");
    try {
      const { createApp } = await import("../../src/app.ts");
      const { parseArgs, resolveConfig } = await import("../../src/config.ts");
      const { silentLogger } = await import("../../src/log.ts");
      const open = (flags: string[]) => createApp(resolveConfig(parseArgs([...flags, "--http", "127.0.0.1:0", "--docker-host", "unix:///nonexistent/docker.sock"]).flags, {}), { logger: silentLogger });
      const before = await open(["--data-dir", dataDir]);
      const user = await before.services.users.create({ email: "served@example.com", password: "served password 1", role: "user" });
      const profile = await before.services.profiles.create(user.id, { name: "p", model: { provider: "demo", name: "demo" }, limits: { max_turns: 7 }, network: "none" });
      await before.services.adminPassword.set("the admin password 1");
      const instanceId = before.services.workspaces.instanceId;
      await before.stop();
      const target = await freshDatabase();
      expect(cli(["migrate", "--from-sqlite", join(dataDir, "runcell.db"), "--to", target]).code).toBe(0);
      const pg = new SQL(target, { max: 1 });
      try {
        const [row] = await pg.unsafe("SELECT jsonb_typeof(model) AS model, jsonb_typeof(limits) AS limits FROM profiles WHERE id = $1", [profile.id]);
        expect(row).toEqual({ model: "object", limits: "object" });
      } finally {
        await pg.close();
      }
      // One process serves one database: the copy is served by a server process of its own.
      const token = cli(["token", "create", "--database", target, "--data-dir", pgDir, "--email", "served@example.com", "--name", "t"]);
      expect(token.code).toBe(0);
      const bearer = token.out.match(/rc_[A-Za-z0-9_-]+/)![0];
      const server = await spawnServer({ dataDir: pgDir, flags: ["--database", target, "--vault-key-file", join(dataDir, "secret.key")] });
      try {
        const got = await fetch(`${server.url}/v1/profiles/${profile.id}`, { headers: { authorization: `Bearer ${bearer}` } });
        expect(got.status).toBe(200);
        const body = await got.json();
        expect(body.model).toMatchObject(profile.model);
        expect(body.limits).toMatchObject(profile.limits);
        expect((await fetch(`${server.url}/admin/stats`, { headers: { authorization: "Bearer the admin password 1" } })).status).toBe(200);
        expect(server.output()).not.toContain("marked_failed");
      } finally {
        await server.kill();
      }
      const pg2 = new SQL(target, { max: 1 });
      try {
        const [row] = await pg2.unsafe("SELECT value FROM settings WHERE key = 'workspaces.instance_id'");
        expect(row.value).toBe(instanceId);
      } finally {
        await pg2.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(pgDir, { recursive: true, force: true });
    }
  });

  test.each([
    [["migrate", "--to", "postgres://x@127.0.0.1:1/x"], 2, "--to needs --from-sqlite"],
    [["migrate", "--from-sqlite", "/nonexistent.db"], 2, "--from-sqlite needs --to"],
    [["migrate", "--from-sqlite", "/nonexistent.db", "--to", "mysql://root:hunter2@db/x"], 2, "must be a postgres:// URL"],
    [["migrate", "--from-sqlite", "/nonexistent.db", "--to", "postgres://x@127.0.0.1:1/x"], 1, "no SQLite database at /nonexistent.db"],
  ])("%p → exit %p", (args, code, message) => {
    const r = cli(args as string[]);
    expect(r.code).toBe(code as number);
    expect(r.err).toContain(message as string);
    expect(r.err).not.toContain("hunter2");
  });

  test("an unreachable server: exit 1 naming it without its password", () => {
    const r = cli(["migrate", "--from-sqlite", file, "--to", "postgres://runcell:s3cret-pw@127.0.0.1:1/runcell"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("127.0.0.1:1");
    expect(r.err).not.toContain("s3cret-pw");
  });
});
