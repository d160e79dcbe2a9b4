/** Background work owned by the app: started after the server listens, stopped in reverse order. */
import type { Logger } from "../log.ts";

export interface Worker {
  name: string;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

/**
 * A job on an interval that never overlaps itself and logs its failures; `stop` waits for a run
 * in progress. `runAtStart` runs it once immediately.
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
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
