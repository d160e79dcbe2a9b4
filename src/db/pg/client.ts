/**
 * The PostgreSQL connection of a server started with --database postgres://…: Bun's built-in SQL
 * client (a connection pool; no extra driver) under drizzle's bun-sql adapter, with the
 * PostgreSQL mirror of the schema. The repository layer is written once for both databases
 * (src/db/unit.ts, src/db/tables.ts): the drizzle object is handed out under the SQLite type the
 * code is checked against, which the column-for-column identical schemas make safe.
 */
import { SQL } from "bun";
import { drizzle } from "drizzle-orm/bun-sql";
import type { DB } from "../client.ts";
import { useDialect } from "../tables.ts";
import type { RepairReport } from "../repairs.ts";
import { migratePostgres } from "./migrate.ts";
import { storableSql } from "./storable.ts";
import * as schema from "./schema.ts";

export interface PostgresHandle {
  dialect: "postgres";
  db: DB;
  /** The pool itself (migrations, LISTEN/NOTIFY, the health probe). */
  sql: SQL;
  close(): Promise<void>;
}

/** Connections in the pool: a server's requests and workers share them. */
const POOL_MAX = 10;
/** Held while migrating, so replicas starting at once migrate one after the other. */
const MIGRATION_LOCK = 0x72756e63; // "runc"
/**
 * The lock the single-server builds (55f1254 up to the replicas, b9ec9eb) held for as long as they
 * served. This build no longer holds it, but probes it before migrating: such a server knows
 * nothing of leases, so its running tasks look orphaned here (lease_owner IS NULL) and would run
 * twice, on a schema migrated under it.
 */
const OLD_SERVER_LOCK = 0x72756e73; // "runs"

const OLDER_SERVER =
  "an older runcell (single-server build, from before replicas) is serving this database: stop it first, then start this one. Nothing was changed";

/** PostgreSQL did not answer, or refused the connection or a migration (the message names the host, never the password). */
export class DatabaseUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DatabaseUnavailableError";
  }

  /** `e`, a failure at `url`, as the one message every command prints: the host, never the password. */
  static at(url: string, e: unknown): DatabaseUnavailableError {
    return new DatabaseUnavailableError(`PostgreSQL at ${redactDatabaseUrl(url)}: ${describePostgresError(e, url)}`);
  }
}

/** A driver's error for people: its code when the message alone says little, never the URL's password. */
export function describePostgresError(e: unknown, url: string): string {
  const err = e as Error & { code?: string };
  let message = err?.message || String(e);
  if (err?.code && !message.includes(err.code)) message += ` (${err.code})`;
  message = message.replaceAll(url, redactDatabaseUrl(url));
  try {
    const u = new URL(url);
    for (const secret of new Set([u.password, decodeURIComponent(u.password)])) if (secret) message = message.replaceAll(secret, "***");
  } catch {
    // config.ts accepts only a parsable URL
  }
  return message;
}

/** The URL without its password, for messages. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable URL)";
  }
}

/**
 * Connects, applies pending migrations (under an advisory lock: one replica at a time) and chooses
 * PostgreSQL's tables for this process. A database it cannot reach is an error naming the host,
 * never the password.
 */
export async function openPostgres(url: string, opts: { migrate?: boolean } = {}): Promise<PostgresHandle & { applied: string[]; repaired: RepairReport[] }> {
  let sql: SQL;
  try {
    sql = new SQL(url, { max: POOL_MAX, idleTimeout: 60, connectionTimeout: 10 });
  } catch (e) {
    // A URL option's value the driver refuses (sslmode=…); config.ts reports it first for the CLI.
    throw DatabaseUnavailableError.at(url, e);
  }
  let applied: string[] = [];
  let repaired: RepairReport[] = [];
  try {
    await sql`SELECT 1`;
    if (opts.migrate !== false) {
      const conn = await sql.reserve();
      try {
        await conn`SELECT pg_advisory_lock(${MIGRATION_LOCK})`;
        try {
          // Taken after the migration lock (replicas starting at once do not see each other's
          // probe) and kept while migrating: an old build starting meanwhile is refused by it.
          const [probe] = await conn`SELECT pg_try_advisory_lock(${OLD_SERVER_LOCK}) AS ok`;
          if (!probe?.ok) throw new Error(OLDER_SERVER);
          try {
            ({ applied, repaired } = await migratePostgres(conn as unknown as SQL));
          } finally {
            await conn`SELECT pg_advisory_unlock(${OLD_SERVER_LOCK})`;
          }
        } finally {
          await conn`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`;
        }
      } finally {
        conn.release();
      }
    }
  } catch (e) {
    await sql.close().catch(() => {});
    throw DatabaseUnavailableError.at(url, e);
  }
  useDialect("postgres");
  const db = drizzle({ client: storableSql(sql), schema }) as unknown as DB;
  let closed: Promise<void> | null = null;
  return {
    dialect: "postgres",
    db,
    sql,
    applied,
    repaired,
    close: () =>
      (closed ??= sql.close({ timeout: 5 })),
  };
}
