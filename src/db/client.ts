import { Database } from "bun:sqlite";
import { chmodSync, statSync } from "node:fs";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import * as schema from "./schema.ts";

export type DB = BunSQLiteDatabase<typeof schema>;

export interface DatabaseHandle {
  sqlite: Database;
  db: DB;
  /** Checkpoints the WAL into the main file and closes the connection. */
  close(): void;
}

/**
 * The database holds password hashes and sealed secrets: its file is the owner's alone (0600),
 * like secret.key, whatever the umask (SQLite gives its -wal and -shm the main file's mode).
 */
function ownerOnly(path: string) {
  for (const f of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      if ((statSync(f).mode & 0o077) !== 0) chmodSync(f, 0o600);
    } catch {
      // Not there (yet), or ":memory:".
    }
  }
}

/**
 * Opens (creating if needed) the SQLite database with the pragmas the server relies on:
 * WAL so readers never block the writer, synchronous=NORMAL (durable at checkpoints, ~50× faster
 * inserts than bun:sqlite's FULL default), enforced foreign keys, and a 5 s busy timeout for the
 * CLI commands that share the file with a running server.
 */
export function openDatabase(path: string, opts: { readonly?: boolean } = {}): DatabaseHandle {
  const sqlite = opts.readonly ? new Database(path, { readonly: true }) : new Database(path, { create: true });
  if (!opts.readonly) ownerOnly(path);
  sqlite.exec("PRAGMA busy_timeout = 5000");
  if (!opts.readonly) sqlite.exec("PRAGMA journal_mode = WAL");
  sqlite.exec("PRAGMA synchronous = NORMAL");
  sqlite.exec("PRAGMA foreign_keys = ON");
  const db = drizzle(sqlite, { schema });
  let closed = false;
  return {
    sqlite,
    db,
    close() {
      if (closed) return;
      closed = true;
      if (!opts.readonly) {
        try {
          sqlite.exec("PRAGMA wal_checkpoint(TRUNCATE)");
        } catch {
          // A concurrent reader can hold the WAL; the next open checkpoints it.
        }
      }
      sqlite.close();
    },
  };
}


/*
 * The repository layer is asynchronous so that one layer serves SQLite and PostgreSQL (issue 17):
 * methods that reach the database return promises and use only the query-builder forms both of
 * drizzle's dialects have — `await db.select()…`, `await first(db.select()…)`, `await
 * db.insert()/update()/delete()…` (with `.returning()` when rows are needed, `affected()` when
 * only the count is). A block whose statements must run as one (a read-modify-write, a claim) is
 * one repository method, so that each dialect can give it a transaction of its own. Fast paths
 * that answer from memory (TableMemo, caches) stay synchronous and only the miss awaits.
 */

/** The first row a select finds, or undefined (adds LIMIT 1; the same in both dialects). */
export async function first<T>(query: { limit(n: number): PromiseLike<T[]> }): Promise<T | undefined> {
  return (await query.limit(1))[0];
}

/**
 * Rows changed by an awaited insert/update/delete without `.returning()`: bun:sqlite's result
 * has `changes`, Bun's SQL client's (PostgreSQL) has `count`.
 */
export function affected(result: unknown): number {
  const r = result as { changes?: number; count?: number | bigint };
  return Number(r.changes ?? r.count ?? 0);
}
