/**
 * The composition root. createApp(config) opens the data dir and the database (migrating it),
 * builds every service once (src/services.ts), mounts the routes, and owns everything long-lived:
 * the HTTP/WebSocket server and the background workers. start() and stop() are the only
 * lifecycle entry points; stop() is what SIGTERM runs.
 */
import type { Server } from "bun";
import type { Config } from "./config.ts";
import { openDatabase } from "./db/client.ts";
import { prepareDataDir } from "./db/data-dir.ts";
import { migrate } from "./db/migrate.ts";
import { createRouter } from "./http/router.ts";
import { createPipeline } from "./http/pipeline.ts";
import { mountRoutes } from "./http/routes/index.ts";
import { createLogger, type Logger } from "./log.ts";
import { buildServices, type Services } from "./services.ts";
import { VERSION } from "./version.ts";
import { CLOSE_GOING_AWAY } from "./ws/connection.ts";

export interface AppOptions {
  logger?: Logger;
  /** Milliseconds clock for expiry and scheduling logic (tests move time). */
  now?: () => number;
}

export interface App {
  readonly config: Config;
  readonly services: Services;
  /** Base URL of the running server (after start). */
  readonly url: string;
  readonly server: Server<unknown> | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const log = opts.logger ?? createLogger({ level: config.logLevel });
  const dbPath = prepareDataDir(config.dataDir);
  const handle = openDatabase(dbPath);
  try {
    const { applied } = migrate(handle.sqlite);
    if (applied.length) log.info("database migrated", { applied, path: dbPath });
  } catch (e) {
    handle.close();
    throw e;
  }

  const services = buildServices({ config, log, handle, now: opts.now ?? Date.now });
  const router = mountRoutes(createRouter(log, services.adminPassword), services);
  const pipeline = createPipeline({
    config,
    log,
    limiter: services.limiter,
    authenticate: (req, path) => services.authenticate(req, path),
    handle: (req) => router.handle(req),
    upgrade: (req, server, ctx) => services.stream.upgrade(req, server, ctx),
    onResponse: (status) => services.httpMetrics.observe(status),
  });

  let server: Server<unknown> | null = null;
  let url = "";
  let stopping: Promise<void> | null = null;

  return {
    config,
    services,
    get url() {
      return url;
    },
    get server() {
      return server;
    },
    async start() {
      server = Bun.serve({
        hostname: config.host,
        port: config.port,
        development: false,
        // Our own parser caps JSON bodies at 1 MiB with a proper 413; this is only the hard stop.
        maxRequestBodySize: 8 * 1024 * 1024,
        idleTimeout: 60,
        fetch: pipeline,
        websocket: services.stream.handlers,
        error(err) {
          log.error("server error", { err });
          return new Response(JSON.stringify({ error: "Internal server error", code: "INTERNAL_ERROR" }), { status: 500, headers: { "content-type": "application/json" } });
        },
      });
      url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${server.port}`;
      await services.start();
      log.info("runcell listening", { version: VERSION, url, public_url: config.publicUrl, data_dir: config.dataDir });
    },
    stop() {
      stopping ??= (async () => {
        log.info("shutting down");
        const srv = server;
        if (srv) {
          // Stop accepting; in-flight requests get up to shutdownTimeout to finish.
          const drained = srv.stop(false);
          services.stream.closeAll(CLOSE_GOING_AWAY, "server shutting down");
          const timedOut = await Promise.race([
            drained.then(() => false),
            new Promise<boolean>((r) => setTimeout(() => r(true), config.shutdownTimeoutMs).unref?.()),
          ]);
          if (timedOut) {
            log.warn("in-flight requests did not finish in time; closing them", { timeout_ms: config.shutdownTimeoutMs });
            await srv.stop(true);
          }
        }
        await services.stop();
        handle.close();
        log.info("stopped");
      })();
      return stopping;
    },
  };
}
