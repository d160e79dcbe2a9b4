/**
 * Parallel container starts with bounded parallelism. The engine serialises much of a container
 * creation internally, so sending it every start at once makes all of them finish late together;
 * this gate keeps at most `limit()` creations in flight and lets the others wait in order
 * (first come, first served), so the first sessions are ready first and each waiting start knows
 * its place. Session starts go ahead of warm-pool refills, which only use a free slot — and,
 * while the server is busy (`poolLimit`: tasks running, wired by the app), only one: a hundred
 * refills' container creations take both CPUs of a small server (runc, containerd), and every
 * running session's streamed text then waits for the CPU (bench/scale.ts).
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
    /**
     * At most this many creations in flight while pool refills are admitted (a refill takes a slot
     * only below it; session starts are held to `limit` alone). Default: `limit`.
     */
    private poolLimit: () => number = limit,
  ) {}

  /** Slots a refill may take now: the smaller of the two limits, at least one. */
  private poolCap(): number {
    return Math.max(1, Math.min(this.limit(), this.poolLimit()));
  }

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
    const free = this.active < (kind === "session" ? Math.max(1, this.limit()) : this.poolCap());
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
    // The slot passes straight to the next waiting session (`active` stays), or to the next refill
    // while refills may hold that many slots; else it is freed.
    const next = this.sessions.shift() ?? (this.active <= this.poolCap() ? this.pool.shift() : undefined);
    if (next) next.resolve();
    else this.active--;
    // The refills' limit may have grown since they queued (the tasks ended): as many as fit now.
    while (this.sessions.length === 0 && this.pool.length > 0 && this.active < this.poolCap()) {
      this.active++;
      this.pool.shift()!.resolve();
    }
  }
}
