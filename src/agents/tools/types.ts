import type { TSchema } from "@sinclair/typebox";
import type { RunningExec } from "../../db/schema.ts";

/** What a tool may touch: the session's workspace (through Docker exec) and the notifier. */
export interface WorkspaceOps {
  exec(
    sessionId: string,
    opts: { cmd: string[]; stdin?: string | Uint8Array; timeoutMs?: number; maxOutputBytes?: number; signal?: AbortSignal; onRunning?: (e: RunningExec) => void },
  ): Promise<{ exitCode: number | null; output: string; truncated: boolean; timedOut: boolean; cancelled: boolean; notKilled?: string }>;
  readFile(sessionId: string, path: string): Promise<Uint8Array>;
  writeFile(sessionId: string, path: string, data: string | Uint8Array): Promise<void>;
}

export interface ToolContext {
  userId: string;
  sessionId: string;
  taskId: string;
  signal: AbortSignal;
  workspace: WorkspaceOps;
  /** A command of this call runs in the workspace: recorded, so a restarted server can kill what is left of it. */
  onExec?: (e: RunningExec) => void;
  /** Queues a notification from the agent; null when the user has no webhook configured. */
  notify(input: { message: string; urgency: "low" | "normal" | "high" }): Promise<{ id: string } | null>;
}

export interface ToolResult {
  output: string;
  isError: boolean;
}

export interface Tool {
  name: string;
  description: string;
  input_schema: TSchema;
  run(input: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult>;
}

export const ok = (output: string): ToolResult => ({ output, isError: false });
export const fail = (output: string): ToolResult => ({ output, isError: true });

/** Relative paths resolve under /workspace (the tools' working directory). */
export function workspacePath(path: string): string {
  return path.startsWith("/") ? path : `/workspace/${path.replace(/^\.\//, "")}`;
}
