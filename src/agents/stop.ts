/**
 * Why a task's run was stopped (its AbortSignal's reason), and what that leaves — one rule for the
 * loop, the orchestrator and the setup steps (clones, MCP connects) that run before the loop.
 */

/**
 * "cancel" ends the task cancelled; "shutdown" (the server stopping) and "lease-lost" (another
 * replica took the task over, or it ended elsewhere: src/agents/leases.ts) leave it as stored, for
 * whoever continues it — nothing more is written by this run.
 */
export type StopReason = "cancel" | "shutdown" | "lease-lost";

/** What a stop leaves: the task cancelled, or interrupted (as stored, continued from its last step). */
export const stopOutcome = (reason: unknown): "cancelled" | "interrupted" => (reason === "shutdown" || reason === "lease-lost" ? "interrupted" : "cancelled");

/** A tool result's words when the user cancelled it. */
export const CANCELLED_BY_USER = "[cancelled by the user]";

/** Ends the text of an answer the user cancelled while it streamed, as the conversation keeps it. */
export const CANCELLED_ANSWER = "[the user cancelled this answer here]";
