/**
 * Giving memory back to the system. JavaScriptCore's allocator keeps pages it has freed: after a
 * burst (many sessions streaming at once, a model request over a long conversation) the process
 * stays near its peak though the JS heap is small again (measured: ~100 MiB of heap in a ~290 MiB
 * RSS growth). `releaseMemory` runs a full collection and then `Bun.shrink()`, which returns the
 * allocator's free memory. It is not free — a full collection, and the JIT's code is dropped and
 * compiled again as it runs — so it runs only where there is much to return: after a model
 * request over a large conversation (agents/loop.ts). Run periodically whenever RSS grew by 16 MiB
 * (tried: 40 sessions streaming at once), it lowered the peak 7.3× → 4.1× the streamed text but
 * raised the relay latency while it ran (p50 3 → 27 ms, p99 202 → 337 ms): not kept.
 */

export function releaseMemory(): void {
  Bun.gc(true);
  (Bun as { shrink?: () => void }).shrink?.();
}
