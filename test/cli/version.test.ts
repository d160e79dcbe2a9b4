/**
 * `runcell version` names the schema this binary needs for the database the configuration names —
 * SQLite's and PostgreSQL's migrations are numbered apart — whether --database, RUNCELL_DATABASE_URL
 * or the data dir's runcell.toml names PostgreSQL; without --check-db it connects to nothing (the
 * URLs here point at a closed port). A broken setting in the environment or runcell.toml does not
 * stop plain `runcell version`: it shows both schemas and says why. (--check-db on PostgreSQL:
 * test/pg/cli.test.ts; on SQLite: test/cli/upgrade.test.ts.)
 */
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY_SCHEMA, migrate } from "../../src/db/migrate.ts";
import { openDatabase } from "../../src/db/client.ts";
import { PG_MIGRATIONS } from "../../src/db/pg/migrations.ts";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";

const PG_SCHEMA = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.tag;
/** Nothing listens there: a command that connected would fail. */
const URL = "postgres://runcell:pw-never-printed@127.0.0.1:1/runcell";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dataDir(): string {
  const d = tempDir("runcell-version-");
  dirs.push(d);
  return d;
}

describe("runcell version", () => {
  test("the two kinds of database have different schema versions (else this file tests nothing)", () => {
    expect(PG_SCHEMA).not.toBe(BINARY_SCHEMA);
  });

  test("a SQLite data dir: the SQLite schema", async () => {
    const dir = dataDir();
    const r = await runCli(["version"], { env: { RUNCELL_DATA_DIR: dir } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^runcell \\S+ \\(commit \\S+, bun ${Bun.version}, schema ${BINARY_SCHEMA}\\)\\n$`));
    const json = JSON.parse((await runCli(["version", "--json", "--data-dir", dir])).stdout);
    expect(json).toMatchObject({ dialect: "sqlite", schema: BINARY_SCHEMA });
  });

  test("PostgreSQL named by --database, RUNCELL_DATABASE_URL or runcell.toml: PostgreSQL's schema, nothing connected to", async () => {
    const dir = dataDir();
    const withToml = dataDir();
    writeFileSync(join(withToml, "runcell.toml"), `database = "${URL}"\n`);
    const runs = [
      await runCli(["version", "--database", URL, "--data-dir", dir]),
      await runCli(["version"], { env: { RUNCELL_DATA_DIR: dir, RUNCELL_DATABASE_URL: URL } }),
      await runCli(["version", "--data-dir", withToml]),
      await runCli(["version"], { env: { RUNCELL_DATA_DIR: withToml } }),
    ];
    for (const r of runs) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`, PostgreSQL schema ${PG_SCHEMA})`);
      expect(r.stdout).not.toContain(BINARY_SCHEMA);
      expect(r.stdout + r.stderr).not.toContain("pw-never-printed");
    }
    const json = await runCli(["version", "--json"], { env: { RUNCELL_DATA_DIR: withToml } });
    expect(JSON.parse(json.stdout)).toMatchObject({ dialect: "postgres", schema: PG_SCHEMA });
  });

  test("--check-db on a SQLite data dir: the first line's schema is SQLite's, as the database line's", async () => {
    const dir = dataDir();
    const h = openDatabase(join(dir, "runcell.db"));
    migrate(h.sqlite);
    h.close();
    const r = await runCli(["version", "--check-db", "--data-dir", dir]);
    expect(r.code, r.stderr).toBe(0);
    const [first, second] = r.stdout.split("\n");
    expect(first).toEndWith(`, schema ${BINARY_SCHEMA})`);
    expect(second).toStartWith(`database current: ${join(dir, "runcell.db")} has schema ${BINARY_SCHEMA}`);
  });

  test("a broken RUNCELL_DATABASE_URL or runcell.toml: plain version still answers with both schemas and says why; --check-db and flags refuse (2)", async () => {
    const dir = dataDir();
    const env = { RUNCELL_DATA_DIR: dir, RUNCELL_DATABASE_URL: "mysql://root:hunter2@db/x" };
    const plain = await runCli(["version"], { env });
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain(`schema ${BINARY_SCHEMA} on SQLite, ${PG_SCHEMA} on PostgreSQL`);
    expect(plain.stderr).toContain("cannot tell which database is meant (RUNCELL_DATABASE_URL: expected postgres://");
    const json = await runCli(["version", "--json"], { env });
    expect(JSON.parse(json.stdout)).toMatchObject({ dialect: null, schema: null, schemas: { sqlite: BINARY_SCHEMA, postgres: PG_SCHEMA } });
    expect((await runCli(["version", "--check-db"], { env })).code).toBe(2);
    expect((await runCli(["version", "--database", "mysql://root:hunter2@db/x", "--data-dir", dir])).code).toBe(2);
    for (const r of [plain, json]) expect(r.stdout + r.stderr).not.toContain("hunter2");
  });
});
