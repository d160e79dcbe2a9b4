/**
 * The whole database schema. Property names are the column names (snake_case), so rows map to
 * API records without renaming. Times are integer milliseconds since the epoch; the API layer
 * turns them into ISO 8601 strings (src/lib/time.ts).
 */
import { sql } from "drizzle-orm";
import { blob, index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// ---------------------------------------------------------------------------------------------
// Enumerations: each written once, here; the columns, the API schemas (src/schema/) and the
// TypeScript types all derive from these.

export const ROLES = ["user", "admin"] as const;
export const OAUTH_PROVIDERS = ["github", "google"] as const;
export const MODEL_PROVIDERS = ["anthropic", "openai", "demo"] as const;
export const NETWORKS = ["none", "bridge"] as const;
/** `unavailable`: its Docker host stopped answering (src/workspaces/hosts.ts); stopped when the host is back. */
export const WORKSPACE_STATUSES = ["starting", "running", "stopped", "failed", "unavailable"] as const;
/** A workspace in one of these counts against its profile's concurrency. */
export const ACTIVE_WORKSPACE_STATUSES = ["starting", "running"] as const satisfies readonly WorkspaceStatus[];
export const TASK_STATUSES = ["queued", "running", "waiting_input", "completed", "failed", "cancelled"] as const;
/** A task in one of these is still to run, running, or waiting for the user's answer. */
export const ACTIVE_TASK_STATUSES = ["queued", "running", "waiting_input"] as const satisfies readonly TaskStatus[];
export const FINAL_TASK_STATUSES = ["completed", "failed", "cancelled"] as const satisfies readonly TaskStatus[];
/** How a task came to run: null for a task submitted to a session, else how its playbook ran. */
export const RUN_TRIGGERS = ["manual", "schedule", "hook"] as const;
/**
 * Why a model answer ended, as runcell names it for every provider (src/agents/providers: OpenAI's
 * `length` is `max_tokens`, `content_filter` is `refusal`; docs/providers.md "Stop reasons").
 */
export const STOP_REASONS = ["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"] as const;
/** A playbook run that never became a task: skipped (the previous run was still going) or refused (a limit). */
export const MISSED_RUN_STATUSES = ["skipped", "failed"] as const;
/** Steps of the model conversation; `chain` starts a fresh model context (a playbook's continuation). */
export const STEP_ROLES = ["user", "assistant", "tool_result", "chain"] as const;
export const INTEGRATION_TYPES = ["webhook"] as const;
export const NOTIFICATION_SOURCES = ["agent", "platform"] as const;
export const URGENCIES = ["low", "normal", "high"] as const;
export const NOTIFICATION_STATUSES = ["pending", "delivered", "failed"] as const;
export const AUDIT_ACTORS = ["user", "admin", "system", "anonymous"] as const;

export type Role = (typeof ROLES)[number];
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];
export type Network = (typeof NETWORKS)[number];
export type WorkspaceStatus = (typeof WORKSPACE_STATUSES)[number];
export type TaskStatus = (typeof TASK_STATUSES)[number];
export type RunTrigger = (typeof RUN_TRIGGERS)[number];
export type StopReason = (typeof STOP_REASONS)[number];
export type Urgency = (typeof URGENCIES)[number];
export type NotificationSource = (typeof NOTIFICATION_SOURCES)[number];
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

const id = () => text().primaryKey();
const ms = () => integer();
const createdAt = () => integer().notNull();
const updatedAt = () => integer().notNull();
const bool = () => integer({ mode: "boolean" });
const json = <T>() => text({ mode: "json" }).$type<T>();

// ---------------------------------------------------------------------------------------------
// Platform

/** Key/value settings the operator changes at run time (admin password hash, /admin/config…). */
export const settings = sqliteTable("settings", {
  key: text().primaryKey(),
  value: json<unknown>().notNull(),
  updated_at: updatedAt(),
});

/**
 * The servers sharing this database (issue 17's replicas): each writes its row at start and renews
 * `seen_at` while it runs (src/replicas/registry.ts); a row not seen for a few heartbeats is a replica
 * that is gone. On SQLite there is only ever the one server.
 */
export const replicas = sqliteTable("replicas", {
  id: id(),
  hostname: text().notNull(),
  version: text().notNull(),
  started_at: ms().notNull(),
  seen_at: ms().notNull(),
});

// ---------------------------------------------------------------------------------------------
// Identity

export const users = sqliteTable("users", {
  id: id(),
  email: text().notNull().unique(),
  name: text().notNull(),
  /** argon2id PHC string; null for accounts that only sign in through OAuth. */
  password_hash: text(),
  role: text({ enum: ROLES }).notNull().default("user"),
  disabled: bool().notNull().default(false),
  email_verified: bool().notNull().default(false),
  /** The operator's overrides of the policy for this user (PATCH /admin/users/:id); null: the defaults. */
  policy: json<PolicyOverrides>(),
  created_at: createdAt(),
  updated_at: updatedAt(),
});

export const oauthAccounts = sqliteTable(
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

/** Cookie sessions. Only the SHA-256 of the cookie's token is stored. */
export const loginSessions = sqliteTable(
  "login_sessions",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    token_hash: text().notNull(),
    /** Idle expiry, pushed forward (at most once a day) while the session is used. */
    expires_at: ms().notNull(),
    /** Absolute expiry; never moves. */
    absolute_expires_at: ms().notNull(),
    refreshed_at: ms().notNull(),
    ip: text(),
    user_agent: text(),
    created_at: createdAt(),
  },
  (t) => [uniqueIndex("login_sessions_token").on(t.token_hash), index("login_sessions_user").on(t.user_id)],
);

/** API tokens: bcrypt of the whole token plus a non-secret lookup prefix. */
export const apiTokens = sqliteTable(
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

export const secrets = sqliteTable(
  "secrets",
  {
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    name: text().notNull(),
    /** AES-256-GCM: 12-byte nonce ‖ ciphertext ‖ 16-byte tag. */
    ciphertext: blob({ mode: "buffer" }).notNull(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [primaryKey({ columns: [t.user_id, t.name] })],
);

export type ModelConfig = {
  provider: ModelProvider;
  name: string;
  base_url?: string | null;
  api_key_secret?: string | null;
  pricing?: { input_per_mtok: number; output_per_mtok: number } | null;
};
export type ProfileLimits = {
  max_turns: number;
  max_budget_usd: number;
  max_concurrency: number;
  memory_mb: number;
  cpus: number;
  pids: number;
};
export type EnvValue = string | { secret: string };

/** An MCP server of a profile (src/mcp/): a command run in the workspace, or a streamable-HTTP URL called from runcell. */
export type McpServerConfig =
  | { name: string; transport: "stdio"; command: string; args?: string[]; env?: Record<string, EnvValue>; timeout_ms?: number }
  | { name: string; transport: "http"; url: string; headers?: Record<string, EnvValue>; timeout_ms?: number };

/** A git repository checked out into the workspace before the first turn (src/git/). */
export type RepositoryConfig = { url: string; ref?: string; path?: string; credential_secret?: string; depth?: number };

/** Per-user overrides of the operator's policy (src/admin/policy.ts); every field optional. */
export type PolicyOverrides = Partial<{
  max_profiles: number;
  max_running_workspaces: number;
  max_memory_mb: number;
  max_cpus: number;
  max_pids: number;
  max_concurrency: number;
  max_turns: number;
  max_budget_usd: number;
  allowed_images: string[];
  allow_bridge_network: boolean;
  monthly_spend_usd: number;
  workspace_disk_mb: number;
  min_schedule_interval: number;
}>;

export const profiles = sqliteTable(
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
    /** Containers kept created and started for this profile's next sessions (src/workspaces/pool.ts). */
    warm_pool: integer().notNull().default(0),
    mcp_servers: json<McpServerConfig[]>().notNull().default(sql`'[]'`),
    /** Patterns over MCP tool names (`mcp__srv__*`, `!mcp__srv__write_*`); empty: every MCP tool. */
    allowed_tools: json<string[]>().notNull().default(sql`'[]'`),
    repositories: json<RepositoryConfig[]>().notNull().default(sql`'[]'`),
    /** Labels a Docker host must have for this profile's workspaces (`gpu`, `region=eu`); empty: any host. */
    host_labels: json<string[]>().notNull().default(sql`'[]'`),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("profiles_user").on(t.user_id, t.id)],
);

// ---------------------------------------------------------------------------------------------
// Sessions, workspaces, tasks, transcript

export const sessions = sqliteTable(
  "sessions",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    /** No foreign key: a session outlives its profile (its transcript stays readable). */
    profile_id: text().notNull(),
    title: text(),
    input_tokens: integer().notNull().default(0),
    output_tokens: integer().notNull().default(0),
    cost_usd: real().notNull().default(0),
    /**
     * The event log's high-water mark: seqs up to here may have been sent. It is stored before a
     * block of seqs is handed out, so after a crash numbering resumes above every seq ever sent.
     */
    seq_reserved: integer().notNull().default(0),
    /** Repositories named for this session only (POST /v1/tasks), checked out besides the profile's. */
    repositories: json<RepositoryConfig[]>(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("sessions_user").on(t.user_id, t.id)],
);

export type WorkspaceSpec = { network: Network; memory_mb: number; cpus: number; pids: number };
/**
 * A command a task's tool call started in its workspace, as the process inside the box: its pid
 * and that process's start time (clock ticks after boot, /proc/<pid>/stat), which tells it from a
 * later process given the same pid.
 */
/**
 * A tool call's command while it runs (`pid` and its start time, to kill what is left of it after a
 * crash). `stopped_output`: the server stopped gracefully meanwhile and stopped the command with
 * it; its output up to then (scrubbed), told to the model when the task resumes.
 */
export type RunningExec = { workspace: string; pid: number; start: number; stopped_output?: string };

export const workspaces = sqliteTable(
  "workspaces",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    name: text().notNull(),
    image: text().notNull(),
    /** The Docker host (its --docker-host name) the container and volume are on. */
    host: text().notNull().default("default"),
    /** Docker's own container id, once created. */
    docker_id: text(),
    volume: text().notNull(),
    /** The container's shape at creation (network, limits): a vanished container is recreated the same. */
    spec: json<WorkspaceSpec>().notNull(),
    /** The volume's size at the last disk check (bytes), when it was taken. */
    disk_bytes: integer(),
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

export const tasks = sqliteTable(
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
    input_tokens: integer().notNull().default(0),
    output_tokens: integer().notNull().default(0),
    cost_usd: real().notNull().default(0),
    turns: integer().notNull().default(0),
    max_turns: integer().notNull(),
    max_budget_usd: real().notNull(),
    /** Pending AskUserQuestion: the tool_use id waiting for an answer; else the tool call running. */
    pending_tool_use_id: text(),
    /** A playbook run: how it was started (null for other tasks). */
    trigger: text({ enum: RUN_TRIGGERS }),
    /** Fresh-context chains this task may start (playbook runs); those it started are its `chain` steps. */
    max_continuations: integer().notNull().default(0),
    /** Its model requests are paid with the server's own provider key (counted against the monthly spend cap). */
    server_paid: bool().notNull().default(false),
    /** The schedule slot a scheduled run was due at. */
    scheduled_for: ms(),
    /** How long an unanswered question may wait before the task fails (a playbook's answer_timeout). */
    answer_timeout_ms: integer(),
    /** When the pending question times out (set while waiting_input with an answer_timeout). */
    answer_due_at: ms(),
    created_at: createdAt(),
    started_at: ms(),
    finished_at: ms(),
    /** The replica running it (src/agents/leases.ts): its id, and until when the lease holds unless renewed. */
    lease_owner: text(),
    lease_expires_at: ms(),
    /** The command that tool call runs in the workspace (once its pid is known): a resumed task kills what is left of it. */
    running_exec: json<RunningExec>(),
    /** Why the model answer that ended the task stopped (set with that answer; null while none has). */
    stop_reason: text({ enum: STOP_REASONS }),
    /**
     * How many times the model request of the task's current turn has been made again after a
     * restart cut it off (0 when a new turn starts): bounded, so a server that crashes in the same
     * answer every time does not repeat it forever (src/agents/loop.ts).
     */
    turn_repeats: integer().notNull().default(0),
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
export const deletedTaskUsage = sqliteTable(
  "deleted_task_usage",
  {
    task_id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    profile_id: text().notNull(),
    server_paid: bool().notNull(),
    input_tokens: integer().notNull(),
    output_tokens: integer().notNull(),
    cost_usd: real().notNull(),
    /** The task's creation time (what reports and the month are counted by). */
    created_at: createdAt(),
    deleted_at: ms().notNull(),
  },
  (t) => [index("deleted_task_usage_user").on(t.user_id, t.created_at)],
);

/**
 * The model conversation of a session, one row per step: the user prompt, each assistant
 * response, each tool result. Written before the next step starts, so a restarted server resumes
 * a task from its last completed step.
 */
export const messages = sqliteTable(
  "messages",
  {
    id: integer().primaryKey({ autoIncrement: true }),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    task_id: text().notNull(),
    role: text({ enum: STEP_ROLES }).notNull(),
    content: json<unknown>().notNull(),
    created_at: createdAt(),
  },
  (t) => [index("messages_session").on(t.session_id, t.id)],
);

/** Every frame the stream sent for a session, in order, with a per-session seq never given twice (gap-free short of a crash; sessions.seq_reserved). */
export const events = sqliteTable(
  "events",
  {
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    seq: integer().notNull(),
    type: text().notNull(),
    task_id: text(),
    /** The exact JSON frame sent to clients (includes seq). */
    frame: text().notNull(),
    created_at: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.session_id, t.seq] })],
);

/**
 * Admin-only debug frames (`task:system_prompt`) as runcell stored them before they were numbered
 * in `events` like every frame (API.md: every session frame carries `seq`). No longer written or
 * read; kept so that a replica still running the older runcell during a rolling upgrade (PostgreSQL)
 * keeps working. Rows go with their session.
 */
export const debugEvents = sqliteTable(
  "debug_events",
  {
    id: integer().primaryKey({ autoIncrement: true }),
    session_id: text().notNull().references(() => sessions.id, { onDelete: "cascade" }),
    after_seq: integer().notNull(),
    type: text().notNull(),
    task_id: text(),
    frame: text().notNull(),
    created_at: createdAt(),
  },
  (t) => [index("debug_events_session").on(t.session_id, t.after_seq)],
);

// ---------------------------------------------------------------------------------------------
// Audit

/** Security-relevant actions (sign-ins, tokens, roles, secrets by name, settings…), kept for the retention period. */
export const auditLog = sqliteTable(
  "audit_log",
  {
    id: id(),
    at: ms().notNull(),
    /** Who did it: a user, the operator (admin password), the system, or an anonymous caller. */
    actor: text({ enum: AUDIT_ACTORS }).notNull(),
    /** The acting user (or, for sign-in failures and admin actions, the user acted on); no foreign key: rows outlive users. */
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

/**
 * Saved prompts run on demand, on a cron schedule, or from a secret inbound URL. `next_run_at` is
 * the next due slot of an enabled schedule (null otherwise): the scheduler wakes on the earliest
 * one, and claims a slot by moving it forward in the transaction that creates the run's task.
 */
export const playbooks = sqliteTable(
  "playbooks",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    /** No foreign key: a run of a deleted profile fails with a clear error. */
    profile_id: text().notNull(),
    name: text().notNull(),
    prompt: text().notNull(),
    max_continuations: integer().notNull().default(0),
    /** Per-run limits; null: the profile's. */
    max_turns: integer(),
    max_budget_usd: real(),
    schedule: text(),
    timezone: text().notNull().default("UTC"),
    enabled: bool().notNull().default(true),
    answer_timeout_ms: integer(),
    /** AES-256-GCM sealed secret of the inbound trigger URL (its owner can read the URL again). */
    trigger_ciphertext: blob({ mode: "buffer" }).notNull(),
    next_run_at: ms(),
    created_at: createdAt(),
    updated_at: updatedAt(),
  },
  (t) => [index("playbooks_user").on(t.user_id, t.id), index("playbooks_due").on(t.next_run_at)],
);

/** Playbook runs that never became a task (skipped while the previous run still ran, or refused by a limit). */
export const missedRuns = sqliteTable(
  "playbook_missed_runs",
  {
    id: integer().primaryKey({ autoIncrement: true }),
    playbook_id: text().notNull().references(() => playbooks.id, { onDelete: "cascade" }),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    trigger: text({ enum: RUN_TRIGGERS }).notNull(),
    status: text({ enum: MISSED_RUN_STATUSES }).notNull(),
    error_code: text(),
    error_message: text(),
    /** The schedule slot it was due at (schedule runs). */
    scheduled_for: ms(),
    created_at: createdAt(),
  },
  (t) => [index("playbook_missed_runs_playbook").on(t.playbook_id, t.id)],
);

// ---------------------------------------------------------------------------------------------
// Notifications

export const integrations = sqliteTable("integrations", {
  id: id(),
  user_id: text().notNull().unique().references(() => users.id, { onDelete: "cascade" }),
  type: text({ enum: INTEGRATION_TYPES }).notNull(),
  url: text().notNull(),
  /** AES-256-GCM sealed webhook secret, null when none is set. */
  secret_ciphertext: blob({ mode: "buffer" }),
  created_at: createdAt(),
  updated_at: updatedAt(),
});

/**
 * The outbox and the notification log in one table: a row is written in the transaction of its
 * cause, delivered by the worker, and ends `delivered` or `failed` (the interface's
 * `notification_log` with `status=failed`).
 */
export const notificationLog = sqliteTable(
  "notification_log",
  {
    id: id(),
    user_id: text().notNull().references(() => users.id, { onDelete: "cascade" }),
    integration_id: text(),
    source: text({ enum: NOTIFICATION_SOURCES }).notNull(),
    urgency: text({ enum: URGENCIES }).notNull(),
    task_id: text(),
    playbook_id: text(),
    /** The exact JSON body sent (and signed). */
    payload: text().notNull(),
    status: text({ enum: NOTIFICATION_STATUSES }).notNull(),
    attempts: integer().notNull().default(0),
    max_attempts: integer().notNull(),
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

/** One row per HTTP attempt of a notification, for operators and the retry-timing benchmark. */
export const notificationAttempts = sqliteTable(
  "notification_attempts",
  {
    id: integer().primaryKey({ autoIncrement: true }),
    notification_id: text().notNull().references(() => notificationLog.id, { onDelete: "cascade" }),
    attempt: integer().notNull(),
    started_at: ms().notNull(),
    duration_ms: integer().notNull(),
    status_code: integer(),
    error: text(),
  },
  (t) => [index("notification_attempts_ntf").on(t.notification_id)],
);

// ---------------------------------------------------------------------------------------------
// Row types, named once

export type UserRow = typeof users.$inferSelect;
export type ProfileRow = typeof profiles.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type WorkspaceRow = typeof workspaces.$inferSelect;
export type NewWorkspaceRow = typeof workspaces.$inferInsert;
export type TaskRow = typeof tasks.$inferSelect;
export type NotificationRow = typeof notificationLog.$inferSelect;
export type IntegrationRow = typeof integrations.$inferSelect;
export type PlaybookRow = typeof playbooks.$inferSelect;
export type AuditRow = typeof auditLog.$inferSelect;
export type MissedRunRow = typeof missedRuns.$inferSelect;
