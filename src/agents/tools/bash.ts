import { Type } from "@sinclair/typebox";
import { ok, type Tool } from "./types.ts";

export const BASH_DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_TIMEOUT_MS = 600_000;
export const BASH_MAX_OUTPUT = 30_000;

export const bashTool: Tool = {
  name: "Bash",
  description:
    "Run a shell command in the workspace container (cwd /workspace, /bin/sh). Returns combined stdout and stderr and the exit code. " +
    `Output over ${BASH_MAX_OUTPUT} bytes is truncated. Default timeout 120000 ms, at most 600000 ms.`,
  input_schema: Type.Object({
    command: Type.String({ minLength: 1, description: "The command to run" }),
    timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: BASH_MAX_TIMEOUT_MS, description: "Timeout in milliseconds" })),
    description: Type.Optional(Type.String({ description: "What the command does, in a few words" })),
  }),
  async run(input, ctx) {
    const timeoutMs = (input.timeout as number | undefined) ?? BASH_DEFAULT_TIMEOUT_MS;
    const r = await ctx.workspace.exec(ctx.sessionId, {
      cmd: ["/bin/sh", "-c", input.command as string],
      timeoutMs,
      maxOutputBytes: BASH_MAX_OUTPUT,
      signal: ctx.signal,
      onRunning: ctx.onExec,
    });
    const notes: string[] = [];
    if (r.truncated) notes.push(`[output truncated to ${BASH_MAX_OUTPUT} bytes]`);
    const stopped = r.notKilled ? `the command could not be stopped (${r.notKilled.slice(0, 200)}): it may still be running` : "the command was killed";
    if (r.timedOut) notes.push(`[timed out after ${timeoutMs} ms; ${stopped}]`);
    if (r.cancelled) notes.push(r.notKilled ? `[cancelled; ${stopped}]` : "[cancelled]");
    notes.push(`[exit code: ${r.exitCode ?? "none"}]`);
    const body = r.output.endsWith("\n") || r.output === "" ? r.output : r.output + "\n";
    return { output: body + notes.join("\n"), isError: r.timedOut || r.cancelled };
  },
};

export { ok };
