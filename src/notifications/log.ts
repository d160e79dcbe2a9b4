/**
 * Reading the notification log (the `notification_log` rows) for their owner and for operators:
 * keyset pages newest first, optional status filter. Failed rows are the interface's
 * notification log entries with `status=failed`.
 */
import { and, eq, type SQL } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type NotificationRow, type NotificationStatus } from "../db/schema.ts";
import { notificationLog } from "../db/tables.ts";
import { Errors } from "../lib/errors.ts";
import { iso } from "../lib/time.ts";
import type { AdminNotificationRecord, NotificationPayload, NotificationRecord } from "../schema/notification.ts";

export type { AdminNotificationRecord, NotificationRecord, NotificationStatus };

type Row = NotificationRow;

function toRecord(r: Pick<Row, "id" | "status" | "attempts" | "last_error" | "payload" | "created_at" | "delivered_at">): NotificationRecord {
  return {
    id: r.id,
    status: r.status,
    attempts: r.attempts,
    last_error: r.last_error,
    payload: JSON.parse(r.payload) as NotificationPayload,
    created_at: iso(r.created_at),
    delivered_at: iso(r.delivered_at),
  };
}

export class NotificationLog {
  constructor(private db: DB) {}

  private async page(where: SQL | undefined, p: PageParams): Promise<{ rows: Row[]; limit: number }> {
    const k = keyset(notificationLog.id, where, p);
    return { rows: await this.db.select().from(notificationLog).where(k.where).orderBy(k.orderBy).limit(k.fetch), limit: k.limit };
  }

  async list(userId: string, q: PageParams & { status?: NotificationStatus }): Promise<Page<NotificationRecord>> {
    const { rows, limit } = await this.page(and(eq(notificationLog.user_id, userId), q.status ? eq(notificationLog.status, q.status) : undefined), q);
    return toPage(rows, limit, toRecord);
  }

  async get(userId: string, id: string): Promise<NotificationRecord> {
    const row = await first(this.db.select().from(notificationLog).where(and(eq(notificationLog.id, id), eq(notificationLog.user_id, userId))));
    if (!row) throw Errors.notFound("Notification", id);
    return toRecord(row);
  }

  /** GET /admin/notifications: every user's, with the owner. */
  async listAll(q: PageParams & { status?: NotificationStatus; user_id?: string }): Promise<Page<AdminNotificationRecord>> {
    const where = and(q.status ? eq(notificationLog.status, q.status) : undefined, q.user_id ? eq(notificationLog.user_id, q.user_id) : undefined);
    const { rows, limit } = await this.page(where, q);
    return toPage(rows, limit, (r) => ({ ...toRecord(r), user_id: r.user_id, failed_at: iso(r.failed_at) }));
  }
}
