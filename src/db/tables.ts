/**
 * The tables the repository layer queries, for the database this process serves. Every module that
 * runs statements imports its tables from here (row types and enumerations still come from
 * ./schema.ts): on SQLite they are ./schema.ts's tables, on PostgreSQL ./pg/schema.ts's — kept
 * column for column identical by test/db/pg-schema.test.ts, which is why the PostgreSQL tables
 * may stand in for the SQLite types the code is checked against.
 *
 * A process serves one database: `useDialect` is called once, by `openStore` (./store.ts),
 * before any service exists; asking for the other dialect later is an error, never a silent switch.
 * These are ES module live bindings: importers see the chosen tables.
 */
import * as pg from "./pg/schema.ts";
import * as lite from "./schema.ts";

export type Dialect = "sqlite" | "postgres";

export let settings = lite.settings;
export let replicas = lite.replicas;
export let users = lite.users;
export let oauthAccounts = lite.oauthAccounts;
export let loginSessions = lite.loginSessions;
export let apiTokens = lite.apiTokens;
export let secrets = lite.secrets;
export let profiles = lite.profiles;
export let sessions = lite.sessions;
export let workspaces = lite.workspaces;
export let tasks = lite.tasks;
export let deletedTaskUsage = lite.deletedTaskUsage;
export let messages = lite.messages;
export let events = lite.events;
export let debugEvents = lite.debugEvents;
export let auditLog = lite.auditLog;
export let playbooks = lite.playbooks;
export let missedRuns = lite.missedRuns;
export let integrations = lite.integrations;
export let notificationLog = lite.notificationLog;
export let notificationAttempts = lite.notificationAttempts;

/**
 * The tables a user's usage is read from: the live tasks, and what the tasks of deleted sessions
 * used (kept in deleted_task_usage). A function: the tables are the chosen dialect's.
 */
export const usageTables = () => [tasks, deletedTaskUsage] as const;

let chosen: Dialect | null = null;

/** The dialect chosen for this process (SQLite until one is chosen). */
export const dialect = (): Dialect => chosen ?? "sqlite";

/** Chooses the tables for this process's database; a second, different choice throws. */
export function useDialect(d: Dialect): void {
  if (chosen === d) return;
  if (chosen) throw new Error(`this process already serves a ${chosen} database; one process serves one database (asked for ${d})`);
  chosen = d;
  if (d === "sqlite") return;
  settings = pg.settings as unknown as typeof lite.settings;
  replicas = pg.replicas as unknown as typeof lite.replicas;
  users = pg.users as unknown as typeof lite.users;
  oauthAccounts = pg.oauthAccounts as unknown as typeof lite.oauthAccounts;
  loginSessions = pg.loginSessions as unknown as typeof lite.loginSessions;
  apiTokens = pg.apiTokens as unknown as typeof lite.apiTokens;
  secrets = pg.secrets as unknown as typeof lite.secrets;
  profiles = pg.profiles as unknown as typeof lite.profiles;
  sessions = pg.sessions as unknown as typeof lite.sessions;
  workspaces = pg.workspaces as unknown as typeof lite.workspaces;
  tasks = pg.tasks as unknown as typeof lite.tasks;
  deletedTaskUsage = pg.deletedTaskUsage as unknown as typeof lite.deletedTaskUsage;
  messages = pg.messages as unknown as typeof lite.messages;
  events = pg.events as unknown as typeof lite.events;
  debugEvents = pg.debugEvents as unknown as typeof lite.debugEvents;
  auditLog = pg.auditLog as unknown as typeof lite.auditLog;
  playbooks = pg.playbooks as unknown as typeof lite.playbooks;
  missedRuns = pg.missedRuns as unknown as typeof lite.missedRuns;
  integrations = pg.integrations as unknown as typeof lite.integrations;
  notificationLog = pg.notificationLog as unknown as typeof lite.notificationLog;
  notificationAttempts = pg.notificationAttempts as unknown as typeof lite.notificationAttempts;
}
