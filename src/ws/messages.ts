/**
 * Client → server messages of /v1/stream, checked against their schemas (src/schema/stream.ts)
 * with the shared validator. Bad JSON, an unknown `type`, a missing or mistyped field all become
 * VALIDATION_FAILED naming the field.
 */
import { AppError } from "../lib/errors.ts";
import { parseClientJson } from "../lib/json-input.ts";
import { CLIENT_MESSAGES, type ClientMessage, type ClientMessageType } from "../schema/stream.ts";
import { check } from "../schema/validate.ts";

export type { ClientMessage };

/** The request_id of a message, if it has a usable one (for error frames even when invalid). */
export function requestIdOf(value: unknown): string | undefined {
  const id = (value as { request_id?: unknown } | null)?.request_id;
  return typeof id === "string" && id.length <= 200 ? id : undefined;
}

export function parseFrame(text: string): unknown {
  return parseClientJson(text, "frame", "");
}

export function validateClientMessage(value: unknown): ClientMessage {
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new AppError("VALIDATION_FAILED", "A message must be a JSON object with a type", { field: "frame" });
  const type = (value as { type?: unknown }).type;
  if (type === undefined) throw new AppError("VALIDATION_FAILED", "Missing message type", { field: "type" });
  if (typeof type !== "string") throw new AppError("VALIDATION_FAILED", "The message type must be a string", { field: "type" });
  // Own entries only: "constructor", "__proto__" or "toString" must not find Object.prototype's.
  const schema = Object.hasOwn(CLIENT_MESSAGES, type) ? CLIENT_MESSAGES[type as ClientMessageType] : undefined;
  if (!schema) {
    throw new AppError("VALIDATION_FAILED", `Unknown message type "${type.slice(0, 60)}" (expected one of ${Object.keys(CLIENT_MESSAGES).join(", ")})`, { field: "type" });
  }
  return check(schema, value, "frame") as ClientMessage;
}
