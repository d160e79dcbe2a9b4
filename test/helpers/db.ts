/**
 * Raw SQL against a test app's database, on SQLite or PostgreSQL alike, for the few tests that
 * must reach behind the services ("a row changed by another process", "the database holds
 * ciphertext only"). Seeding and inspecting rows otherwise goes through drizzle on
 * `t.app.services.db` with the tables of src/db/tables.ts.
 *
 * Statements are written with `?` placeholders (SQLite's); on PostgreSQL they become $1..$n.
 * Rows come back alike: bigint values as numbers, bytea/BLOB as a plain Uint8Array.
 */
import type { TestApp } from "./app.ts";

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
  const { sqlite, sql } = t.app.services.store;
  if (sqlite) return sqlite.query(text).all(...(params as never[])).map((r) => normalize(r as Row)) as T[];
  const rows = (await sql!.unsafe(pgPlaceholders(text), params)) as Row[];
  return [...rows].map(normalize) as T[];
}

/** The first row, or null (like bun:sqlite's `.get()`). */
export async function sqlGet<T = Row>(t: TestApp, text: string, params: Param[] = []): Promise<T | null> {
  return (await sqlAll<T>(t, text, params))[0] ?? null;
}

/** Runs a statement; answers the rows it changed. */
export async function sqlRun(t: TestApp, text: string, params: Param[] = []): Promise<number> {
  const { sqlite, sql } = t.app.services.store;
  if (sqlite) return sqlite.run(text, params as never[]).changes;
  const r = (await sql!.unsafe(pgPlaceholders(text), params)) as { count?: number | bigint };
  return Number(r.count ?? 0);
}
