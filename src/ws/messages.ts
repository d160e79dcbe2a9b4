/**
 * Client → server messages of /v1/stream, validated with TypeBox. Bad JSON, an unknown `type`,
 * a missing or mistyped field all become VALIDATION_FAILED naming the field.
 */
import { type Static, Type as T } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { AppError } from "../lib/errors.ts";

const RequestId = T.Optional(T.String({ maxLength: 200 }));
const Prompt = T.String({ minLength: 1, maxLength: 100_000 });

export const CLIENT_MESSAGES = {
  "task.submit": T.Object({
    type: T.Literal("task.submit"),
    request_id: RequestId,
    mode: T.Optional(T.String()),
    profile_id: T.Optional(T.String()),
    session_id: T.Optional(T.String()),
    prompt: Prompt,
    max_turns: T.Optional(T.Integer({ minimum: 0, maximum: 10_000 })),
    max_budget_usd: T.Optional(T.Number({ minimum: 0, maximum: 100_000 })),
  }),
  "task.cancel": T.Object({ type: T.Literal("task.cancel"), request_id: RequestId, task_id: T.String({ minLength: 1 }) }),
  "task.answer": T.Object({ type: T.Literal("task.answer"), request_id: RequestId, task_id: T.String({ minLength: 1 }), answer: T.String({ minLength: 1, maxLength: 100_000 }) }),
  "session.start": T.Object({ type: T.Literal("session.start"), request_id: RequestId, profile_id: T.String({ minLength: 1 }) }),
  "session.resume": T.Object({ type: T.Literal("session.resume"), request_id: RequestId, session_id: T.String({ minLength: 1 }), after: T.Optional(T.Integer({ minimum: 0 })) }),
  "session.turn": T.Object({ type: T.Literal("session.turn"), request_id: RequestId, session_id: T.String({ minLength: 1 }), prompt: Prompt }),
} as const;

export type ClientMessageType = keyof typeof CLIENT_MESSAGES;
export type ClientMessage = { [K in ClientMessageType]: Static<(typeof CLIENT_MESSAGES)[K]> }[ClientMessageType];

const checkers = Object.fromEntries(Object.entries(CLIENT_MESSAGES).map(([k, s]) => [k, TypeCompiler.Compile(s)])) as unknown as Record<
  ClientMessageType,
  ReturnType<typeof TypeCompiler.Compile>
>;

/** The request_id of a message, if it has a usable one (for error frames even when invalid). */
export function requestIdOf(value: unknown): string | undefined {
  const id = (value as { request_id?: unknown } | null)?.request_id;
  return typeof id === "string" && id.length <= 200 ? id : undefined;
}

export function parseFrame(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new AppError("VALIDATION_FAILED", `Malformed JSON: ${(e as Error).message}`, { field: "frame" });
  }
}

export function validateClientMessage(value: unknown): ClientMessage {
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new AppError("VALIDATION_FAILED", "A message must be a JSON object with a type", { field: "frame" });
  const type = (value as { type?: unknown }).type;
  if (typeof type !== "string") throw new AppError("VALIDATION_FAILED", "Missing message type", { field: "type" });
  const checker = checkers[type as ClientMessageType];
  if (!checker) {
    throw new AppError("VALIDATION_FAILED", `Unknown message type "${type.slice(0, 60)}" (expected one of ${Object.keys(CLIENT_MESSAGES).join(", ")})`, { field: "type" });
  }
  if (!checker.Check(value)) {
    const err = checker.Errors(value).First();
    const field = err?.path.replace(/^\//, "").replace(/\//g, ".") || "frame";
    throw new AppError("VALIDATION_FAILED", `Invalid ${field}: ${err?.message ?? "invalid value"}`, { field });
  }
  return value as ClientMessage;
}
