/**
 * Notifications: the outbound payload exactly as the interface defines it, the log record its
 * owner and the operator read, and the bodies that create one.
 */
import { NOTIFICATION_SOURCES, NOTIFICATION_STATUSES, notificationLog, URGENCIES } from "../db/schema.ts";
import { Body, NullableTimestamp, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

/** Longest message accepted (JavaScript string length, i.e. UTF-16 code units). */
export const MESSAGE_MAX = 4000;

export const Urgency = OneOf(URGENCIES);
export const NotificationStatus = OneOf(NOTIFICATION_STATUSES);

/** The JSON body POSTed to the webhook (and signed): the interface's fields, in its order. */
export const NotificationPayload = T.Object(
  {
    channel: T.Literal("webhook"),
    urgency: Urgency,
    message: T.String(),
    source: OneOf(NOTIFICATION_SOURCES),
    sent_at: Timestamp,
    task_id: T.Optional(T.String({ description: "task_…, when the notification is about a task" })),
    playbook_id: T.Optional(T.String({ description: "pb_…, when the notification is about a playbook" })),
  },
  { title: "NotificationPayload" },
);
export type NotificationPayload = Static<typeof NotificationPayload>;

const record = {
  ...recordColumns(notificationLog, ["id", "status", "attempts", "last_error"]),
  payload: NotificationPayload,
  created_at: Timestamp,
  delivered_at: NullableTimestamp,
};
export const NotificationRecord = T.Object(record, { title: "Notification" });
export type NotificationRecord = Static<typeof NotificationRecord>;

export const AdminNotificationRecord = T.Object({ ...record, ...recordColumns(notificationLog, ["user_id"]), failed_at: NullableTimestamp }, { title: "AdminNotification" });
export type AdminNotificationRecord = Static<typeof AdminNotificationRecord>;

export const Queued = T.Object({ id: T.String({ examples: ["ntf_01jd4x0v9k8m2n3p4q5r6s7t8v"] }), status: T.Literal("pending") }, { title: "QueuedNotification" });
export type Queued = Static<typeof Queued>;

/** The shapes of the ids a notification may name (checked again by the service for the agent's Notify tool). */
export const TASK_ID_PATTERN = "^task_[0-9a-z]{26}$";
export const PLAYBOOK_ID_PATTERN = "^pb_[0-9a-z]{26}$";

export const NotificationBody = Body({
  message: T.String({ minLength: 1, maxLength: MESSAGE_MAX, description: `1–${MESSAGE_MAX} characters, not blank` }),
  urgency: T.Optional(OneOf(URGENCIES, { description: "normal when left out" })),
  task_id: T.Optional(T.String({ pattern: TASK_ID_PATTERN, "x-hint": "a task_… id", description: "One of your tasks" })),
  playbook_id: T.Optional(T.String({ pattern: PLAYBOOK_ID_PATTERN, "x-hint": "a pb_… id", description: "One of your playbooks" })),
});
