/**
 * A table's insert as one prepared statement (every column a placeholder): drizzle builds and
 * prepares a query on every `insert(...).values(...).run()`, which was most of the cost of the
 * hot inserts (a session and its workspace on every `session.start`). Takes a complete row.
 */
import { getTableColumns, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { DB } from "./client.ts";

export function preparedInsert<T extends SQLiteTable>(db: DB, table: T): (row: T["$inferSelect"]) => void {
  const columns = Object.keys(getTableColumns(table));
  const stmt = db
    .insert(table)
    .values(Object.fromEntries(columns.map((c) => [c, sql.placeholder(c)])) as never)
    .prepare();
  return (row) => void stmt.run(row as never);
}
