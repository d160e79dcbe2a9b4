/**
 * Notifications: the one entry point other modules call. `enqueue` writes the outbox row (inside
 * the caller's transaction when given one) and wakes the delivery worker once that transaction
 * has committed; `submit` is POST /v1/notifications; `taskFailed` / `playbookRunEnded` are the
 * platform's own notifications. Reads of the log are in log.ts.
 */
import type { Database } from "bun:sqlite";
import { and, eq, sql } from "drizzle-orm";
import type { Config } from "../config.ts";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import type { Page, PageParams } from "../db/paginate.ts";
import { notificationLog, tasks } from "../db/schema.ts";
import { Errors } from "../lib/errors.ts";
import type { Logger } from "../log.ts";
import type { Sealer } from "../lib/sealer.ts";
import { classifyAddress } from "../lib/ip.ts";
import type { AuditSink } from "../schema/audit.ts";
import { type NetworkPolicy, systemResolver } from "../lib/ssrf.ts";
import { Integrations } from "./integrations.ts";
import { type AdminNotificationRecord, NotificationLog, type NotificationRecord, type NotificationStatus } from "./log.ts";
import { Outbox } from "./outbox.ts";
import { buildPayload, type Source, truncate, type Urgency, validateMessage, validateRef, validateUrgency } from "./payload.ts";
import { DeliveryWorker } from "./worker.ts";

/**
 * A drizzle database or transaction of `services.db` (the orchestrator passes its transaction).
 * bun:sqlite is one synchronous connection, so our statements run inside that open transaction.
 */
export type Executor = Pick<DB, "select" | "insert">;
export type { AdminNotificationRecord, NotificationRecord, NotificationStatus };

export interface EnqueueInput {
  userId: string;
  source: Source;
  message: string;
  urgency?: Urgency;
  taskId?: string | null;
  playbookId?: string | null;
}

/** What the Notify tool and POST /v1/notifications say when the user has no webhook. */
export const NO_INTEGRATION_MESSAGE =
  "No webhook integration is configured, so there is nowhere to send notifications: configure one with POST /v1/integrations {\"type\":\"webhook\",\"config\":{\"url\":\"https://…\",\"secret\":\"…\"}}";

export class Notifications {
  /** Address policy shared by the configuration check and every delivery; tests replace its parts. */
  readonly net: NetworkPolicy;
  readonly outbox: Outbox;
  readonly integrations: Integrations;
  readonly worker: DeliveryWorker;
  private reads: NotificationLog;
  private insertStmt;
  private taskOwned;

  constructor(
    private deps: { db: DB; sqlite: Database; sealer: Sealer; log: Logger; now: () => number; config: Pick<Config, "allowPrivateWebhooks" | "webhook">; audit?: AuditSink },
  ) {
    const { db, sqlite, sealer, log, now, config } = deps;
    this.net = { guard: !config.allowPrivateWebhooks, resolve: systemResolver, classify: classifyAddress };
    this.outbox = new Outbox(sqlite, config.webhook.backoffMs);
    this.integrations = new Integrations(db, sealer, this.outbox, this.net, now, deps.audit);
    this.worker = new DeliveryWorker({ outbox: this.outbox, integrations: this.integrations, log: log.child({ component: "notifications" }), now, schedule: config.webhook, net: this.net });
    this.reads = new NotificationLog(db);
    this.insertStmt = db
      .insert(notificationLog)
      .values({
        id: sql.placeholder("id"),
        user_id: sql.placeholder("user_id"),
        integration_id: sql.placeholder("integration_id"),
        source: sql.placeholder("source"),
        urgency: sql.placeholder("urgency"),
        task_id: sql.placeholder("task_id"),
        playbook_id: sql.placeholder("playbook_id"),
        payload: sql.placeholder("payload"),
        status: "pending",
        attempts: 0,
        max_attempts: sql.placeholder("max_attempts"),
        next_attempt_at: sql.placeholder("next_attempt_at"),
        created_at: sql.placeholder("created_at"),
      })
      .prepare();
    this.taskOwned = db
      .select({ id: tasks.id })
      .from(tasks)
      .where(and(eq(tasks.id, sql.placeholder("id")), eq(tasks.user_id, sql.placeholder("user_id"))))
      .prepare();
  }

  /**
   * Queues a notification for the user's webhook. Synchronous, so it can run inside the caller's
   * transaction (`db`); the worker is woken after that transaction commits. Returns null and
   * writes nothing when the user has no webhook integration. Throws VALIDATION_FAILED for a bad
   * message or urgency.
   */
  enqueue(input: EnqueueInput, db?: Executor): { id: string; status: "pending" } | null {
    // Platform text is generated (it can quote a long error): cut to the limit rather than refuse,
    // so the caller's transaction (e.g. failing a task) never fails because of it.
    const message = validateMessage(input.source === "platform" && typeof input.message === "string" ? truncate(input.message) : input.message);
    const urgency = validateUrgency(input.urgency);
    void db; // see below: the caller's transaction is the connection's open transaction
    const integrationId = this.integrations.idForUser(input.userId);
    if (!integrationId) return null;
    const now = this.deps.now();
    const row = {
      id: newId("notification"),
      user_id: input.userId,
      integration_id: integrationId,
      source: input.source,
      urgency,
      task_id: input.taskId ?? null,
      playbook_id: input.playbookId ?? null,
      payload: buildPayload({ urgency, message, source: input.source, sentAt: now, taskId: input.taskId ?? null, playbookId: input.playbookId ?? null }),
      max_attempts: this.deps.config.webhook.attempts,
      next_attempt_at: now,
      created_at: now,
    };
    // bun:sqlite has one connection and drizzle's transactions are synchronous BEGIN…COMMIT on it,
    // so the prepared statement runs inside the caller's open transaction (and rolls back with it).
    this.insertStmt.run(row);
    // A microtask runs after the caller's synchronous transaction has committed.
    queueMicrotask(() => this.worker.wake());
    return { id: row.id, status: "pending" };
  }

  /** POST /v1/notifications (source "agent"); also what the Notify tool calls. */
  submit(userId: string, body: { message: unknown; urgency?: unknown; task_id?: unknown; playbook_id?: unknown }): { id: string; status: "pending" } {
    const message = validateMessage(body.message);
    const urgency = validateUrgency(body.urgency);
    const taskId = validateRef("task_id", body.task_id);
    const playbookId = validateRef("playbook_id", body.playbook_id);
    if (taskId && !this.taskOwned.get({ id: taskId, user_id: userId })) throw Errors.validation("task_id", `Task ${taskId} not found`);
    const out = this.enqueue({ userId, source: "agent", message, urgency, taskId, playbookId });
    if (!out) throw Errors.validation("integration", NO_INTEGRATION_MESSAGE);
    return out;
  }

  /** POST /v1/integrations/:id/test: a platform notification through the normal outbox. */
  sendTest(userId: string, integrationId: string): { id: string; status: "pending" } {
    this.integrations.get(userId, integrationId);
    const out = this.enqueue({ userId, source: "platform", urgency: "normal", message: "Test notification from runcell: your webhook integration works." });
    if (!out) throw Errors.notFound("Integration", integrationId);
    return out;
  }

  /** The platform's notification for a failed task (call it in the transaction that fails the task). */
  taskFailed(t: { userId: string; taskId: string; playbookId?: string | null; code?: string | null; error: string }, db?: Executor) {
    const what = t.code ? `${t.code}: ${t.error}` : t.error;
    return this.enqueue({ userId: t.userId, source: "platform", urgency: "high", taskId: t.taskId, playbookId: t.playbookId ?? null, message: truncate(`Task ${t.taskId} failed — ${what}`) }, db);
  }

  /** The platform's notification for a finished playbook run (completed, failed or cancelled). */
  playbookRunEnded(
    r: { userId: string; playbookId: string; taskId?: string | null; playbookName?: string | null; status: "completed" | "failed" | "cancelled"; detail?: string | null },
    db?: Executor,
  ) {
    const name = r.playbookName ? `"${r.playbookName}" (${r.playbookId})` : r.playbookId;
    const tail = r.detail ? ` — ${r.detail}` : "";
    return this.enqueue(
      { userId: r.userId, source: "platform", urgency: r.status === "failed" ? "high" : "normal", taskId: r.taskId ?? null, playbookId: r.playbookId, message: truncate(`Playbook ${name} run ${r.status}${tail}`) },
      db,
    );
  }

  list(userId: string, q: PageParams & { status?: NotificationStatus }): Page<NotificationRecord> {
    return this.reads.list(userId, q);
  }

  get(userId: string, id: string): NotificationRecord {
    return this.reads.get(userId, id);
  }

  /** GET /admin/notifications: every user's, with the owner. */
  listAll(q: PageParams & { status?: NotificationStatus; user_id?: string }): Page<AdminNotificationRecord> {
    return this.reads.listAll(q);
  }
}
