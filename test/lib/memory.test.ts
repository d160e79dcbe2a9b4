import { expect, test } from "bun:test";
import { IdleRelease, releaseMemory, residentBytes } from "../../src/lib/memory.ts";

const MiB = 1024 * 1024;

test("a collection once the server has been idle 2 s after growing, a shrink once it has been quiet for 30 s; never while busy", () => {
  let busy = true;
  let now = 0;
  let rss = 100 * MiB;
  const steps: string[] = [];
  const r = new IdleRelease({
    busy: () => busy,
    collectAfterMs: 2000,
    shrinkAfterMs: 30_000,
    minGrowth: 32 * MiB,
    rss: () => rss,
    now: () => now,
    collect: () => {
      steps.push(`collect@${now}`);
      rss -= 20 * MiB;
    },
    shrink: () => {
      steps.push(`shrink@${now}`);
      rss -= 40 * MiB;
    },
  });
  rss = 180 * MiB; // a burst
  now = 10_000;
  expect(r.check()).toBe(0); // busy
  busy = false;
  expect(r.check()).toBe(0); // idle from now on
  now = 11_000;
  expect(r.check()).toBe(0);
  now = 12_000;
  expect(r.check()).toBe(20 * MiB);
  now = 20_000;
  expect(r.check()).toBe(0); // collected once for this burst
  now = 40_000;
  expect(r.check()).toBe(40 * MiB); // 30 s quiet, still 60 MiB above: shrunk
  now = 50_000;
  expect(r.check()).toBe(0);
  expect(steps).toEqual(["collect@12000", "shrink@40000"]);

  // The next burst: busy again resets the clock; too little growth does nothing.
  busy = true;
  rss += 20 * MiB;
  expect(r.check()).toBe(0);
  busy = false;
  now = 60_000;
  r.check();
  now = 63_000;
  expect(r.check()).toBe(0);
  rss += 20 * MiB; // now 40 MiB above the base the shrink left
  expect(r.check()).toBe(20 * MiB);
  expect([r.collections, r.shrinks]).toEqual([2, 1]);
});

test("releaseMemory returns freed memory to the system (a real process)", async () => {
  // 200 MiB of garbage, then a release: the resident set falls back.
  let keep: string[] | null = Array.from({ length: 2000 }, (_, i) => `${i}`.padEnd(100_000, "x"));
  const peak = residentBytes();
  keep = null;
  releaseMemory();
  await Bun.sleep(50);
  expect(keep).toBeNull();
  expect(residentBytes()).toBeLessThan(peak - 64 * MiB);
});
