/** Background work owned by the app: started after the server listens, stopped in reverse order. */
import type { Logger } from "../log.ts";

export interface Worker {
  name: string;
  start(): void | Promise<void>;
  /**
   * `waitMs`: how long a periodic job's run in progress is waited for (the shutdown timeout); a run
   * still going then is left to end with the process — a periodic pass is redone at the next
   * start. Workers whose stop saves state (the agent runtime) always finish it.
   */
  stop(waitMs?: number): void | Promise<void>;
}

/**
 * A job on an interval that never overlaps itself and logs its failures; `stop` waits for a run
 * in progress (up to `waitMs` when given). `runAtStart` runs it once immediately.
 */
export function intervalWorker(log: Logger, name: string, everyMs: number, fn: () => unknown, opts: { runAtStart?: boolean } = {}): Worker {
  let timer: Timer | null = null;
  let running: Promise<unknown> | null = null;
  const tick = () => {
    if (running) return;
    running = Promise.resolve()
      .then(fn)
      .catch((e) => log.warn(`${name} failed`, { err: e }))
      .finally(() => (running = null));
  };
  return {
    name,
    start() {
      if (opts.runAtStart) tick();
      timer = setInterval(tick, everyMs);
      timer.unref?.();
    },
    async stop(waitMs?: number) {
      if (timer) clearInterval(timer);
      timer = null;
      if (running && !(await settledWithin(running, waitMs))) log.warn(`${name} still running at shutdown; not waited for (it runs again at the next start)`, { waited_ms: waitMs });
    },
  };
}

/** Whether `p` settles within `ms` (undefined: waits for it). */
export async function settledWithin(p: Promise<unknown>, ms: number | undefined): Promise<boolean> {
  if (ms === undefined) {
    await p.catch(() => {});
    return true;
  }
  let wait: Timer | undefined;
  const ended = await Promise.race([p.then(() => true, () => true), new Promise<boolean>((r) => (wait = setTimeout(() => r(false), ms)))]);
  clearTimeout(wait);
  return ended;
}
