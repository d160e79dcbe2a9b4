/**
 * One token-bucket limiter for every API endpoint, keyed by caller (user id, or client IP when
 * anonymous). Refill `perMinute`/60 tokens a second up to `burst`. Limits change at run time
 * (PATCH /admin/config). Buckets that have refilled completely carry no information and are
 * evicted by `sweep`, so memory stays bounded by the callers active in the last minute or so.
 *
 * Replicas (several servers on one PostgreSQL database) keep no shared bucket: each enforces its
 * share of the configured limit, the rate and the burst divided by the number of live replicas N
 * (`splitAcross`), rounded up and never below 1. A caller whose requests the load balancer spreads
 * over the replicas gets at most the configured limit plus N−1 tokens of rounding; one whose
 * requests all reach one replica (sticky or uneven balancing) gets less, never more. When N
 * changes, every bucket is rescaled to the new share keeping its fill ratio (a caller that had
 * spent half its bucket still has half of the new one).
 */
export interface RateLimitResult {
  ok: boolean;
  /** The burst this server enforces (its share of the configured burst with several replicas). */
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSec: number;
  /** Seconds until one request is allowed again (only meaningful when !ok). */
  retryAfterSec: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** A limit's share on one of `n` replicas: divided, rounded up, at least 1. */
export function shareOf(limit: number, n: number): number {
  return Math.max(1, Math.ceil(limit / Math.max(1, n)));
}

/** A key's space: the part before its first ':' ("ip", "u", "hook"). */
const spaceOf = (key: string) => key.slice(0, key.indexOf(":") + 1);

export class RateLimiter {
  private buckets = new Map<string, Bucket>();
  /** How many buckets each key space holds ("ip:" → 3). */
  private spaces = new Map<string, number>();
  /** What `peek` answers for a bucket that does not exist (a full one), made once per share. */
  private fullResult: RateLimitResult | null = null;
  /** The live replicas the configured limits are divided among (1: the whole limit here). */
  private replicas: () => number = () => 1;
  /** The divisor the buckets were last sized for, and the share it gave. */
  private n = 1;
  private perMinuteShare: number;
  private burstShare: number;

  constructor(
    private perMinute: number,
    private burst: number,
    private now: () => number = () => performance.now(),
  ) {
    this.perMinuteShare = perMinute;
    this.burstShare = burst;
  }

  /**
   * Divides the limits among the live replicas: `count` is read on every take (a field read,
   * src/replicas/registry.ts refreshes it at each heartbeat).
   */
  splitAcross(count: () => number) {
    this.replicas = count;
    this.current();
  }

  configure(perMinute: number, burst: number) {
    this.perMinute = perMinute;
    this.burst = burst;
    this.perMinuteShare = shareOf(perMinute, this.n);
    this.burstShare = shareOf(burst, this.n);
  }

  /** The configured (whole) limits, as PATCH /admin/config sets them. */
  get settings() {
    return { per_minute: this.perMinute, burst: this.burst };
  }

  /** What this server enforces: its share of the limits, and among how many replicas. */
  get share() {
    this.current();
    return { per_minute: this.perMinuteShare, burst: this.burstShare, replicas: this.n };
  }

  /** The 429's message: the limit this server enforces, and with several replicas the whole one it is a share of. */
  exceeded(): string {
    const s = this.share;
    const here = `Rate limit exceeded: ${s.per_minute} requests per minute, burst ${s.burst}`;
    return s.replicas === 1 ? here : `${here} on this server (its share of ${this.perMinute} per minute, burst ${this.burst}, across ${s.replicas} replicas)`;
  }

  /**
   * Follows the live replica count: when it changed, the shares are recomputed and every bucket
   * keeps its fill ratio (brought up to now at the old rate first).
   */
  private current() {
    const n = Math.max(1, Math.floor(this.replicas()) || 1);
    if (n === this.n) return;
    const now = this.now();
    const oldRate = this.perMinuteShare / 60_000;
    const oldBurst = this.burstShare;
    this.n = n;
    this.perMinuteShare = shareOf(this.perMinute, n);
    this.burstShare = shareOf(this.burst, n);
    for (const b of this.buckets.values()) {
      // Multiplied before divided: a full bucket stays exactly full.
      b.tokens = (Math.min(oldBurst, b.tokens + (now - b.at) * oldRate) * this.burstShare) / oldBurst;
      b.at = now;
    }
  }

  take(key: string): RateLimitResult {
    this.current();
    const now = this.now();
    const ratePerMs = this.perMinuteShare / 60_000;
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: this.burstShare, at: now };
      this.buckets.set(key, b);
      const space = spaceOf(key);
      this.spaces.set(space, (this.spaces.get(space) ?? 0) + 1);
    } else {
      b.tokens = Math.min(this.burstShare, b.tokens + (now - b.at) * ratePerMs);
      b.at = now;
    }
    const ok = b.tokens >= 1;
    if (ok) b.tokens -= 1;
    if (key.startsWith("ip:")) this.evictWhenFull((this.burstShare - b.tokens) / ratePerMs);
    return {
      ok,
      limit: this.burstShare,
      remaining: Math.floor(b.tokens),
      resetSec: Math.ceil((this.burstShare - b.tokens) / ratePerMs / 1000),
      retryAfterSec: ok ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / ratePerMs / 1000)),
    };
  }

  /** The caller's bucket as it stands, without taking a token (for responses that are not limited). */
  peek(key: string): RateLimitResult {
    this.current();
    const b = this.buckets.get(key);
    const ratePerMs = this.perMinuteShare / 60_000;
    const tokens = b ? Math.min(this.burstShare, b.tokens + (this.now() - b.at) * ratePerMs) : this.burstShare;
    return { ok: true, limit: this.burstShare, remaining: Math.floor(tokens), resetSec: Math.ceil((this.burstShare - tokens) / ratePerMs / 1000), retryAfterSec: 0 };
  }

  /**
   * Whether any bucket of the key space `space` ("ip:") exists. When none does, every key of it
   * peeks as `full()` — the pipeline then reports a client address's bucket without looking the
   * address up (a `getpeername` call per request).
   */
  holdsAny(space: string): boolean {
    return (this.spaces.get(space) ?? 0) > 0;
  }

  /** What `peek` answers for a bucket that does not exist: full. The same object until the share changes. */
  full(): RateLimitResult {
    this.current();
    const burst = this.burstShare;
    if (this.fullResult?.limit !== burst) this.fullResult = Object.freeze({ ok: true, limit: burst, remaining: Math.floor(burst), resetSec: 0, retryAfterSec: 0 });
    return this.fullResult;
  }

  /** Whether `r` is `full()`'s answer (the same for every caller until the share changes). */
  isFull(r: RateLimitResult): boolean {
    return r === this.fullResult;
  }

  /** Drops buckets that are full again (idle callers). */
  sweep() {
    this.current();
    const now = this.now();
    const ratePerMs = this.perMinuteShare / 60_000;
    let nextIpFullIn = Infinity;
    for (const [key, b] of this.buckets) {
      const deficit = this.burstShare - (b.tokens + (now - b.at) * ratePerMs);
      if (deficit <= 0) {
        this.buckets.delete(key);
        const space = spaceOf(key);
        this.spaces.set(space, this.spaces.get(space)! - 1);
      } else if (key.startsWith("ip:")) nextIpFullIn = Math.min(nextIpFullIn, deficit / ratePerMs);
    }
    if (nextIpFullIn !== Infinity) this.evictWhenFull(nextIpFullIn);
  }

  /**
   * Client addresses' buckets are dropped as soon as they are full again, not only at the minute's
   * sweep: while none exists, the pipeline reports an anonymous caller's bucket without looking
   * its address up (`holdsAny`), a `getpeername` that was a quarter of a /healthz answer's CPU
   * (bench/pipeline.ts) — and one token verified from an address used to cost every request the
   * lookup for a minute. One timer (unref'd) for the earliest; a sweep re-arms it for the next.
   */
  private evictTimer: Timer | null = null;
  private evictAt = Infinity;
  private evictWhenFull(inMs: number) {
    const at = performance.now() + inMs;
    if (this.evictTimer && at >= this.evictAt) return;
    if (this.evictTimer) clearTimeout(this.evictTimer);
    this.evictAt = at;
    this.evictTimer = setTimeout(() => {
      this.evictTimer = null;
      this.evictAt = Infinity;
      this.sweep();
    }, Math.min(60_000, Math.ceil(inMs) + 1));
    this.evictTimer.unref?.();
  }

  /** Stops the eviction timer (a stopping server). */
  close() {
    if (this.evictTimer) clearTimeout(this.evictTimer);
    this.evictTimer = null;
  }

  get size() {
    return this.buckets.size;
  }
}
