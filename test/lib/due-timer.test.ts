/** The one-timer-for-many-due-times primitive behind schedules and answer timeouts. */
import { expect, test } from "bun:test";
import { DueTimer } from "../../src/lib/due-timer.ts";

test("fires once at the earliest armed time; a later arm does not delay it", async () => {
  const fired: number[] = [];
  const start = Date.now();
  const timer = new DueTimer(() => fired.push(Date.now() - start));
  timer.arm(start + 80);
  timer.arm(start + 30);
  timer.arm(start + 500);
  await Bun.sleep(150);
  expect(fired).toHaveLength(1);
  expect(fired[0]!).toBeGreaterThanOrEqual(29);
  expect(fired[0]!).toBeLessThan(80);
  timer.stop();
});

test("reset replaces the armed time (also with a later one, or none); stop silences it", async () => {
  let n = 0;
  const timer = new DueTimer(() => n++);
  timer.arm(Date.now() + 20);
  timer.reset(Date.now() + 120);
  await Bun.sleep(60);
  expect(n).toBe(0);
  expect(timer.armedAt).not.toBeNull();
  timer.reset(null);
  expect(timer.armedAt).toBeNull();
  timer.arm(Date.now() + 10);
  timer.stop();
  await Bun.sleep(100);
  expect(n).toBe(0);
  timer.arm(Date.now());
  await Bun.sleep(20);
  expect(n).toBe(0);
});

test("a due time in the past fires at once; one beyond setTimeout's range waits (and does not fire early)", async () => {
  let n = 0;
  const timer = new DueTimer(() => n++);
  timer.arm(Date.now() - 5000);
  await Bun.sleep(10);
  expect(n).toBe(1);
  timer.arm(Date.now() + 40 * 24 * 3600 * 1000);
  await Bun.sleep(20);
  expect(n).toBe(1);
  timer.stop();
});
