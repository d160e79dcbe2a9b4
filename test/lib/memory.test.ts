import { expect, test } from "bun:test";
import { IdleRelease, releaseMemory, residentBytes } from "../../src/lib/memory.ts";

const MiB = 1024 * 1024;

test("released once the server has been idle long enough and grew enough; not while busy; again only after more growth", () => {
  let busy = true;
  let now = 0;
  let rss = 100 * MiB;
  const released: number[] = [];
  const r = new IdleRelease({ busy: () => busy, idleMs: 2000, minGrowth: 32 * MiB, rss: () => rss, now: () => now, release: () => {
    released.push(now);
    rss -= 40 * MiB;
  } });
  rss = 180 * MiB; // a burst
  now = 10_000;
  expect(r.check()).toBe(0); // busy
  busy = false;
  expect(r.check()).toBe(0); // idle only from now
  now = 11_000;
  expect(r.check()).toBe(0);
  now = 12_000;
  expect(r.check()).toBe(40 * MiB);
  expect(released).toEqual([12_000]);
  now = 20_000;
  expect(r.check()).toBe(0); // no growth since
  rss += 20 * MiB;
  expect(r.check()).toBe(0); // not enough
  busy = true;
  rss += 20 * MiB;
  expect(r.check()).toBe(0);
  busy = false;
  now = 21_000;
  expect(r.check()).toBe(0); // idle again, but not long enough
  now = 23_000;
  expect(r.check()).toBe(40 * MiB);
  expect(r.releases).toBe(2);
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
