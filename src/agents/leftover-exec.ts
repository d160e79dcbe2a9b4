/**
 * A tool call's command that was running when the server stopped without killing it (kill -9, a
 * crash, a lost host): Docker runs it on, and a resumed task must not tell the model it was
 * interrupted while it still has effects (a retry would run beside it). Its process is recorded
 * on the task (`tasks.running_exec`) as soon as the command runs; the resumed task kills what is
 * left of it, then the call's result says what happened. A stop the server saw (SIGTERM, a
 * cancel) killed the command already: then it is found gone.
 */
import type { RunningExec } from "../db/schema.ts";
import type { WorkspacesDep } from "./deps.ts";
import type { Tasks } from "./tasks.ts";

const UNKNOWN = "[interrupted: the server restarted while this tool was running; it may or may not have completed]";
const STOPPED = "[interrupted: the server restarted while this command was running; it ran on until the server was back, then was stopped (its processes killed): it may have had some of its effects]";
const ENDED = "[interrupted: the server restarted while this command was running; it is no longer running, and may or may not have completed]";

/** Records a running call's command on its task; `settled` waits for the write (before the call's result clears it). */
export function execRecorder(tasks: Pick<Tasks, "update">, taskId: string, onError: (e: unknown) => void) {
  let writes: Promise<void> = Promise.resolve();
  return {
    onExec: (e: RunningExec) => {
      writes = writes.then(() => tasks.update(taskId, { running_exec: e })).catch(onError);
    },
    settled: () => writes,
  };
}

/** The result of a call found in flight after a restart, once what is left of its command is killed. */
export async function interruptedResult(workspaces: Pick<WorkspacesDep, "killLeftover">, exec: RunningExec | null, onError: (e: unknown) => void): Promise<string> {
  if (!exec) return UNKNOWN;
  try {
    return (await workspaces.killLeftover(exec)) === "stopped" ? STOPPED : ENDED;
  } catch (e) {
    onError(e);
    const why = e instanceof Error ? e.message : String(e);
    return `[interrupted: the server restarted while this command was running, and it could not be stopped (${why.slice(0, 200)}): it may still be running]`;
  }
}
