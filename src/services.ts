/**
 * The catalogue of domain services, as the transports (src/http routes, the src/ws stream) and
 * the tests see them. A type only: src/app.ts builds every service exactly once, in dependency
 * order, and hands this object out.
 */
import type { Database } from "bun:sqlite";
import type { Audit } from "./admin/audit.ts";
import type { Policies } from "./admin/policy.ts";
import type { UsageReports } from "./agents/usage.ts";
import type { AdminPassword } from "./admin/password.ts";
import type { Metrics } from "./admin/metrics.ts";
import type { RuntimeConfig } from "./admin/runtime-config.ts";
import type { Stats } from "./admin/stats.ts";
import type { Orchestrator } from "./agents/orchestrator.ts";
import type { RunSetup } from "./agents/run-setup.ts";
import type { GitRepos } from "./git/service.ts";
import type { McpManager } from "./mcp/manager.ts";
import type { Profiles } from "./agents/profiles.ts";
import type { SessionLifecycle } from "./agents/session-lifecycle.ts";
import type { AgentSessions } from "./agents/sessions.ts";
import type { Tasks } from "./agents/tasks.ts";
import type { Transcript } from "./agents/transcript.ts";
import type { Accounts } from "./auth/accounts.ts";
import type { DeviceCookies } from "./auth/device.ts";
import type { Authenticator } from "./auth/authenticate.ts";
import type { OAuth } from "./auth/oauth.ts";
import type { LoginSessions } from "./auth/sessions.ts";
import type { SetupLinks } from "./auth/setup.ts";
import type { LoginThrottle } from "./auth/throttle.ts";
import type { ApiTokens } from "./auth/tokens.ts";
import type { Users } from "./auth/users.ts";
import type { Config } from "./config.ts";
import type { DB } from "./db/client.ts";
import type { Settings } from "./db/settings.ts";
import type { Hub } from "./events/hub.ts";
import type { EventStore } from "./events/log.ts";
import type { Store } from "./db/store.ts";
import type { RateLimiter } from "./lib/ratelimit.ts";
import type { Bus } from "./replicas/bus.ts";
import type { Replicas } from "./replicas/registry.ts";
import type { Sealer } from "./lib/sealer.ts";
import type { Logger } from "./log.ts";
import type { Notifications } from "./notifications/service.ts";
import type { Playbooks } from "./playbooks/service.ts";
import type { Secrets } from "./vault/secrets.ts";
import type { DockerEngine } from "./workspaces/docker.ts";
import type { Workspaces } from "./workspaces/service.ts";

export interface Services {
  config: Config;
  log: Logger;
  now: () => number;
  db: DB;
  /** The bun:sqlite connection (SQLite only: tests and SQLite's own fast paths); null on PostgreSQL. */
  sqlite: Database | null;
  /** The database: its dialect, a ping, where it is. */
  store: Store;
  /** This server among the replicas sharing the database (its id, the live count). */
  replicas: Replicas;
  /** Messages to the other replicas (LISTEN/NOTIFY on PostgreSQL; nothing on SQLite). */
  bus: Bus;
  settings: Settings;
  /** AES-256-GCM for secrets at rest (key file in the data dir). */
  sealer: Sealer;
  /** Per-caller token buckets (REST requests and stream frames). */
  limiter: RateLimiter;

  // Identity (src/auth/)
  users: Users;
  tokens: ApiTokens;
  loginSessions: LoginSessions;
  /** Failed sign-in / admin-password attempts (per account and per IP). */
  throttle: LoginThrottle;
  accounts: Accounts;
  /** Known-device cookies of password sign-ins (src/auth/device.ts). */
  devices: DeviceCookies;
  authenticator: Authenticator;
  /** First-run `/setup#<token>` links. */
  setup: SetupLinks;
  oauth: OAuth;

  // Operator (src/admin/)
  adminPassword: AdminPassword;
  /** PATCH /admin/config: rate limit, default concurrency, sign-up; persisted, applied live. */
  runtimeConfig: RuntimeConfig;
  stats: Stats;
  /** The /metrics registry (prom-client): fed by the pipeline, the task queue, the webhook worker… */
  metrics: Metrics;
  /** The audit log: security-relevant actions, kept for --audit-retention (src/admin/audit.ts). */
  audit: Audit;
  /** The operator's policy and each user's use of it (src/admin/policy.ts). */
  policy: Policies;
  /** Usage reports (GET /v1/usage). */
  usage: UsageReports;

  // Agents (src/agents/, src/vault/, src/workspaces/, src/events/)
  /** The secrets vault. */
  secrets: Secrets;
  profiles: Profiles;
  docker: DockerEngine;
  /** One hardened container + volume per session. */
  workspaces: Workspaces;
  eventLog: EventStore;
  hub: Hub;
  transcript: Transcript;
  tasks: Tasks;
  agentSessions: AgentSessions;
  /** Session creation (with its workspace) and deletion. */
  sessionLifecycle: SessionLifecycle;
  /** The task queue: submit, run, cancel, answer, recover. */
  orchestrator: Orchestrator;

  /** MCP servers of running sessions (src/mcp/). */
  mcp: McpManager;
  /** Git repositories cloned into workspaces and pushed back with the vault's credential (src/git/). */
  git: GitRepos;
  /** A run's tools beyond the built-in ones: repositories, MCP tools, GitPush. */
  runSetup: RunSetup;

  /** Webhook integrations, the notification outbox and its delivery worker. */
  notifications: Notifications;

  /** Saved prompts run on demand, on a schedule, or from a trigger URL (src/playbooks/). */
  playbooks: Playbooks;
}
