/**
 * Builds every service exactly once, wired to each other. Route modules, the WebSocket handler
 * and the CLI receive this object; nothing else constructs services.
 */
import type { Database } from "bun:sqlite";
import type { Config } from "./config.ts";
import type { DatabaseHandle, DB } from "./db/client.ts";
import { AdminPassword } from "./admin/password.ts";
import { Accounts } from "./auth/accounts.ts";
import { buildIdentity, type Identity } from "./auth/identity.ts";
import { LoginThrottle } from "./auth/throttle.ts";
import { Authenticator } from "./auth/authenticate.ts";
import { cookieOptions, LoginSessions } from "./auth/sessions.ts";
import { ApiTokens } from "./auth/tokens.ts";
import { Users } from "./auth/users.ts";
import type { Authenticated } from "./auth/principal.ts";
import { RateLimiter } from "./lib/ratelimit.ts";
import type { Logger } from "./log.ts";
import { Sealer } from "./lib/sealer.ts";
import { Settings } from "./db/settings.ts";
import { intervalWorker, type Worker } from "./lib/worker.ts";
import { DockerEngine } from "./workspaces/docker.ts";
import { Workspaces } from "./workspaces/service.ts";
import { Profiles } from "./agents/profiles.ts";
import { Secrets } from "./vault/secrets.ts";
import { Notifications } from "./notifications/service.ts";
import type { StreamServer } from "./ws/stream.ts";
import { buildRuntime, type Runtime } from "./agents/runtime.ts";

export type { Worker } from "./lib/worker.ts";

export interface Services extends Identity, Runtime {
  config: Config;
  log: Logger;
  now: () => number;
  db: DB;
  sqlite: Database;
  settings: Settings;
  /** AES-256-GCM for secrets at rest (key file in the data dir). */
  sealer: Sealer;
  docker: DockerEngine;
  /** One hardened container + volume per session (src/workspaces/). */
  workspaces: Workspaces;
  limiter: RateLimiter;
  users: Users;
  tokens: ApiTokens;
  loginSessions: LoginSessions;
  accounts: Accounts;
  authenticator: Authenticator;
  adminPassword: AdminPassword;
  /** Failed sign-in / admin-password attempts (per account and per IP). */
  throttle: LoginThrottle;
  /** Agent profiles (src/agents/profiles.ts). */
  profiles: Profiles;
  /** The secrets vault (src/vault/secrets.ts). */
  secrets: Secrets;
  /** Webhook integrations, the notification outbox and its delivery worker (src/notifications/). */
  notifications: Notifications;
  authenticate(req: Request, path: string): Authenticated | Promise<Authenticated>;
  stream: StreamServer;
  workers: Worker[];
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function buildServices(input: { config: Config; log: Logger; handle: DatabaseHandle; now: () => number }): Services {
  const { config, log, handle, now } = input;
  const db = handle.db;
  const settings = new Settings(db);
  const sealer = Sealer.fromDataDir(config.dataDir);
  const limiter = new RateLimiter(config.rateLimit.perMinute, config.rateLimit.burst);
  const docker = new DockerEngine(config.dockerHost);
  const users = new Users(db, now);
  const tokens = new ApiTokens(db, now);
  const loginSessions = new LoginSessions(db, now);
  const throttle = new LoginThrottle(now);
  const accounts = new Accounts(config, users, loginSessions, throttle);
  const authenticator = new Authenticator(tokens, loginSessions, users, cookieOptions(config.publicUrl));
  const adminPassword = new AdminPassword(settings, now, throttle);
  const profiles = new Profiles(db, config, now);
  const secrets = new Secrets(db, sealer, log, now);
  const workspaces = new Workspaces({ db, docker, settings, sealer, log, config, now, resolveEnv: (userId, env) => secrets.resolveEnv(userId, env) });
  const notifications = new Notifications({ db, sqlite: handle.sqlite, sealer, log, now, config });

  const workers: Worker[] = [];
  const identity = buildIdentity({ config, log, now, db, sqlite: handle.sqlite, settings, limiter, users, tokens, loginSessions, accounts, adminPassword, throttle, workers });
  workers.push(intervalWorker(log, "ratelimit-sweep", 60_000, () => limiter.sweep()));
  workers.push({ name: "notification-delivery", start: () => notifications.worker.start(), stop: () => notifications.worker.stop() });
  workers.push({
    name: "docker-probe",
    start() {
      void docker.available(0);
    },
    stop() {},
  });
  workers.push(...workspaces.workers());
  // After the workspace reconciliation: resume interrupted tasks, start queued ones.
  const runtime = buildRuntime({
    log,
    now,
    db,
    sqlite: handle.sqlite,
    publicUrl: config.publicUrl,
    profiles,
    secrets,
    workspaces,
    notifications,
    authenticator,
    limiter,
    tokens,
    loginSessions,
    onUserDisabled: users.onDisabled,
    workers,
  });

  const services: Services = {
    config,
    log,
    now,
    db,
    sqlite: handle.sqlite,
    settings,
    sealer,
    docker,
    workspaces,
    limiter,
    users,
    tokens,
    loginSessions,
    accounts,
    authenticator,
    adminPassword,
    throttle,
    ...identity,
    profiles,
    secrets,
    notifications,
    ...runtime,
    authenticate: (req, path) => authenticator.authenticate(req, path),
    workers,
    async start() {
      for (const w of workers) await w.start();
    },
    async stop() {
      for (const w of [...workers].reverse()) {
        try {
          await w.stop();
        } catch (e) {
          log.error("worker failed to stop", { worker: w.name, err: e });
        }
      }
    },
  };
  return services;
}
