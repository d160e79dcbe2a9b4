/**
 * The database a server keeps its state in: the embedded SQLite file in the data dir (the
 * default), or PostgreSQL (--database postgres://…). Opened, migrated and its tables chosen for
 * the process (./tables.ts) before any service exists.
 */
import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import type { Logger } from "../log.ts";
import { type DB, openDatabase } from "./client.ts";
import { migrate } from "./migrate.ts";
import { openPostgres, redactDatabaseUrl } from "./pg/client.ts";
import { logRepairs } from "./repairs.ts";
import { type Dialect, useDialect } from "./tables.ts";

export interface Store {
  dialect: Dialect;
  db: DB;
  /** The bun:sqlite connection (SQLite only: the WAL checkpointer, the change tracker, raw fast paths). */
  sqlite: Database | null;
  /**
   * Bun's SQL pool (PostgreSQL only; null on SQLite): for raw statements where the query builder
   * does not reach — tests that write or inspect rows behind the services.
   */
  sql: SQL | null;
  /** A trivial query: throws (or rejects) when the database does not answer. */
  ping(): void | Promise<void>;
  close(): Promise<void>;
}

export async function openStore(opts: { databaseUrl: string | null; sqlitePath: string; log: Logger }): Promise<Store> {
  if (opts.databaseUrl) {
    const pg = await openPostgres(opts.databaseUrl);
    const location = redactDatabaseUrl(opts.databaseUrl);
    if (pg.applied.length) opts.log.info("database migrated", { applied: pg.applied, database: location });
    logRepairs(opts.log, pg.repaired, { database: location });
    return {
      dialect: "postgres",
      db: pg.db,
      sqlite: null,
      sql: pg.sql,
      ping: async () => void (await pg.sql`SELECT 1`),
      close: () => pg.close(),
    };
  }
  const handle = openDatabase(opts.sqlitePath);
  try {
    const { applied, repaired } = migrate(handle.sqlite);
    if (applied.length) opts.log.info("database migrated", { applied, path: opts.sqlitePath });
    logRepairs(opts.log, repaired, { path: opts.sqlitePath });
  } catch (e) {
    handle.close();
    throw e;
  }
  useDialect("sqlite");
  const ping = handle.sqlite.prepare("SELECT 1 AS ok");
  return {
    dialect: "sqlite",
    db: handle.db,
    sqlite: handle.sqlite,
    sql: null,
    ping: () => void ping.get(),
    close: async () => handle.close(),
  };
}
