/**
 * Migration 0008_repair_usage (SQLite) / 0003_repair_usage (PostgreSQL) says what it changed: a
 * database at the schema before it, holding bad usage figures, is opened as serve opens it
 * (openStore) and the log gets one warn line naming the migration and how many rows of which table
 * it repaired — counts only, no row's content; `runcell migrate` prints the same as a line. A
 * database whose figures are all valid gets no such line, and neither does the next start. Runs on
 * SQLite, and on PostgreSQL in the PostgreSQL pass. (What the repair does to the rows:
 * repair-usage.test.ts.)
 */
import { afterAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { migratePostgres } from "../../src/db/pg/migrate.ts";
import { PG_MIGRATIONS } from "../../src/db/pg/migrations.ts";
import { openStore } from "../../src/db/store.ts";
import { createLogger } from "../../src/log.ts";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { databaseArgs, databaseFor, dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";

const REPAIR = PG_SERVER ? "0003_repair_usage" : "0008_repair_usage";
const ALL = PG_SERVER ? PG_MIGRATIONS : MIGRATIONS;
/** The schema of a database from before the repair. */
const BEFORE = ALL.slice(0, ALL.findIndex((m) => m.tag === REPAIR));
const MESSAGE = "migration repaired stored rows";
const EMAIL = "usage-owner@example.com";

// Each dialect's bad values as literals (SQLite: 9e999 is Infinity; PostgreSQL spells it).
const BAD = PG_SERVER ? { count: "1000000000000000000", cost: "'Infinity'" } : { count: "10.7", cost: "9e999" };

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) {
    rmSync(d, { recursive: true, force: true });
    await dropDatabaseFor(d);
  }
});

/**
 * A data dir whose database (its runcell.db, or in the PostgreSQL pass its database) has the schema
 * from before the repair, with a user's sessions, tasks and deleted tasks' usage; `bad`: two tasks,
 * their session and one deleted task's usage hold figures the repair changes.
 */
async function databaseBeforeRepair(bad: boolean): Promise<string> {
  const dataDir = tempDir("runcell-repair-log-");
  dirs.push(dataDir);
  const count = bad ? BAD.count : "100";
  const cost = bad ? BAD.cost : "0.5";
  const rows = [
    `INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('usr_usage', '${EMAIL}', 'Usage Owner', 1, 1)`,
    `INSERT INTO sessions (id, user_id, profile_id, input_tokens, output_tokens, cost_usd, created_at, updated_at) VALUES
       ('sess_good', 'usr_usage', 'prof_x', 100, 20, 0.5, 1, 1), ('sess_odd', 'usr_usage', 'prof_x', ${count}, 40, 1, 1, 1)`,
    `INSERT INTO tasks (id, user_id, session_id, profile_id, prompt, status, input_tokens, output_tokens, cost_usd, max_turns, max_budget_usd, created_at) VALUES
       ('tsk_good', 'usr_usage', 'sess_good', 'prof_x', 'the secret prompt', 'completed', 100, 20, 0.5, 10, 5, 1),
       ('tsk_count', 'usr_usage', 'sess_odd', 'prof_x', 'the secret prompt', 'completed', ${count}, 20, 0.5, 10, 5, 1),
       ('tsk_cost', 'usr_usage', 'sess_odd', 'prof_x', 'the secret prompt', 'completed', 100, 20, ${cost}, 10, 5, 1)`,
    `INSERT INTO deleted_task_usage (task_id, user_id, profile_id, server_paid, input_tokens, output_tokens, cost_usd, created_at, deleted_at) VALUES
       ('tsk_gone_good', 'usr_usage', 'prof_x', false, 100, 20, 0.5, 1, 2), ('tsk_gone_odd', 'usr_usage', 'prof_x', false, 100, 20, ${cost}, 1, 2)`,
  ];
  if (PG_SERVER) {
    const sql = new SQL(await databaseFor(dataDir), { max: 1 });
    try {
      await migratePostgres(sql, BEFORE);
      for (const r of rows) await sql.unsafe(r);
    } finally {
      await sql.close();
    }
  } else {
    const h = openDatabase(join(dataDir, "runcell.db"));
    try {
      migrate(h.sqlite, BEFORE);
      for (const r of rows) h.sqlite.run(r);
    } finally {
      h.close();
    }
  }
  return dataDir;
}

/** Opens the data dir's database as serve does; answers the log lines, parsed. */
async function start(dataDir: string): Promise<Record<string, unknown>[]> {
  const lines: string[] = [];
  const store = await openStore({
    databaseUrl: PG_SERVER ? await databaseFor(dataDir) : null,
    sqlitePath: join(dataDir, "runcell.db"),
    log: createLogger({ level: "debug", sink: (l) => lines.push(l) }),
  });
  await store.close();
  return lines.map((l) => JSON.parse(l));
}

test("serve's start logs one warn line: which migration repaired how many rows of which table, counts only", async () => {
  const dataDir = await databaseBeforeRepair(true);
  const lines = await start(dataDir);
  expect(lines.find((l) => l.msg === "database migrated")?.applied).toContain(REPAIR);
  const repaired = lines.filter((l) => l.msg === MESSAGE);
  expect(repaired).toHaveLength(1);
  expect(repaired[0]).toMatchObject({ level: "warn", migration: REPAIR, rows: { tasks: 2, sessions: 1, deleted_task_usage: 1 } });
  expect(repaired[0]!.repaired).toContain("invalid token counts and costs");
  // Counts, not content: no id, address or prompt of a repaired row.
  for (const word of ["tsk_", "sess_", "usr_", EMAIL, "secret prompt"]) expect(JSON.stringify(repaired[0])).not.toContain(word);
  // The next start applies nothing and repairs nothing.
  expect((await start(dataDir)).filter((l) => l.msg === MESSAGE)).toEqual([]);
});

test("a repair that changes nothing logs nothing", async () => {
  const lines = await start(await databaseBeforeRepair(false));
  expect(lines.find((l) => l.msg === "database migrated")?.applied).toContain(REPAIR);
  expect(lines.filter((l) => l.msg === MESSAGE)).toEqual([]);
});

test("`runcell migrate` prints the same, as a line", async () => {
  const dataDir = await databaseBeforeRepair(true);
  const r = await runCli(["migrate", "--data-dir", dataDir, ...(await databaseArgs(dataDir))]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toContain(`${REPAIR} repaired tasks: 2 rows, deleted_task_usage: 1 row, sessions: 1 row (invalid token counts and costs`);
  const clean = await databaseBeforeRepair(false);
  const quiet = await runCli(["migrate", "--data-dir", clean, ...(await databaseArgs(clean))]);
  expect(quiet.code, quiet.stderr).toBe(0);
  expect(quiet.stdout).toContain(REPAIR);
  expect(quiet.stdout).not.toContain("repaired");
});
