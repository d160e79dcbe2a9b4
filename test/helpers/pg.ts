/**
 * PostgreSQL for the tests of test/pg/: a fresh database per test file on the private server
 * scripts/test-postgres.sh runs (./install.sh test starts it). A process serves one database
 * (src/db/tables.ts), so these tests run in their own `bun test test/pg` pass with
 * RUNCELL_TEST_POSTGRES set; in the SQLite pass they are skipped.
 */
import { SQL } from "bun";
import { openPostgres, type PostgresHandle } from "../../src/db/pg/client.ts";

/** The server's URL in the PostgreSQL pass; null in the SQLite pass. */
export const PG_SERVER = process.env.RUNCELL_TEST_POSTGRES || null;

export interface FreshPostgres extends PostgresHandle {
  url: string;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** Creates an empty database on `server` (the PostgreSQL pass's by default); answers its URL. */
export async function createDatabase(server: string | null = PG_SERVER): Promise<string> {
  if (!server) throw new Error("RUNCELL_TEST_POSTGRES is not set");
  const name = `rc_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = new SQL(server, { max: 1 });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.close();
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops the database `url` names (a URL from createDatabase; any password in it is ignored). */
export async function dropDatabase(url: string): Promise<void> {
  const server = new URL(url);
  server.pathname = "/postgres";
  server.password = "";
  const admin = new SQL(server.toString(), { max: 1 });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`);
  await admin.close();
}

/** A new, migrated database with PostgreSQL's tables chosen for this process. */
export async function freshPostgres(): Promise<FreshPostgres> {
  const url = await createDatabase();
  const handle = await openPostgres(url);
  return {
    ...handle,
    url,
    async drop() {
      await handle.close();
      await dropDatabase(url);
    },
  };
}

const byDataDir = new Map<string, string>();

/**
 * The PostgreSQL pass of the API suite: the database a test app on `dataDir` uses — made at the
 * first start, the same one when the data dir is started again (restart tests).
 */
export async function databaseFor(dataDir: string): Promise<string> {
  let url = byDataDir.get(dataDir);
  if (!url) byDataDir.set(dataDir, (url = await createDatabase()));
  return url;
}

/**
 * The flags that put a process started on `dataDir` outside startTestApp (spawnServer, runCli,
 * createApp) on that data dir's database: `--database <databaseFor(dataDir)>` in the PostgreSQL
 * pass, none in the SQLite pass (the data dir's runcell.db).
 */
export async function databaseArgs(dataDir: string): Promise<string[]> {
  return PG_SERVER ? ["--database", await databaseFor(dataDir)] : [];
}

/** Drops the database of `dataDir` (when its data dir is removed too). */
export async function dropDatabaseFor(dataDir: string): Promise<void> {
  const url = byDataDir.get(dataDir);
  if (!url || !PG_SERVER) return;
  byDataDir.delete(dataDir);
  await dropDatabase(url);
}
