/**
 * The PostgreSQL mirror of src/db/schema.ts: the same tables under the same export names, the same
 * columns in the same order, the same constraints, indexes and foreign keys, in drizzle's pg-core.
 * test/db/pg-schema.test.ts keeps the two identical (without a database): change both together.
 *
 * The type mapping (checked by that test):
 *   text                          → text (enums: text({ enum }), the same const arrays)
 *   integer()                     → bigint({ mode: "number" }) (milliseconds since the epoch exceed int4;
 *                                   counts use it too, so every integer is the same width)
 *   integer({ mode: "boolean" })  → boolean()
 *   integer().primaryKey({ autoIncrement: true }) → bigint identity (see autoId below)
 *   real()                        → doublePrecision()
 *   text({ mode: "json" })        → jsonb (jsonbValue below), the same $type; sql`'[]'` defaults become sql`'[]'::jsonb`
 *   blob({ mode: "buffer" })      → bytea (customType below)
 *
 * The enumerations and the JSON column types are imported from src/db/schema.ts, never redefined.
 */
import { sql } from "drizzle-orm";
import { bigint, boolean, customType, doublePrecision, index, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { storableJson } from "./storable.ts";
import {
  AUDIT_ACTORS,
  INTEGRATION_TYPES,
  MISSED_RUN_STATUSES,
  NETWORKS,
  NOTIFICATION_SOURCES,
  NOTIFICATION_STATUSES,
  OAUTH_PROVIDERS,
  ROLES,
  RUN_TRIGGERS,
  STEP_ROLES,
  STOP_REASONS,
  TASK_STATUSES,
  URGENCIES,
  WORKSPACE_STATUSES,
} from "../schema.ts";
import type {
  EnvValue,
  McpServerConfig,
  ModelConfig,
  PolicyOverrides,
  ProfileLimits,
  RepositoryConfig,
  RunningExec,
  WorkspaceSpec,
} from "../schema.ts";

/** SQLite's blob({ mode: "buffer" }): a Buffer in, a Buffer out (drivers may hand back a plain Uint8Array). */
const bytea = customType<{ data: Buffer; driverData: Buffer | Uint8Array }>({
  dataType: () => "bytea",
  toDriver: (value) => value,
  fromDriver: (value) => (Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)),
});

const id = () => text().primaryKey();
/** SQLite's integer(): 64-bit, read as a JS number. */
const int = () => bigint({ mode: "number" });
const ms = () => int();
const createdAt = () => int().notNull();
const updatedAt = () => int().notNull();
const bool = () => boolean();
/**
 * jsonb, sent as JSON text cast to jsonb (`$n::text::jsonb`). drizzle's own jsonb column
 * serializes the value and Bun's SQL client then encodes that string as JSON again, which stores a
 * JSON *string* (jsonb_typeof 'string') no `->>` can look into (drizzle-orm #4942, #4385); handing
 * Bun the value itself fails for numbers and booleans, which it sends typed as such. Bun hands
 * jsonb back parsed.
 */
const jsonbValue = customType<{ data: unknown; driverData: unknown }>({
  dataType: () => "jsonb",
  toDriver: (value) => sql`${storableJson(JSON.stringify(value))}::text::jsonb`,
  fromDriver: (value) => value,
});
const json = <T>() => jsonbValue().$type<T>();
/**
 * SQLite's `integer().primaryKey({ autoIncrement: true })` (INTEGER PRIMARY KEY AUTOINCREMENT): the
 * database numbers rows it is not given an id for, increasing, never reusing one. An identity column
 * does the same; BY DEFAULT, like SQLite, still accepts an explicit id (a data copy keeps its ids, then
 * moves the sequence past them with setval). runcell never inserts one.
 */
const autoId = () => int().primaryKey().generatedByDefaultAsIdentity();

// ---------------------------------------------------------------------------------------------
// Platform

export const settings = pgTable("settings", {
  key: text().primaryKey(),
  value: json<unknown>().notNull(),
  updated_at: updatedAt(),
});

/**
 * The servers sharing this database (issue 17's replicas): each writes its row at start and renews
 * `seen_at` while it runs (src/replicas/registry.ts); a row not seen for a few heartbeats is a replica
 * that is gone. On SQLite there is only ever the one server.
 */
export const replicas = pgTable("replicas", {
  id: id(),
  hostname: text().notNull(),
  version: text().notNull(),
  started_at: ms().notNull(),
  seen_at: ms().notNull(),
});

// ---------------------------------------------------------------------------------------------
// Identity

export const users = pgTable("users", {
  id: id(),
  email: text().notNull().unique(),
  name: text().notNull(),
  password_hash: text(),
  role: text({ enum: ROLES }).notNull().default("user"),
  disabled: bool().notNull().default(false),
  email_verified: bool().notNull().default(false),
  policy: json<PolicyOverrides>(),
  created_at: createdAt(),
  updated_at: updatedAt(),
});

export const oauthAccounts = pgTable(
  "oauth_accounts",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    provider: text({ enum: OAUTH_PROVIDERS }).notNull(),
    provider_account_id: text().notNull(),
    email: text(),
    created_at: createdAt(),
  },
  (t) => [uniqueIndex("oauth_accounts_provider_account").on(t.provider, t.provider_account_id), index("oauth_accounts_user").on(t.user_id)],
);

export const loginSessions = pgTable(
  "login_sessions",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    token_hash: text().notNull(),
    expires_at: ms().notNull(),
    absolute_expires_at: ms().notNull(),
    refreshed_at: ms().notNull(),
    ip: text(),
    user_agent: text(),
    created_at: createdAt(),
  },
  (t) => [uniqueIndex("login_sessions_token").on(t.token_hash), index("login_sessions_user").on(t.user_id)],
);

export const apiTokens = pgTable(
  "api_tokens",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    name: text().notNull(),
    lookup: text().notNull(),
    token_hash: text().notNull(),
    created_at: createdAt(),
    last_used_at: ms(),
  },
  (t) => [uniqueIndex("api_tokens_lookup").on(t.lookup), index("api_tokens_user").on(t.user_id, t.id)],
);

// ---------------------------------------------------------------------------------------------
// Agent configuration

export const secrets = pgTable(
  "secrets",
  {
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    name: text().notNull(),
    ciphertext: bytea().notNull(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [primaryKey({ columns: [t.user_id, t.name] })],
);

export const profiles = pgTable(
  "profiles",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    name: text().notNull(),
    system_prompt: text().notNull(),
    model: json<ModelConfig>().notNull(),
    image: text().notNull(),
    tools: json<string[]>().notNull(),
    env: json<Record<string, EnvValue>>().notNull(),
    limits: json<ProfileLimits>().notNull(),
    network: text({ enum: NETWORKS }).notNull(),
    warm_pool: int().notNull().default(0),
    mcp_servers: json<McpServerConfig[]>().notNull().default(sql`'[]'::jsonb`),
    allowed_tools: json<string[]>().notNull().default(sql`'[]'::jsonb`),
    repositories: json<RepositoryConfig[]>().notNull().default(sql`'[]'::jsonb`),
    host_labels: json<string[]>().notNull().default(sql`'[]'::jsonb`),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("profiles_user").on(t.user_id, t.id)],
);

// ---------------------------------------------------------------------------------------------
// Sessions, workspaces, tasks, transcript

export const sessions = pgTable(
  "sessions",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    title: text(),
    input_tokens: int().notNull().default(0),
    output_tokens: int().notNull().default(0),
    cost_usd: doublePrecision().notNull().default(0),
    seq_reserved: int().notNull().default(0),
    repositories: json<RepositoryConfig[]>(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("sessions_user").on(t.user_id, t.id)],
);

export const workspaces = pgTable(
  "workspaces",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    name: text().notNull(),
    image: text().notNull(),
    host: text().notNull().default("default"),
    docker_id: text(),
    volume: text().notNull(),
    spec: json<WorkspaceSpec>().notNull(),
    disk_bytes: int(),
    disk_checked_at: ms(),
    status: text({ enum: WORKSPACE_STATUSES }).notNull(),
    error: text(),
    last_active_at: ms().notNull(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [
    uniqueIndex("workspaces_session").on(t.session_id),
    index("workspaces_user").on(t.user_id, t.id),
    index("workspaces_profile_status").on(t.profile_id, t.status),
    index("workspaces_host_status").on(t.host, t.status),
  ],
);

export const tasks = pgTable(
  "tasks",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    playbook_id: text(),
    mode: text().notNull().default("session"),
    prompt: text().notNull(),
    status: text({ enum: TASK_STATUSES }).notNull(),
    error_code: text(),
    error_message: text(),
    result_text: text(),
    input_tokens: int().notNull().default(0),
    output_tokens: int().notNull().default(0),
    cost_usd: doublePrecision().notNull().default(0),
    turns: int().notNull().default(0),
    max_turns: int().notNull(),
    max_budget_usd: doublePrecision().notNull(),
    pending_tool_use_id: text(),
    trigger: text({ enum: RUN_TRIGGERS }),
    max_continuations: int().notNull().default(0),
    server_paid: bool().notNull().default(false),
    scheduled_for: ms(),
    answer_timeout_ms: int(),
    answer_due_at: ms(),
    created_at: createdAt(),
    started_at: ms(),
    finished_at: ms(),
    /** The replica running it (src/agents/leases.ts): its id, and until when the lease holds unless renewed. */
    lease_owner: text(),
    lease_expires_at: ms(),
    running_exec: json<RunningExec>(),
    stop_reason: text({ enum: STOP_REASONS }),
    turn_repeats: int().notNull().default(0),
  },
  (t) => [
    index("tasks_user").on(t.user_id, t.id),
    index("tasks_session").on(t.session_id, t.id),
    index("tasks_status").on(t.status),
    index("tasks_playbook").on(t.playbook_id, t.id),
    index("tasks_answer_due").on(t.answer_due_at),
  ],
);

/**
 * What the tasks of deleted sessions used, a row per task, written in the transaction that deletes
 * them (DELETE /v1/sessions/:id): the monthly spend cap and GET /v1/usage add these rows to the
 * live tasks', so deleting a session never lowers a user's spend. The task's creation time is kept
 * as is (not a day bucket) because a usage report's range may start and end at any instant.
 * Removed only with the user.
 */
export const deletedTaskUsage = pgTable(
  "deleted_task_usage",
  {
    task_id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    server_paid: bool().notNull(),
    input_tokens: int().notNull(),
    output_tokens: int().notNull(),
    cost_usd: doublePrecision().notNull(),
    created_at: createdAt(),
    deleted_at: ms().notNull(),
  },
  (t) => [index("deleted_task_usage_user").on(t.user_id, t.created_at)],
);

export const messages = pgTable(
  "messages",
  {
    id: autoId(),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    task_id: text().notNull(),
    role: text({ enum: STEP_ROLES }).notNull(),
    content: json<unknown>().notNull(),
    created_at: createdAt(),
  },
  (t) => [index("messages_session").on(t.session_id, t.id)],
);

export const events = pgTable(
  "events",
  {
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    seq: int().notNull(),
    type: text().notNull(),
    task_id: text(),
    frame: text().notNull(),
    created_at: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.session_id, t.seq] })],
);

/** No longer written or read (see src/db/schema.ts debugEvents). */
export const debugEvents = pgTable(
  "debug_events",
  {
    id: autoId(),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    after_seq: int().notNull(),
    type: text().notNull(),
    task_id: text(),
    frame: text().notNull(),
    created_at: createdAt(),
  },
  (t) => [index("debug_events_session").on(t.session_id, t.after_seq)],
);

// ---------------------------------------------------------------------------------------------
// Audit

export const auditLog = pgTable(
  "audit_log",
  {
    id: id(),
    at: ms().notNull(),
    actor: text({ enum: AUDIT_ACTORS }).notNull(),
    user_id: text(),
    action: text().notNull(),
    target_id: text(),
    ip: text(),
    details: json<Record<string, unknown>>(),
  },
  (t) => [index("audit_log_user").on(t.user_id, t.id), index("audit_log_action").on(t.action, t.id), index("audit_log_at").on(t.at)],
);

// ---------------------------------------------------------------------------------------------
// Playbooks

export const playbooks = pgTable(
  "playbooks",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    name: text().notNull(),
    prompt: text().notNull(),
    max_continuations: int().notNull().default(0),
    max_turns: int(),
    max_budget_usd: doublePrecision(),
    schedule: text(),
    timezone: text().notNull().default("UTC"),
    enabled: bool().notNull().default(true),
    answer_timeout_ms: int(),
    trigger_ciphertext: bytea().notNull(),
    next_run_at: ms(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("playbooks_user").on(t.user_id, t.id), index("playbooks_due").on(t.next_run_at)],
);

export const missedRuns = pgTable(
  "playbook_missed_runs",
  {
    id: autoId(),
    playbook_id: text().notNull().references(() => playbooks.id, { onDelete: "cascade" }),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    trigger: text({ enum: RUN_TRIGGERS }).notNull(),
    status: text({ enum: MISSED_RUN_STATUSES }).notNull(),
    error_code: text(),
    error_message: text(),
    scheduled_for: ms(),
    created_at: createdAt(),
  },
  (t) => [index("playbook_missed_runs_playbook").on(t.playbook_id, t.id)],
);

// ---------------------------------------------------------------------------------------------
// Notifications

export const integrations = pgTable("integrations", {
  id: id(),
  user_id: text().notNull().unique().references(() => users.id, { onDelete: "cascade" }),
  type: text({ enum: INTEGRATION_TYPES }).notNull(),
  url: text().notNull(),
  secret_ciphertext: bytea(),
  created_at: createdAt(),
  updated_at: updatedAt(),
});

export const notificationLog = pgTable(
  "notification_log",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    integration_id: text(),
    source: text({ enum: NOTIFICATION_SOURCES }).notNull(),
    urgency: text({ enum: URGENCIES }).notNull(),
    task_id: text(),
    playbook_id: text(),
    payload: text().notNull(),
    status: text({ enum: NOTIFICATION_STATUSES }).notNull(),
    attempts: int().notNull().default(0),
    max_attempts: int().notNull(),
    next_attempt_at: ms(),
    lease_id: text(),
    lease_expires_at: ms(),
    last_error: text(),
    created_at: createdAt(),
    delivered_at: ms(),
    failed_at: ms(),
  },
  (t) => [index("notification_log_user").on(t.user_id, t.id), index("notification_log_due").on(t.status, t.next_attempt_at),
    // The claim walks the webhooks with pending rows, then each one's oldest due rows (outbox.ts claimSql).
    index("notification_log_claim").on(t.status, t.integration_id, t.next_attempt_at, t.id),
  ],
);

export const notificationAttempts = pgTable(
  "notification_attempts",
  {
    id: autoId(),
    notification_id: text().notNull().references(() => notificationLog.id, { onDelete: "cascade" }),
    attempt: int().notNull(),
    started_at: ms().notNull(),
    duration_ms: int().notNull(),
    status_code: int(),
    error: text(),
  },
  (t) => [index("notification_attempts_ntf").on(t.notification_id)],
);
