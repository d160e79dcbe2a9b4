/**
 * What the agent runtime needs from the other services, as narrow structural types (the
 * concrete services are built in src/services.ts). Keeping them narrow documents the coupling and
 * lets a unit test supply a local implementation.
 */
import type { DB } from "../db/client.ts";
import type { EnvValue, ModelConfig, ProfileRow, RunningExec, WorkspaceRow } from "../db/schema.ts";
import type { Unit } from "../db/unit.ts";
import type { WorkspaceOps } from "./tools/types.ts";

export type { ProfileRow, WorkspaceRow };

export interface ProfilesDep {
  get(userId: string, profileId: string): Promise<ProfileRow>;
  /** The profile a task runs with; deleted meanwhile: profileGone (NOT_FOUND, "Profile … no longer exists"). */
  forTask(userId: string, profileId: string): Promise<ProfileRow>;
}

export interface SecretsDep {
  resolveEnv(userId: string, env: Record<string, EnvValue>): Promise<Record<string, string>>;
  /** The model's key, and whether it is the server's own (the monthly spend cap counts those requests). */
  resolveApiKey(userId: string, model: ModelConfig): Promise<{ key: string | null; serverPaid: boolean }>;
  /** Whether the model's requests would go out on the server's own key (resolveApiKey's `serverPaid`, without a secret read). */
  paidByServer(model: ModelConfig): boolean;
  valuesFor(userId: string): Promise<string[]>;
}

export interface WorkspacesDep extends WorkspaceOps {
  createForSession(input: { userId: string; sessionId: string; profile: ProfileRow }): Promise<WorkspaceRow>;
  ensureRunning(sessionId: string): Promise<WorkspaceRow>;
  forSession(sessionId: string): Promise<WorkspaceRow | null>;
  /** Stops the container (its volume and record stay; the next turn starts it again). */
  stop(ctrId: string): Promise<WorkspaceRow | null>;
  /** Throws CONCURRENCY_LIMIT when the session's workspace would have to start with no room. */
  assertRoom(sessionId: string, profile: ProfileRow): Promise<void>;
  removeForSession(sessionId: string): Promise<void>;
  signedFileUrl(ctrId: string, path: string, ttlSec?: number): string;
  /** Kills what is left of a tool call's command after a restart ("gone": it had ended). */
  killLeftover(e: RunningExec): Promise<"stopped" | "gone">;
}

/** What the agent runtime reports to /metrics (src/admin/metrics.ts; wired by the app). */
export interface AgentMetricsDep {
  taskEnded(status: "completed" | "failed" | "cancelled", seconds: number): void;
  sessionReady(seconds: number): void;
  modelUsage(provider: string, inputTokens: number, outputTokens: number, costUsd: number): void;
}

export interface NotifyInput {
  userId: string;
  source: "agent" | "platform";
  message: string;
  urgency?: "low" | "normal" | "high";
  taskId?: string | null;
  playbookId?: string | null;
}

export interface NotificationsDep {
  /** Queues a notification (a transaction of its own). */
  enqueue(input: NotifyInput): Promise<{ id: string; status: "pending" } | null>;
  /** The platform notification for a failed task (one wording for every failure): a unit of the caller's transaction `db` (then `wake`). */
  taskFailed(t: { userId: string; taskId: string; playbookId?: string | null; code?: string | null; error: string }, db: DB): Unit<unknown>;
  /** The platform notification at the end of a playbook run: a unit of the caller's transaction `db` (then `wake`). */
  playbookRunEnded(
    r: { userId: string; playbookId: string; taskId: string; playbookName?: string | null; status: "completed" | "failed" | "cancelled"; detail?: string | null },
    db: DB,
  ): Unit<unknown>;
  /** Wakes the delivery worker once a transaction that queued a notification has committed. */
  wake(): void;
}
