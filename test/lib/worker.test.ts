/**
 * src/lib/worker.ts: an interval job never overlaps itself; `stop` waits for a run in progress —
 * up to the shutdown timeout when given, then leaves it (a periodic pass held by an engine that
 * does not answer must not hold a SIGTERM for minutes), saying so in the log.
 */
import { expect, test } from "bun:test";
import { createLogger } from "../../src/log.ts";
import { intervalWorker, settledWithin } from "../../src/lib/worker.ts";

test("stop waits for a run in progress to end", async () => {
  let ended = false;
  const w = intervalWorker(createLogger({ level: "error" }), "job", 60_000, async () => {
    await Bun.sleep(100);
    ended = true;
  }, { runAtStart: true });
  w.start();
  await w.stop(5_000);
  expect(ended).toBe(true);
});

test("a run that never ends is waited for only up to waitMs, and the log says so", async () => {
  const lines: string[] = [];
  const w = intervalWorker(createLogger({ level: "warn", sink: (l) => lines.push(l) }), "workspace-reconcile", 60_000, () => new Promise(() => {}), { runAtStart: true });
  w.start();
  const t0 = performance.now();
  await w.stop(200);
  const took = performance.now() - t0;
  expect(took).toBeGreaterThanOrEqual(190);
  expect(took).toBeLessThan(2_000);
  expect(lines.map((l) => JSON.parse(l))).toEqual([
    expect.objectContaining({ level: "warn", msg: "workspace-reconcile still running at shutdown; not waited for (it runs again at the next start)", waited_ms: 200 }),
  ]);
});

test("a run does not overlap itself", async () => {
  let runs = 0;
  let release = () => {};
  const w = intervalWorker(createLogger({ level: "error" }), "job", 10, () => {
    runs++;
    return new Promise<void>((r) => (release = r));
  }, { runAtStart: true });
  w.start();
  await Bun.sleep(100);
  expect(runs).toBe(1);
  release();
  await w.stop(1_000);
});

test("settledWithin: true for a promise that settles (rejected too) in time, false for one that does not", async () => {
  expect(await settledWithin(Bun.sleep(10), 1_000)).toBe(true);
  expect(await settledWithin(Promise.reject(new Error("x")), 1_000)).toBe(true);
  expect(await settledWithin(new Promise(() => {}), 50)).toBe(false);
});
