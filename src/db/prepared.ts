/**
 * A table's insert as one prepared statement (every column a placeholder): drizzle builds and
 * prepares a query on every `insert(...).values(...).run()`, which was most of the cost of the
 * hot inserts (a session and its workspace on every `session.start`). Takes a complete row.
 */
import { and, eq, getTableColumns, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { DB } from "./client.ts";
import { isPostgres } from "./unit.ts";

/**
 * The insert as a statement of a unit: `yield* run(insertRow(tx, row))`. On SQLite the statement
 * prepared once on `db` (it runs in the unit's transaction: one connection); on PostgreSQL a plain
 * drizzle insert built on the unit's `tx` (a statement of the pool would run outside it).
 */
export function preparedInsertStep<T extends SQLiteTable>(db: DB, table: T): (tx: DB, row: T["$inferSelect"]) => PromiseLike<unknown> {
  if (isPostgres(db)) return (tx, row) => tx.insert(table).values(row as never);
  const stmt = prepare(db, table);
  // What a unit's SQLite driver calls (`run()`), and a promise for anyone who awaits it.
  return (_tx, row) => ({
    run: () => stmt.run(row as never),
    then: (ok, ko) => new Promise((resolve) => resolve(stmt.run(row as never))).then(ok, ko),
  }) as PromiseLike<unknown> & { run(): unknown };
}

function prepare<T extends SQLiteTable>(db: DB, table: T) {
  const columns = Object.keys(getTableColumns(table));
  return db
    .insert(table)
    .values(Object.fromEntries(columns.map((c) => [c, sql.placeholder(c)])) as never)
    .prepare();
}

/** What a bun:sqlite prepared select offers (drizzle's SQLitePreparedQuery). */
interface PreparedSelect<R> {
  all(params: Record<string, unknown>): R[];
  get(params: Record<string, unknown>): R | undefined;
  run(params: Record<string, unknown>): unknown;
}

/**
 * A statement prepared once (SQLite) with its placeholders' values, usable as a unit's statement
 * (`yield* first(…)`, which calls `get()` inside the unit's transaction) and as a promise of its
 * rows outside one.
 */
export function boundStatement<R>(stmt: PreparedSelect<R>, params: Record<string, unknown>): PromiseLike<R[]> {
  const bound = {
    all: () => stmt.all(params),
    get: () => stmt.get(params),
    run: () => stmt.run(params),
    then: <A = R[], B = never>(ok?: ((rows: R[]) => A | PromiseLike<A>) | null, ko?: ((e: unknown) => B | PromiseLike<B>) | null) =>
      new Promise<R[]>((resolve) => resolve(stmt.all(params))).then(ok, ko),
  };
  return bound;
}

/**
 * The rows of `table` whose named columns equal the values given, as a lookup made once: on SQLite
 * a statement prepared once (drizzle builds and prepares a select on every call otherwise — most
 * of what the hot lookups of a session start cost, bench/scale.ts); on PostgreSQL a drizzle select
 * built per call. The answer is a statement of a unit (`yield* first(lookup(values, tx))`) and a
 * promise of the rows outside one (`tx` omitted: on `db`).
 */
export function preparedLookup<T extends SQLiteTable, K extends keyof T["$inferSelect"] & string>(
  db: DB,
  table: T,
  columns: readonly K[],
): (values: readonly T["$inferSelect"][K][], tx?: DB) => PromiseLike<T["$inferSelect"][]> {
  const cols = getTableColumns(table) as Record<string, SQLiteColumn>;
  const where = (values: readonly unknown[] | null) =>
    and(...columns.map((c, i) => eq(cols[c]!, values ? values[i] : sql.placeholder(c))));
  const build = (on: DB, values: readonly unknown[]) => on.select().from(table as never).where(where(values)) as unknown as PromiseLike<T["$inferSelect"][]>;
  if (isPostgres(db)) return (values, tx) => build(tx ?? db, values);
  const stmt = (db.select().from(table as never).where(where(null)) as unknown as { prepare(): PreparedSelect<T["$inferSelect"]> }).prepare();
  return (values) => boundStatement(stmt, Object.fromEntries(columns.map((c, i) => [c, values[i]])));
}
