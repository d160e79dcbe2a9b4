/**
 * The outbound notification payload, exactly the interface's: channel, urgency, message, source,
 * sent_at, and task_id / playbook_id only when present. Built once when the notification is
 * created and stored as the exact JSON text that is sent and signed on every attempt.
 */
import { Errors } from "../lib/errors.ts";
import { type NotificationSource, URGENCIES, type Urgency } from "../db/schema.ts";
import { iso } from "../lib/time.ts";
import { MESSAGE_MAX, type NotificationPayload, PLAYBOOK_ID_PATTERN, TASK_ID_PATTERN } from "../schema/notification.ts";

export { MESSAGE_MAX, URGENCIES };
export type { NotificationPayload, Urgency };
export type Source = NotificationSource;

const TASK_ID = new RegExp(TASK_ID_PATTERN);
const PLAYBOOK_ID = new RegExp(PLAYBOOK_ID_PATTERN);

export function validateMessage(message: unknown): string {
  if (typeof message !== "string") throw Errors.validation("message", "message is required and must be a string");
  if (message.trim() === "") throw Errors.validation("message", "message must not be empty");
  if (message.length > MESSAGE_MAX) {
    throw Errors.validation("message", `message must be at most ${MESSAGE_MAX} characters (got ${message.length})`, { limit: MESSAGE_MAX });
  }
  return message;
}

export function validateUrgency(urgency: unknown): Urgency {
  if (urgency === undefined || urgency === null) return "normal";
  if (typeof urgency !== "string" || !(URGENCIES as readonly string[]).includes(urgency)) {
    throw Errors.validation("urgency", `urgency must be one of ${URGENCIES.join(", ")}`, { allowed: [...URGENCIES] });
  }
  return urgency as Urgency;
}

export function validateRef(field: "task_id" | "playbook_id", value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const shape = field === "task_id" ? TASK_ID : PLAYBOOK_ID;
  if (typeof value !== "string" || !shape.test(value)) {
    throw Errors.validation(field, `${field} must be a ${field === "task_id" ? "task_…" : "pb_…"} id`);
  }
  return value;
}

/** Cuts `text` to `max` characters, marking the cut. */
export function truncate(text: string, max = MESSAGE_MAX): string {
  return text.length <= max ? text : text.slice(0, max - 1) + "…";
}

/** The exact JSON body; key order is the interface's. */
export function buildPayload(p: { urgency: Urgency; message: string; source: Source; sentAt: number; taskId: string | null; playbookId: string | null }): string {
  const body: NotificationPayload = { channel: "webhook", urgency: p.urgency, message: p.message, source: p.source, sent_at: iso(p.sentAt) };
  if (p.taskId) body.task_id = p.taskId;
  if (p.playbookId) body.playbook_id = p.playbookId;
  return JSON.stringify(body);
}
