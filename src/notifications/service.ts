/**
 * Notifications: the one entry point other modules call. `enqueue` writes the outbox row (as a
 * unit of the caller's transaction when given one, else in one of its own) and the delivery worker
 * is woken once that transaction has committed; `submit` is POST /v1/notifications; `taskFailed` /
 * `playbookRunEnded` are the platform's own notifications. Reads of the log are in log.ts.
 */
import type { Database } from "bun:sqlite";
import { and, eq } from "drizzle-orm";
import type { Config } from "../config.ts";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import type { Page, PageParams } from "../db/paginate.ts";
import { notificationLog, playbooks, tasks } from "../db/tables.ts";
import { run, transact, type Unit } from "../db/unit.ts";
import { preparedInsertStep } from "../db/prepared.ts";
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

/** What enqueue answers for a queued notification. */
export type Queued = { id: string; status: "pending" };
export type { AdminNotificationRecord, NotificationRecord, NotificationStatus };

export interface EnqueueInput {
  userId: string;
  source: Source;
  message: string;
  urgency?: Urgency;
  taskId?: string | null;
  playbookId?: string | null;
}

type TaskFailed = { userId: string; taskId: string; playbookId?: string | null; code?: string | null; error: string };
type RunEnded = { userId: string; playbookId: string; taskId?: string | null; playbookName?: string | null; status: "completed" | "failed" | "cancelled"; detail?: string | null };

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
  /** enqueue's insert, prepared once on SQLite (drizzle built and prepared it at every call). */
  private insertRow: ReturnType<typeof preparedInsertStep<typeof notificationLog>>;

  constructor(
    private deps: { db: DB; sqlite?: Database | null; sealer: Sealer; log: Logger; now: () => number; config: Pick<Config, "allowPrivateWebhooks" | "webhook">; audit?: AuditSink },
  ) {
    const { db, sqlite, sealer, log, now, config } = deps;
    this.net = { guard: !config.allowPrivateWebhooks, resolve: systemResolver, classify: classifyAddress };
    this.outbox = new Outbox(db, sqlite, config.webhook.backoffMs);
    this.integrations = new Integrations(db, sealer, this.outbox, this.net, now, deps.audit);
    this.worker = new DeliveryWorker({ outbox: this.outbox, integrations: this.integrations, log: log.child({ component: "notifications" }), now, schedule: config.webhook, net: this.net });
    this.reads = new NotificationLog(db);
    this.insertRow = preparedInsertStep(db, notificationLog);
  }

  /**
   * Queues a notification for the user's webhook. With `tx` (the caller's open transaction): a
   * unit the caller `yield*`s, the row commits or rolls back with the caller's writes, and the
   * caller calls `wake` once its transaction has committed. Without: in a transaction of its own,
   * the worker woken after it commits. Returns null and writes nothing when the user has no webhook
   * integration. Throws (in the unit: when it runs; without `tx`: rejects) VALIDATION_FAILED for a
   * bad message or urgency.
   */
  enqueue(input: EnqueueInput, tx: DB): Unit<Queued | null>;
  enqueue(input: EnqueueInput): Promise<Queued | null>;
  enqueue(input: EnqueueInput, tx?: DB): Unit<Queued | null> | Promise<Queued | null> {
    return tx ? this.insertIn(input, tx) : this.enqueueAlone(input);
  }

  /** Wakes the delivery worker: call it once a transaction whose unit queued a notification has committed. */
  wake(): void {
    this.worker.wake();
  }

  private async enqueueAlone(input: EnqueueInput): Promise<Queued | null> {
    // The webhook read and the insert in one transaction: deleting a webhook fails its pending rows, none may follow.
    const queued = await transact(this.deps.db, (tx) => this.insertIn(input, tx));
    if (queued) this.wake();
    return queued;
  }

  /** Reads the user's webhook and writes the row (a unit: the worker is not woken here). */
  private *insertIn(input: EnqueueInput, tx: DB): Unit<Queued | null> {
    // Platform text is generated (it can quote a long error): cut to the limit rather than refuse,
    // so the caller's transaction (e.g. failing a task) never fails because of it.
    const message = validateMessage(input.source === "platform" && typeof input.message === "string" ? truncate(input.message) : input.message);
    const urgency = validateUrgency(input.urgency);
    const integrationId = yield* this.integrations.idForUserIn(tx, input.userId);
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
    yield* run(
      this.insertRow(tx, { ...row, status: "pending", attempts: 0, lease_id: null, lease_expires_at: null, last_error: null, delivered_at: null, failed_at: null }),
    );
    return { id: row.id, status: "pending" };
  }

  /** POST /v1/notifications (source "agent"); also what the Notify tool calls. */
  async submit(userId: string, body: { message: unknown; urgency?: unknown; task_id?: unknown; playbook_id?: unknown }): Promise<Queued> {
    const message = validateMessage(body.message);
    const urgency = validateUrgency(body.urgency);
    const taskId = validateRef("task_id", body.task_id);
    const playbookId = validateRef("playbook_id", body.playbook_id);
    await this.checkOwned(userId, "task_id", taskId);
    await this.checkOwned(userId, "playbook_id", playbookId);
    const out = await this.enqueue({ userId, source: "agent", message, urgency, taskId, playbookId });
    if (!out) throw Errors.validation("integration", NO_INTEGRATION_MESSAGE);
    return out;
  }

  /** VALIDATION_FAILED on `field` unless the task or playbook `id` is the caller's (or absent). */
  private async checkOwned(userId: string, field: "task_id" | "playbook_id", id: string | null): Promise<void> {
    if (!id) return;
    const [table, what] = field === "task_id" ? [tasks, "Task"] as const : [playbooks, "Playbook"] as const;
    if (!(await first(this.deps.db.select({ id: table.id }).from(table).where(and(eq(table.id, id), eq(table.user_id, userId)))))) {
      throw Errors.validation(field, `${what} ${id} not found`);
    }
  }

  /** POST /v1/integrations/:id/test: a platform notification through the normal outbox. */
  async sendTest(userId: string, integrationId: string): Promise<Queued> {
    await this.integrations.get(userId, integrationId);
    const out = await this.enqueue({ userId, source: "platform", urgency: "normal", message: "Test notification from runcell: your webhook integration works." });
    if (!out) throw Errors.notFound("Integration", integrationId);
    return out;
  }

  /**
   * The platform's notification for a failed task (`yield*` it in the unit that fails the task,
   * then `wake` after the commit, like enqueue).
   */
  taskFailed(t: TaskFailed, tx: DB): Unit<Queued | null> {
    const what = t.code ? `${t.code}: ${t.error}` : t.error;
    const input: EnqueueInput = { userId: t.userId, source: "platform", urgency: "high", taskId: t.taskId, playbookId: t.playbookId ?? null, message: truncate(`Task ${t.taskId} failed — ${what}`) };
    return this.enqueue(input, tx);
  }

  /** The platform's notification for a finished playbook run (completed, failed or cancelled); with `tx` a unit, like enqueue. */
  playbookRunEnded(r: RunEnded, tx: DB): Unit<Queued | null>;
  playbookRunEnded(r: RunEnded): Promise<Queued | null>;
  playbookRunEnded(r: RunEnded, tx?: DB): Unit<Queued | null> | Promise<Queued | null> {
    const name = r.playbookName ? `"${r.playbookName}" (${r.playbookId})` : r.playbookId;
    const tail = r.detail ? ` — ${r.detail}` : "";
    const input: EnqueueInput = {
      userId: r.userId,
      source: "platform",
      urgency: r.status === "failed" ? "high" : "normal",
      taskId: r.taskId ?? null,
      playbookId: r.playbookId,
      message: truncate(`Playbook ${name} run ${r.status}${tail}`),
    };
    return tx ? this.enqueue(input, tx) : this.enqueue(input);
  }

  list(userId: string, q: PageParams & { status?: NotificationStatus }): Promise<Page<NotificationRecord>> {
    return this.reads.list(userId, q);
  }

  get(userId: string, id: string): Promise<NotificationRecord> {
    return this.reads.get(userId, id);
  }

  /** GET /admin/notifications: every user's, with the owner. */
  listAll(q: PageParams & { status?: NotificationStatus; user_id?: string }): Promise<Page<AdminNotificationRecord>> {
    return this.reads.listAll(q);
  }
}
