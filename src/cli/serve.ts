import { createApp } from "../app.ts";
import { ConfigError, parseArgs, resolveConfig } from "../config.ts";
import { NewerDatabaseError } from "../db/migrate.ts";
import type { Services } from "../services.ts";
import { type Command, failUsage } from "./command.ts";

/**
 * First run: while no account exists, a fresh one-time setup link at every start. Printed on
 * stdout directly, not through the logger (which redacts `/setup#…`).
 */
function printSetupLink(s: Services) {
  const link = s.setup.issue();
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
  examples: [
    "runcell serve",
    "runcell serve --http 0.0.0.0:7420 --public-url https://agents.example.com --trust-proxy",
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
    let app;
    try {
      app = await createApp(config);
      await app.start();
    } catch (e) {
      if (e instanceof NewerDatabaseError || (e as { code?: string }).code === "EADDRINUSE" || (e as { code?: string }).code === "EACCES") {
        console.error(`runcell serve: ${(e as Error).message}`);
        return 1;
      }
      if (e instanceof ConfigError) {
        console.error(`runcell serve: ${e.message}`);
        await app?.stop().catch(() => {});
        return 2;
      }
      throw e;
    }
    const started = app;
    printSetupLink(started.services);
    return await new Promise<number>((resolve) => {
      const shutdown = (signal: string) => {
        process.off("SIGTERM", onTerm);
        process.off("SIGINT", onInt);
        started.services.log.info("signal received", { signal });
        started.stop().then(
          () => resolve(0),
          (e) => {
            console.error(`runcell serve: shutdown failed: ${(e as Error).message}`);
            resolve(1);
          },
        );
      };
      const onTerm = () => shutdown("SIGTERM");
      const onInt = () => shutdown("SIGINT");
      process.on("SIGTERM", onTerm);
      process.on("SIGINT", onInt);
    });
  },
};
