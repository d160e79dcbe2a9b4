/** A background job on an interval that never overlaps itself and logs its failures. */
import type { Logger } from "../log.ts";
import { dockerMessage } from "./docker.ts";

export function intervalWorker(log: Logger, name: string, everyMs: number, runAtStart: boolean, fn: () => Promise<unknown>) {
  let timer: Timer | null = null;
  let running: Promise<unknown> | null = null;
  const tick = () => {
    if (running) return;
    running = fn()
      .catch((e) => log.warn(`${name} failed`, { error: dockerMessage(e) }))
      .finally(() => (running = null));
  };
  return {
    name,
    start() {
      if (runAtStart) tick();
      timer = setInterval(tick, everyMs);
      timer.unref?.();
    },
    async stop() {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
