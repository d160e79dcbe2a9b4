/**
 * Giving memory back to the system. JavaScriptCore's allocator keeps pages it has freed: after a
 * burst (many sessions streaming at once, a model request over a long conversation) the process
 * stays near its peak though the JS heap is small again (measured: ~100 MiB of heap in a ~290 MiB
 * RSS growth). `releaseMemory` runs a full collection and then `Bun.shrink()`, which returns the
 * allocator's free memory. It is not free — a full collection, and the JIT's code is dropped and
 * compiled again as it runs — so it runs only where there is much to return and nobody waits:
 * after a model request over a large conversation (agents/loop.ts), and once the server has been
 * quiet for a while after a burst (`IdleRelease`). Run periodically while sessions stream (whenever RSS grew by
 * 16 MiB; tried with 40 sessions streaming at once), it lowered the peak 7.3× → 4.1× the streamed
 * text but raised the relay latency while it ran (p50 3 → 27 ms, p99 202 → 337 ms): not kept.
 */

export function releaseMemory(): void {
  Bun.gc(true);
  (Bun as { shrink?: () => void }).shrink?.();
}

/** The process's resident set, in bytes (VmRSS). */
export function residentBytes(): number {
  return process.memoryUsage.rss();
}

export interface IdleReleaseOptions {
  /** Whether work is running that a collection's pause would hold up (tasks streaming). */
  busy: () => boolean;
  /** Idle this long (ms): a full collection. */
  collectAfterMs?: number;
  /** Idle this long (ms): the allocator's free pages returned too (JIT code dropped). */
  shrinkAfterMs?: number;
  /** How much RSS must have grown since the last release (bytes). */
  minGrowth?: number;
  rss?: () => number;
  collect?: () => void;
  shrink?: () => void;
  now?: () => number;
}

/**
 * Hands freed memory back once a burst is over, in two steps while nothing runs: after
 * `collectAfterMs` a full collection (the burst's garbage goes; the allocator reuses its pages),
 * after `shrinkAfterMs` `releaseMemory` (the free pages go back to the system — and the JIT's
 * code with them, which is why it waits for a server that has really gone quiet: dropped 2 s after
 * a burst, the next burst ran on cold code, session.ready p50 36 → 68 ms at N=100). Each step runs
 * once per burst, only when RSS grew by `minGrowth` since the last one. `check` is called on an
 * interval (app.ts); while busy it costs a counter read.
 */
export class IdleRelease {
  private idleSince: number | null = null;
  private base: number;
  private collected = false;
  private readonly collectAfterMs: number;
  private readonly shrinkAfterMs: number;
  private readonly minGrowth: number;
  private readonly rss: () => number;
  private readonly collect: () => void;
  private readonly shrink: () => void;
  private readonly now: () => number;
  /** Steps run (tests, logs). */
  collections = 0;
  shrinks = 0;

  constructor(private o: IdleReleaseOptions) {
    this.collectAfterMs = o.collectAfterMs ?? 2000;
    this.shrinkAfterMs = o.shrinkAfterMs ?? 30_000;
    this.minGrowth = o.minGrowth ?? 32 * 1024 * 1024;
    this.rss = o.rss ?? residentBytes;
    this.collect = o.collect ?? (() => Bun.gc(true));
    this.shrink = o.shrink ?? releaseMemory;
    this.now = o.now ?? Date.now;
    this.base = this.rss();
  }

  /** Returns the bytes given back by the step it ran (0 when it ran none). */
  check(): number {
    if (this.o.busy()) {
      this.idleSince = null;
      this.collected = false;
      return 0;
    }
    const t = this.now();
    this.idleSince ??= t;
    const idle = t - this.idleSince;
    if (idle < this.collectAfterMs) return 0;
    const before = this.rss();
    // A lower reading (the allocator returned pages by itself) becomes the new base.
    if (before < this.base) this.base = before;
    const shrinkNow = idle >= this.shrinkAfterMs;
    if (this.collected && !shrinkNow) return 0;
    if (before - this.base < this.minGrowth) return 0;
    if (shrinkNow) {
      this.shrink();
      this.shrinks++;
      this.base = this.rss();
    } else {
      this.collect();
      this.collections++;
      this.collected = true;
    }
    return Math.max(0, before - this.rss());
  }
}
