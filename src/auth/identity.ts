/**
 * Wires the identity and operator services that sit on top of the core ones (users, sessions,
 * tokens, accounts, admin password): run-time configuration, first-run setup links, OAuth, stats
 * and HTTP metrics; the hooks that make a disabled user lose every way in; and the background
 * work (admin password from file/env at start, throttle sweep, hourly purge of expired sessions).
 * Called once from buildServices (src/services.ts).
 */
import type { Database } from "bun:sqlite";
import { readFileSync, statSync } from "node:fs";
import { HttpMetrics } from "../admin/metrics.ts";
import type { AdminPassword } from "../admin/password.ts";
import { RuntimeConfig } from "../admin/runtime-config.ts";
import { Stats } from "../admin/stats.ts";
import { type Config, ConfigError } from "../config.ts";
import type { DB } from "../db/client.ts";
import type { RateLimiter } from "../lib/ratelimit.ts";
import type { Settings } from "../db/settings.ts";
import type { Logger } from "../log.ts";
import { intervalWorker, type Worker } from "../lib/worker.ts";
import type { Accounts } from "./accounts.ts";
import { OAuth } from "./oauth.ts";
import type { LoginSessions } from "./sessions.ts";
import { SetupLinks } from "./setup.ts";
import type { LoginThrottle } from "./throttle.ts";
import type { ApiTokens } from "./tokens.ts";
import type { Users } from "./users.ts";

export interface Identity {
  /** PATCH /admin/config: rate limit, default concurrency, sign-up; persisted, applied live. */
  runtimeConfig: RuntimeConfig;
  /** First-run `/setup#<token>` links. */
  setup: SetupLinks;
  oauth: OAuth;
  stats: Stats;
  /** HTTP responses by status class (fed by the pipeline, read by /metrics). */
  httpMetrics: HttpMetrics;
}

interface Deps {
  config: Config;
  log: Logger;
  now: () => number;
  db: DB;
  sqlite: Database;
  settings: Settings;
  limiter: RateLimiter;
  users: Users;
  tokens: ApiTokens;
  loginSessions: LoginSessions;
  accounts: Accounts;
  adminPassword: AdminPassword;
  throttle: LoginThrottle;
  workers: Worker[];
}

/** The admin password to store at start: --admin-password-file wins over RUNCELL_ADMIN_PASSWORD. */
export function configuredAdminPassword(config: Config, log?: Logger): { password: string; source: string } | null {
  if (config.adminPasswordFile) {
    const file = config.adminPasswordFile;
    const password = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    try {
      if ((statSync(file).mode & 0o077) !== 0) log?.warn("the admin password file is readable by other users: chmod 600 it", { file });
    } catch {
      // Unreadable metadata is not worth failing the start for.
    }
    return { password, source: "--admin-password-file" };
  }
  if (config.adminPassword) return { password: config.adminPassword, source: "RUNCELL_ADMIN_PASSWORD" };
  return null;
}

export function buildIdentity(d: Deps): Identity {
  const runtimeConfig = new RuntimeConfig(d.config, d.settings, d.limiter, d.log);
  const setup = new SetupLinks(d.db, d.users, d.accounts, d.config.publicUrl, d.now);
  const oauth = new OAuth(d.config, d.db, d.users, d.accounts, d.now, d.log);
  const stats = new Stats(d.sqlite, d.now);
  const httpMetrics = new HttpMetrics();

  // A disabled user loses every way in at once: their cookie sessions are deleted (which also
  // closes their cookie WebSockets through onRevokeUser) and their cached token verifications are
  // dropped; the per-request checks refuse their tokens from the next request on.
  d.users.onDisabled.push((userId) => {
    d.loginSessions.deleteAllForUser(userId);
    d.tokens.evictUser(userId);
    d.log.info("user disabled: sessions revoked", { user_id: userId });
  });

  d.workers.push({
    name: "admin-password",
    async start() {
      let configured;
      try {
        configured = configuredAdminPassword(d.config, d.log);
        if (!configured) {
          if (!d.adminPassword.isSet()) d.log.warn("no admin password is set: /admin/* answers 401 until `runcell admin set-password` or --admin-password-file");
          return;
        }
        const r = await d.adminPassword.ensure(configured.password);
        if (r === "set") d.log.info("admin password stored", { source: configured.source });
      } catch (e) {
        const source = configured?.source ?? (d.config.adminPasswordFile ? `--admin-password-file ${d.config.adminPasswordFile}` : "RUNCELL_ADMIN_PASSWORD");
        throw new ConfigError(`admin password from ${source}: ${(e as Error).message}`);
      }
    },
    stop() {},
  });
  d.workers.push(intervalWorker(d.log, "login-throttle-sweep", 60_000, () => d.throttle.sweep()));
  d.workers.push(
    intervalWorker(d.log, "login-session-purge", 3_600_000, () => {
      const n = d.loginSessions.purgeExpired();
      if (n) d.log.info("expired login sessions purged", { count: n });
    }),
  );

  return { runtimeConfig, setup, oauth, stats, httpMetrics };
}
