/**
 * PostgreSQL's row lock for a unit's check-then-write (a count under a limit, a merge of a read
 * row): `SELECT … FOR NO KEY UPDATE` holds the selected rows until the transaction ends, so a
 * second transaction taking the same lock waits, and under READ COMMITTED its later statements
 * then see what the first committed. NO KEY UPDATE rather than UPDATE: it serializes the units
 * that take it without blocking other transactions' inserts that merely reference the row
 * (their foreign-key checks take KEY SHARE, which only FOR UPDATE conflicts with).
 *
 * PostgreSQL only (call it behind `isPostgres(tx)`): on SQLite a unit's transaction already runs
 * alone (bun:sqlite executes it synchronously on the process's one connection; `immediate` takes
 * the file's write lock at BEGIN against other processes), and SQLite has no FOR clause.
 */
/**
 * `SELECT … FOR UPDATE` (PostgreSQL only, as above): a read the same unit then writes over; with
 * `skipLocked`, rows another transaction holds are passed over (a worker's claim).
 */
export function forUpdate<Q extends PromiseLike<unknown[]>>(query: Q, opts?: { skipLocked: boolean }): Q {
  return (query as unknown as { for(strength: "update", o?: { skipLocked: boolean }): Q }).for("update", opts);
}

export function forNoKeyUpdate<T>(query: PromiseLike<T[]>): PromiseLike<T[]> {
  // The DB type is SQLite's select, which has no `.for`; on PostgreSQL the builder is a PgSelect.
  return (query as unknown as { for(strength: "no key update"): PromiseLike<T[]> }).for("no key update");
}
