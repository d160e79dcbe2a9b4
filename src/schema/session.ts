/** Agent sessions: the conversation record, and the body that starts one. */
import { sessions } from "../db/schema.ts";
import { Body, Nullable, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

export const SESSION_STATES = ["active", "idle"] as const;

export const SessionRecord = T.Object(
  {
    ...recordColumns(sessions, ["id", "profile_id"]),
    container_id: Nullable(T.String(), { description: "ctr_… of its workspace, null when it has none" }),
    status: OneOf(SESSION_STATES, { description: "active: a task is queued, running or waiting for an answer" }),
    ...recordColumns(sessions, ["title", "input_tokens", "output_tokens", "cost_usd"]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Session" },
);
export type SessionRecord = Static<typeof SessionRecord>;

export const SessionCreateBody = Body({ profile_id: T.String() });
