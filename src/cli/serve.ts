import { DatabaseUnavailableError } from "../db/pg/client.ts";
import { ReplicaIdInUseError } from "../replicas/registry.ts";
import { createApp } from "../app.ts";
import { ConfigError, parseArgs, resolveConfig } from "../config.ts";
import { acquireDataDirLock, type DataDirLock } from "../db/lock.ts";
import { NewerDatabaseError } from "../db/migrate.ts";
import { checkConfiguredAdminPassword } from "../admin/password.ts";
import { createLogger } from "../log.ts";
import { Sealer, VaultKeyError } from "../lib/sealer.ts";
import type { Services } from "../services.ts";
import { upgradeGuard } from "./backup.ts";
import { type Command, failUsage } from "./command.ts";

/**
 * First run: while no account exists, a fresh one-time setup link at every start. Printed on
 * stdout directly, not through the logger (which redacts `/setup#…`).
 */
async function printSetupLink(s: Services) {
  const link = await s.setup.issue();
  if (!link) return;
  process.stdout.write(
    `\nNo account exists yet. Open this one-time link within 30 minutes to create the first (admin) account:\n\n    ${link.url}\n\n` +
      `(Expires ${link.expires_at}; a restart prints a new one. Or: runcell admin create-user --email you@example.com --role admin)\n\n`,
  );
}

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the runcell server: HTTP API, WebSocket stream, dashboard and background workers.",
  usage: "runcell serve [flags]",
  details: `  Holds <data dir>/runcell.lock (flock) while it runs: a second serve, migrate or restore on the
  same data dir exits 1 naming this process's pid. When this binary has migrations to apply to an
  existing database, it first writes <data dir>/backups/pre-migrate-<schema>-<timestamp>.tar.gz
  (the last 3 are kept), then applies them in one transaction; a database written by a newer
  runcell is refused (exit 1), untouched. With --database postgres://… there is no automatic
  backup (take a pg_dump first) and each migration runs in its own transaction, under an advisory
  lock; an older single-server runcell still serving that database makes it refuse (exit 1).`,
  examples: [
    "runcell serve",
    // Loopback: with --trust-proxy only the proxy may reach runcell (README, Behind a reverse proxy).
    "runcell serve --http 127.0.0.1:7420 --public-url https://agents.example.com --trust-proxy",
    "RUNCELL_SIGNUP=open runcell serve --data-dir /var/lib/runcell",
  ],
  configFlags: true,
  async run(argv) {
    let config;
    try {
      config = resolveConfig(parseArgs(argv).flags);
    } catch (e) {
      return failUsage("serve", e);
    }
    // Settings read from files are checked now too: a bad one exits 2 before anything is migrated or made.
    try {
      checkConfiguredAdminPassword(config);
      // The --vault-key-file too: a missing, unreadable or malformed key leaves no data dir nor lock behind.
      if (config.vaultKeyFile) Sealer.fromFile(config.vaultKeyFile);
    } catch (e) {
      console.error(`runcell serve: ${(e as Error).message}`);
      return 2;
    }
    // One owner per data dir: taken before anything reads or writes it, held until exit (the
    // kernel drops it if the process dies). A second server exits here, having touched nothing.
    let lock: DataDirLock;
    try {
      lock = acquireDataDirLock(config.dataDir);
    } catch (e) {
      console.error(`runcell serve: ${(e as Error).message}`);
      return 1;
    }
    // Upgrades: refuse a newer database; back up an older one before it is migrated.
    try {
      const log = createLogger({ level: config.logLevel }).child({ component: "upgrade" });
      await upgradeGuard(config.dataDir, (msg, fields) => (fields?.warning ? log.warn(msg, fields) : log.info(msg, fields)), config.vaultKeyFile);
    } catch (e) {
      // upgradeGuard's errors say what failed (a newer or unreadable database, the backup).
      console.error(`runcell serve: ${(e as Error).message}`);
      lock.release();
      return 1;
    }
    // Listening from here on: a SIGTERM while the app starts (its workers can take a moment) waits
    // for the start, then shuts down cleanly, instead of the default action killing the process.
    let signalled: string | null = null;
    let onSignal: (signal: string) => void = (signal) => void (signalled ??= signal);
    const onTerm = () => onSignal("SIGTERM");
    const onInt = () => onSignal("SIGINT");
    const unlisten = () => {
      process.off("SIGTERM", onTerm);
      process.off("SIGINT", onInt);
    };
    process.on("SIGTERM", onTerm);
    process.on("SIGINT", onInt);
    let app;
    try {
      app = await createApp(config);
      await app.start();
    } catch (e) {
      unlisten();
      if (e instanceof VaultKeyError) {
        // A configuration error (the key file named is missing or malformed): systemd does not restart it.
        console.error(`runcell serve: ${e.message}`);
        lock.release();
        return 2;
      }
      if (e instanceof NewerDatabaseError || e instanceof DatabaseUnavailableError || e instanceof ReplicaIdInUseError || (e as { code?: string }).code === "EADDRINUSE" || (e as { code?: string }).code === "EACCES") {
        console.error(`runcell serve: ${(e as Error).message}`);
        lock.release();
        return 1;
      }
      if (e instanceof ConfigError) {
        console.error(`runcell serve: ${e.message}`);
        await app?.stop().catch(() => {});
        lock.release();
        return 2;
      }
      lock.release();
      throw e;
    }
    const started = app;
    await printSetupLink(started.services);
    return await new Promise<number>((resolve) => {
      const shutdown = (signal: string) => {
        unlisten();
        started.services.log.info("signal received", { signal });
        started.stop().then(
          () => {
            lock.release();
            resolve(0);
          },
          (e) => {
            console.error(`runcell serve: shutdown failed: ${(e as Error).message}`);
            lock.release();
            resolve(1);
          },
        );
      };
      onSignal = shutdown;
      if (signalled) shutdown(signalled);
    });
  },
};
