/**
 * Raw SQL against a test app's database, on SQLite or PostgreSQL alike, for the few tests that
 * must reach behind the services ("a row changed by another process", "the database holds
 * ciphertext only"). Seeding and inspecting rows otherwise goes through drizzle on
 * `t.app.services.db` with the tables of src/db/tables.ts.
 *
 * Statements are written with `?` placeholders (SQLite's); on PostgreSQL they become $1..$n.
 * Rows come back alike: bigint values as numbers, bytea/BLOB as a plain Uint8Array.
 * Also the one seeder of finished tasks (spend, usage and policy tests).
 */
import { join } from "node:path";
import { SQL } from "bun";
import { openDatabase } from "../../src/db/client.ts";
import { newId } from "../../src/db/ids.ts";
import { sessions, tasks } from "../../src/db/tables.ts";
import type { TestApp } from "./app.ts";
import { databaseFor, PG_SERVER } from "./pg.ts";

type Param = string | number | boolean | null | Uint8Array;
type Row = Record<string, unknown>;

/** `?` → `$1..$n`, outside single-quoted literals. */
export function pgPlaceholders(text: string): string {
  let n = 0;
  let quoted = false;
  let out = "";
  for (const c of text) {
    if (c === "'") quoted = !quoted;
    out += c === "?" && !quoted ? `$${++n}` : c;
  }
  return out;
}

function normalize(row: Row): Row {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] = typeof v === "bigint" ? Number(v) : v instanceof Uint8Array ? new Uint8Array(v) : v;
  }
  return out;
}

/** Every row the statement answers. */
export async function sqlAll<T = Row>(t: TestApp, text: string, params: Param[] = []): Promise<T[]> {
  const { sqlite } = t.app.services.store;
  if (sqlite) return sqlite.query(text).all(...(params as never[])).map((r) => normalize(r as Row)) as T[];
  return (await onPostgres(t.config.databaseUrl!, text, params)).rows as T[];
}

/**
 * One statement on a connection of its own that reads int8 as bigint (Bun's default, and the
 * app's pool, answer it as a string), normalized like SQLite's rows.
 */
async function onPostgres(url: string, text: string, params: Param[]): Promise<{ rows: Row[]; count: number }> {
  const sql = new SQL(url, { max: 1, bigint: true });
  try {
    const r = (await sql.unsafe(pgPlaceholders(text), params)) as Row[] & { count?: number | bigint };
    return { rows: [...r].map(normalize), count: Number(r.count ?? 0) };
  } finally {
    await sql.close();
  }
}

/**
 * Every row the statement answers on the database of `dataDir` — its runcell.db, or in the
 * PostgreSQL pass its database (databaseFor) — opened for this one statement: for servers that run
 * in another process (spawnServer) or are stopped.
 */
export async function sqlAllIn<T = Row>(dataDir: string, text: string, params: Param[] = [], opts: { readonly?: boolean } = {}): Promise<T[]> {
  if (PG_SERVER) return (await onPostgres(await databaseFor(dataDir), text, params)).rows as T[];
  const h = openDatabase(join(dataDir, "runcell.db"), opts);
  try {
    return h.sqlite.query(text).all(...(params as never[])).map((r) => normalize(r as Row)) as T[];
  } finally {
    h.close();
  }
}

/** The first row, or null (like bun:sqlite's `.get()`). */
export async function sqlGet<T = Row>(t: TestApp, text: string, params: Param[] = []): Promise<T | null> {
  return (await sqlAll<T>(t, text, params))[0] ?? null;
}

/** Runs a statement; answers the rows it changed. */
export async function sqlRun(t: TestApp, text: string, params: Param[] = []): Promise<number> {
  const { sqlite } = t.app.services.store;
  if (sqlite) return sqlite.run(text, params as never[]).changes;
  return (await onPostgres(t.config.databaseUrl!, text, params)).count;
}

/**
 * A finished task of `userId` on `profileId`, in a session of its own, at `at` (ms): what the
 * spend, usage and policy tests count. Written with drizzle, so it lands in either database.
 */
export async function seedFinishedTask(
  t: TestApp,
  o: { userId: string; profileId: string; costUsd: number; serverPaid?: boolean; at?: number; inputTokens?: number; outputTokens?: number; turns?: number },
): Promise<string> {
  const { db } = t.app.services;
  const at = o.at ?? Date.now();
  const sessionId = newId("session");
  await db.insert(sessions).values({ id: sessionId, user_id: o.userId, profile_id: o.profileId, created_at: at, updated_at: at });
  const id = newId("task");
  await db.insert(tasks).values({
    id,
    user_id: o.userId,
    session_id: sessionId,
    profile_id: o.profileId,
    prompt: "x",
    status: "completed",
    input_tokens: o.inputTokens ?? 0,
    output_tokens: o.outputTokens ?? 0,
    cost_usd: o.costUsd,
    turns: o.turns ?? 0,
    max_turns: 10,
    max_budget_usd: 5,
    server_paid: o.serverPaid ?? false,
    created_at: at,
  });
  return id;
}
