/**
 * Several `runcell serve` processes on one PostgreSQL database (issue 17's replicas), for the
 * tests of test/pg/replicas/: each replica has its own data dir and port, all share `--database`
 * and one `--vault-key-file` (replicas share the vault key through configuration). A user and an
 * API token are made through the CLI before the first start.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { removeInstanceWorkspaces, tempDir } from "./app.ts";
import { runCli } from "./cli.ts";
import { createDatabase, dropDatabase } from "./pg.ts";
import { type ServerProcess, spawnServer } from "./server-process.ts";

export interface ReplicaSet {
  /** The shared database's URL. */
  database: string;
  /** A pool on the shared database, for assertions on rows (closed by `stop`). */
  sql: SQL;
  /** The running replicas (a killed one stays in place until `restart`). */
  servers: ServerProcess[];
  /** Bearer token of the user made at set-up. */
  token: string;
  email: string;
  /** Headers for JSON requests with the token. */
  headers: Record<string, string>;
  /** Starts replica i again (a new process on the same data dir and database). */
  restart(i: number): Promise<ServerProcess>;
  /** Starts one more replica (same flags); answers its index. */
  add(): Promise<number>;
  /** Stops every replica still running, removes their containers and volumes, closes the pool, drops the database. */
  stop(): Promise<void>;
}

export async function startReplicas(n: number, opts: { flags?: string[]; env?: Record<string, string>; server?: string } = {}): Promise<ReplicaSet> {
  const database = await createDatabase(opts.server);
  const keyDir = tempDir();
  const keyFile = join(keyDir, "vault.key");
  writeFileSync(keyFile, randomBytes(32).toString("base64") + "\n", { mode: 0o600 });
  const dataDirs: string[] = [];
  const common = ["--database", database, "--vault-key-file", keyFile];
  const email = `replicas-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const cliDir = tempDir();
  const created = await runCli(["admin", "create-user", "--data-dir", cliDir, ...common, "--email", email, "--role", "user", "--password-stdin"], { stdin: "correct horse battery" });
  if (created.code !== 0) throw new Error(`create-user: ${created.stdout}${created.stderr}`);
  const tok = await runCli(["token", "create", "--data-dir", cliDir, ...common, "--email", email, "--name", "replicas"]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0];
  if (!token) throw new Error(`token create: ${tok.stdout}${tok.stderr}`);
  const spawn = (i: number) => spawnServer({ dataDir: dataDirs[i]!, flags: [...common, ...(opts.flags ?? [])], env: opts.env });
  const servers: ServerProcess[] = [];
  const add = async () => {
    const i = dataDirs.length;
    dataDirs.push(tempDir());
    servers[i] = await spawn(i);
    return i;
  };
  for (let i = 0; i < n; i++) await add();
  const sql = new SQL(database, { max: 2 });
  return {
    database,
    sql,
    servers,
    token,
    email,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    async restart(i) {
      servers[i] = await spawn(i);
      return servers[i]!;
    },
    add,
    async stop() {
      await Promise.allSettled(servers.map((s) => (s.proc.exitCode === null && !s.proc.killed ? s.kill("SIGTERM") : null)));
      // The replicas' workspaces and pool members (they share the database's instance id): nothing
      // would ever reconcile them once the database is dropped.
      const [row] = await sql`SELECT value FROM settings WHERE key = 'workspaces.instance_id'`.catch(() => []);
      const instance = row?.value;
      if (typeof instance === "string" && instance) removeInstanceWorkspaces(instance);
      await sql.close().catch(() => {});
      await dropDatabase(database).catch(() => {});
    },
  };
}

/**
 * POSTs a profile to `server` (one replica of `set`, as its user): the mock Anthropic model at
 * `modelUrl`, the test image, no network, and `limits` when given. Answers the response.
 */
export function createProfile(set: ReplicaSet, server: ServerProcess, body: { name: string; modelUrl: string; limits?: Record<string, number> }): Promise<Response> {
  return fetch(server.url + "/v1/profiles", {
    method: "POST",
    headers: set.headers,
    body: JSON.stringify({
      name: body.name,
      model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: body.modelUrl },
      image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest",
      network: "none",
      ...(body.limits ? { limits: body.limits } : {}),
    }),
  });
}
