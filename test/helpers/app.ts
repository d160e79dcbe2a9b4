/**
 * A fresh runcell on a fresh temp data dir and a real port, per test file (like PocketBase's
 * NewTestApp). Logs are captured in memory so tests can assert that secrets never reach them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, createApp } from "../../src/app.ts";
import { type Config, parseArgs, resolveConfig } from "../../src/config.ts";
import { createLogger } from "../../src/log.ts";
import { freePort } from "./net.ts";
import { databaseFor, dropDatabaseFor, PG_SERVER } from "./pg.ts";

export interface TestApp {
  app: App;
  config: Config;
  url: string;
  wsUrl: string;
  dataDir: string;
  logs: string[];
  /** fetch relative to the app's URL. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

export interface TestAppOptions {
  /** Extra CLI flags, e.g. ["--signup", "open"]. */
  flags?: string[];
  env?: Record<string, string>;
  dataDir?: string;
  now?: () => number;
  /** Keep the data dir after stop (restart tests). */
  keepDataDir?: boolean;
  /** "defaults": the operator policy as shipped (security tests); else opened wide (OPEN_POLICY). */
  policy?: "open" | "defaults";
}

/** Removes every container and volume a test instance created (they carry its instance label). */
export function removeInstanceWorkspaces(instanceId: string) {
  const filter = `label=runcell.instance=${instanceId}`;
  const ids = (args: string[]) => Bun.spawnSync(["docker", ...args], { stdout: "pipe", stderr: "ignore" }).stdout.toString().split(/\s+/).filter(Boolean);
  const containers = ids(["ps", "-aq", "--filter", filter]);
  if (containers.length) Bun.spawnSync(["docker", "rm", "-f", "-v", ...containers], { stdout: "ignore", stderr: "ignore" });
  const volumes = ids(["volume", "ls", "-q", "--filter", filter]);
  if (volumes.length) Bun.spawnSync(["docker", "volume", "rm", "-f", ...volumes], { stdout: "ignore", stderr: "ignore" });
}

export function tempDir(prefix = "runcell-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * The operator policy opened wide for the suite at large (its own tests in test/security/ start
 * apps with the defaults): models on loopback (the local provider servers), any image and network,
 * the schema's own bounds as ceilings.
 */
export const OPEN_POLICY = [
  "--allow-model-hosts", "127.0.0.1,localhost",
  "--allowed-images", "*",
  "--allow-bridge-network",
  "--max-profiles-per-user", "1000000",
  "--max-running-workspaces-per-user", "100000",
  "--max-memory-mb", "262144",
  "--max-cpus", "64",
  "--max-pids", "65536",
  "--max-profile-concurrency", "1000",
  "--max-turns", "1000",
  "--max-task-budget-usd", "10000",
  "--max-sockets-per-caller", "10000",
  // Seconds-level schedules (the scheduler's tests fire every second or two).
  "--min-schedule-interval", "1s",
];

/**
 * The test configuration; `database` (a PostgreSQL URL: `await databaseFor(dataDir)` in the
 * PostgreSQL pass) puts the app's state there instead of the data dir's SQLite file.
 */
export function testConfig(opts: TestAppOptions & { port: number; dataDir: string; database?: string | null }): Config {
  const flags = [
    "--http", `127.0.0.1:${opts.port}`,
    "--data-dir", opts.dataDir,
    ...(opts.database ? ["--database", opts.database] : []),
    "--rate-limit-per-minute", "1000000",
    "--rate-limit-burst", "1000000",
    "--workspace-image", process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest",
    "--allow-private-webhooks",
    "--log-level", "debug",
    ...(opts.policy === "defaults" ? [] : OPEN_POLICY),
    ...(opts.flags ?? []),
  ];
  return resolveConfig(parseArgs(flags).flags, opts.env ?? {});
}

export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = opts.dataDir ?? tempDir();
  const port = await freePort();
  // The PostgreSQL pass (RUNCELL_TEST_POSTGRES): every app on a database of its own.
  const database = PG_SERVER ? await databaseFor(dataDir) : null;
  const config = testConfig({ ...opts, port, dataDir, database });
  const logs: string[] = [];
  const app = await createApp(config, { logger: createLogger({ level: "debug", sink: (l) => logs.push(l) }), now: opts.now });
  await app.start();
  const url = app.url;
  return {
    app,
    config,
    url,
    wsUrl: url.replace(/^http/, "ws"),
    dataDir,
    logs,
    fetch: (path, init) => fetch(url + path, init),
    async stop() {
      const instance = app.services.workspaces.instanceId;
      await app.stop();
      if (!opts.keepDataDir) removeInstanceWorkspaces(instance);
      if (!opts.keepDataDir && !opts.dataDir) {
        rmSync(dataDir, { recursive: true, force: true });
        await dropDatabaseFor(dataDir);
      }
    },
  };
}
