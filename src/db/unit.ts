/**
 * Units of work: a block of statements that must commit together (a read-modify-write, a claim,
 * a write and the notification it queues), written once for both databases.
 *
 * A unit is a generator over a transaction: every statement is `yield*`ed through `all`, `first`
 * or `run`, and the unit's return value is the transaction's result.
 *
 *     function* rename(tx: DB, id: string, name: string): Unit<boolean> {
 *       const row = yield* first(tx.select().from(profiles).where(eq(profiles.id, id)));
 *       if (!row) return false;
 *       return (yield* run(tx.update(profiles).set({ name }).where(eq(profiles.id, id)))) === 1;
 *     }
 *     const ok = await transact(db, (tx) => rename(tx, id, "new"));
 *
 * On SQLite `transact` drives the generator inside one synchronous transaction (bun:sqlite runs
 * each statement at once; nothing else can run in between, so the block is atomic without a
 * lock); on PostgreSQL it drives it inside `BEGIN … COMMIT`, awaiting each statement. A unit
 * never awaits anything else: what it needs from outside (a bcrypt hash, a model answer) is
 * computed before. Units compose: one unit can `yield*` another inside the same transaction.
 */
import { is } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { affected, type DB } from "./client.ts";

/** One statement of a unit and how its answer is read. */
export interface Step {
  kind: "all" | "first" | "run";
  query: PromiseLike<unknown>;
}

export type Unit<T> = Generator<Step, T, unknown>;

/** The rows a statement returns (a select, or a write with `.returning()`). */
export function* all<T>(query: PromiseLike<T[]>): Generator<Step, T[], unknown> {
  return (yield { kind: "all", query }) as T[];
}

/** The first row a statement returns, or undefined. */
export function* first<T>(query: PromiseLike<T[]>): Generator<Step, T | undefined, unknown> {
  return (yield { kind: "first", query }) as T | undefined;
}

/** Runs a write without `.returning()`; answers the number of rows it changed. */
export function* run(query: PromiseLike<unknown>): Generator<Step, number, unknown> {
  return (yield { kind: "run", query }) as number;
}

/** What a drizzle query has on bun:sqlite: synchronous execution. */
interface SyncQuery {
  all(): unknown[];
  get(): unknown;
  run(): unknown;
}

function runSync(step: Step): unknown {
  const q = step.query as unknown as SyncQuery;
  if (step.kind === "all") return q.all();
  if (step.kind === "first") return q.get();
  return affected(q.run());
}

async function runAsync(step: Step): Promise<unknown> {
  const result = await step.query;
  if (step.kind === "all") return result;
  if (step.kind === "first") return (result as unknown[])[0];
  return affected(result);
}

/** Whether `db` (or a transaction of it) talks to PostgreSQL. */
export function isPostgres(db: DB): boolean {
  return is((db as unknown as { dialect: unknown }).dialect, PgDialect);
}

/** Drives a unit to its end on a synchronous (bun:sqlite) connection or transaction. */
export function driveSync<T>(unit: Unit<T>): T {
  let next = unit.next();
  while (!next.done) next = unit.next(runSync(next.value));
  return next.value;
}

/** Drives a unit to its end, awaiting each statement (PostgreSQL). */
export async function driveAsync<T>(unit: Unit<T>): Promise<T> {
  let next = unit.next();
  while (!next.done) next = unit.next(await runAsync(next.value));
  return next.value;
}

export interface TransactOptions {
  /** SQLite: take the write lock at BEGIN (a unit that reads, then writes what it read). */
  immediate?: boolean;
}

/** Runs `unit` in one transaction: all its statements commit, or (it throws) none. */
export async function transact<T>(db: DB, unit: (tx: DB) => Unit<T>, opts: TransactOptions = {}): Promise<T> {
  if (isPostgres(db)) {
    const pg = db as unknown as { transaction<R>(fn: (tx: DB) => Promise<R>): Promise<R> };
    return pg.transaction((tx) => driveAsync(unit(tx)));
  }
  return db.transaction((tx) => driveSync(unit(tx as unknown as DB)), { behavior: opts.immediate ? "immediate" : "deferred" });
}
