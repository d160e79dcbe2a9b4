/**
 * Parallel container starts with bounded parallelism. The engine serialises much of a container
 * creation internally, so sending it every start at once makes all of them finish late together;
 * this gate keeps at most `limit()` creations in flight and lets the others wait in order
 * (first come, first served), so the first sessions are ready first and each waiting start knows
 * its place. Session starts go ahead of warm-pool refills, which only use a free slot.
 */

export type StartKind = "session" | "pool";

export interface GateObserver {
  /** A start had to wait: its 1-based position among the waiting starts of its kind and ahead of it. */
  queued?(kind: StartKind, position: number): void;
  /** A start got its slot after waiting `seconds` (0 when it did not wait). */
  admitted?(kind: StartKind, seconds: number): void;
}

interface Waiter {
  resolve: () => void;
}

export class StartGate {
  private active = 0;
  private sessions: Waiter[] = [];
  private pool: Waiter[] = [];

  constructor(
    private limit: () => number,
    public observer: GateObserver = {},
  ) {}

  /** Starts waiting for a slot now. */
  get waiting(): number {
    return this.sessions.length + this.pool.length;
  }

  /** Starts holding a slot now. */
  get running(): number {
    return this.active;
  }

  /**
   * Runs `fn` once a slot is free. `onQueued` hears the start's position when it must wait: for a
   * session start, the session starts ahead of it plus one (pool refills never go ahead of it).
   */
  async run<T>(kind: StartKind, fn: () => Promise<T>, onQueued?: (position: number) => void): Promise<T> {
    await this.acquire(kind, onQueued);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(kind: StartKind, onQueued?: (position: number) => void): Promise<void> {
    const free = this.active < Math.max(1, this.limit());
    // A session takes a free slot unless sessions already wait; a refill only when nobody waits.
    if (free && (kind === "session" ? this.sessions.length === 0 : this.waiting === 0)) {
      this.active++;
      this.observer.admitted?.(kind, 0);
      return Promise.resolve();
    }
    const queue = kind === "session" ? this.sessions : this.pool;
    return new Promise<void>((resolve) => {
      const at = performance.now();
      queue.push({
        resolve: () => {
          this.observer.admitted?.(kind, (performance.now() - at) / 1000);
          resolve();
        },
      });
      const position = kind === "session" ? queue.length : this.sessions.length + queue.length;
      this.observer.queued?.(kind, position);
      onQueued?.(position);
    });
  }

  private release() {
    const next = this.sessions.shift() ?? this.pool.shift();
    // The slot passes straight to the next waiter (`active` stays), else it is freed.
    if (next) next.resolve();
    else this.active--;
  }
}
