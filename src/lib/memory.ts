/**
 * Giving memory back to the system. JavaScriptCore's allocator keeps pages it has freed: after a
 * burst (many sessions streaming at once, a model request over a long conversation) the process
 * stays near its peak though the JS heap is small again (measured: ~100 MiB of heap in a ~290 MiB
 * RSS growth). `releaseMemory` runs a full collection and then `Bun.shrink()`, which returns the
 * allocator's free memory. It is not free — a full collection, and the JIT's code is dropped and
 * compiled again as it runs — so it runs only where there is much to return and nobody waits:
 * after a model request over a large conversation (agents/loop.ts), and once the server has gone
 * idle after a burst (`IdleRelease`). Run periodically while sessions stream (whenever RSS grew by
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
  /** How long the server must have been idle (ms). */
  idleMs?: number;
  /** How much RSS must have grown since the last release (bytes). */
  minGrowth?: number;
  rss?: () => number;
  release?: () => void;
  now?: () => number;
}

/**
 * Hands freed memory back once a burst is over: when nothing has run for `idleMs` and RSS grew by
 * `minGrowth` since the last release (or the start), `release` runs once; then again only after
 * more growth. `check` is called on an interval (app.ts); it costs a counter read when busy.
 */
export class IdleRelease {
  private idleSince: number | null = null;
  private base: number;
  private readonly idleMs: number;
  private readonly minGrowth: number;
  private readonly rss: () => number;
  private readonly release: () => void;
  private readonly now: () => number;
  /** Releases done (tests, logs). */
  releases = 0;

  constructor(private o: IdleReleaseOptions) {
    this.idleMs = o.idleMs ?? 2000;
    this.minGrowth = o.minGrowth ?? 32 * 1024 * 1024;
    this.rss = o.rss ?? residentBytes;
    this.release = o.release ?? releaseMemory;
    this.now = o.now ?? Date.now;
    this.base = this.rss();
  }

  /** Returns the bytes given back (0 when it did not run). */
  check(): number {
    if (this.o.busy()) {
      this.idleSince = null;
      return 0;
    }
    const t = this.now();
    this.idleSince ??= t;
    if (t - this.idleSince < this.idleMs) return 0;
    const before = this.rss();
    // A lower reading (the allocator returned pages by itself) becomes the new base.
    if (before < this.base) this.base = before;
    if (before - this.base < this.minGrowth) return 0;
    this.release();
    this.releases++;
    const after = this.rss();
    this.base = after;
    return Math.max(0, before - after);
  }
}
