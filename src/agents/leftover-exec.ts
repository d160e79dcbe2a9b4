/**
 * A tool call's command that was running when the server stopped without killing it (kill -9, a
 * crash, a lost host): Docker runs it on, and a resumed task must not tell the model it was
 * interrupted while it still has effects (a retry would run beside it). Its process is recorded
 * on the task (`tasks.running_exec`) as soon as the command runs; the resumed task kills what is
 * left of it, then the call's result says what happened. A task that ends without resuming (a
 * cancel, a resumed run that fails before it reaches the call) kills it the same way as it ends
 * (orchestrator.ts `end`). A stop the server saw (SIGTERM, a cancel) killed the command already:
 * then it is found gone — after a SIGTERM with the output the command had printed until then
 * (`stopped_output`, recorded by the loop as it stops), which the resumed task reports.
 */
import type { RunningExec } from "../db/schema.ts";
import type { WorkspacesDep } from "./deps.ts";
import type { Tasks } from "./tasks.ts";

const UNKNOWN = "[interrupted: the server running this task stopped while this tool was running (the task was then resumed); it may or may not have completed]";
const STOPPED = "[interrupted: the server running this task stopped while this command was running; the command ran on until the task was resumed, then was stopped (its processes killed): it may have had some of its effects]";
// "The server running this task": after a restart, or another replica that took the task over (PostgreSQL).
const STOPPED_AT_SHUTDOWN =
  "[interrupted: the server was stopped while this command was running, and stopped the command with it (its processes killed) unless it had just finished; above is its output up to then]";
const ENDED = "[interrupted: the server running this task stopped while this command was running; it is no longer running, and may or may not have completed]";

/** What became of a leftover command: killed now, found ended, or not killable (why). */
export type LeftoverFate = "stopped" | "gone" | { notStopped: string };

/** Records a running call's command on its task; `settled` waits for the write (before the call's result clears it). */
export function execRecorder(tasks: Pick<Tasks, "update">, taskId: string, onError: (e: unknown) => void) {
  let writes: Promise<void> = Promise.resolve();
  let last: RunningExec | null = null;
  return {
    onExec: (e: RunningExec) => {
      last = e;
      writes = writes.then(() => tasks.update(taskId, { running_exec: e })).catch(onError);
    },
    settled: () => writes,
    /** The command recorded last (null: none ran). */
    last: () => last,
  };
}

/** Kills what is left of a recorded command (only if its process is still the one recorded). */
export async function stopLeftover(workspaces: Pick<WorkspacesDep, "killLeftover">, exec: RunningExec, onError: (e: unknown) => void): Promise<LeftoverFate> {
  try {
    return await workspaces.killLeftover(exec);
  } catch (e) {
    onError(e);
    const why = e instanceof Error ? e.message : String(e);
    return { notStopped: why.slice(0, 200) };
  }
}

/** The result of a call found in flight after a restart, once what is left of its command is killed. */
export async function interruptedResult(workspaces: Pick<WorkspacesDep, "killLeftover">, exec: RunningExec | null, onError: (e: unknown) => void): Promise<string> {
  if (!exec) return UNKNOWN;
  const fate = await stopLeftover(workspaces, exec, onError);
  if (fate === "stopped") return STOPPED;
  // A graceful stop stopped it (its output then was kept): what it printed, and why it ended there.
  if (fate === "gone" && exec.stopped_output !== undefined) return `${exec.stopped_output}${exec.stopped_output.endsWith("\n") || !exec.stopped_output ? "" : "\n"}${STOPPED_AT_SHUTDOWN}`;
  if (fate === "gone") return ENDED;
  return `[interrupted: the server running this task stopped while this command was running, and it could not be stopped (${fate.notStopped}): it may still be running]`;
}

/**
 * The result of a call still in flight when its task ended without running on (`why`: how it
 * ended); `fate`: what became of its leftover command, when one was recorded.
 */
export function endedResult(why: string, fate: LeftoverFate | null): string {
  if (!fate) return `[interrupted: ${why}; it may or may not have completed]`;
  if (fate === "stopped") return `[interrupted: ${why}; its command was still running (the server that started it had stopped), and was then stopped (its processes killed): it may have had some of its effects]`;
  if (fate === "gone") return `[interrupted: ${why}; its command is no longer running, and may or may not have completed]`;
  return `[interrupted: ${why}; its command could not be stopped (${fate.notStopped}): it may still be running]`;
}
