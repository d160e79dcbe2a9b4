/**
 * One token-bucket limiter for every API endpoint, keyed by caller (user id, or client IP when
 * anonymous). Refill `perMinute`/60 tokens a second up to `burst`. Limits change at run time
 * (PATCH /admin/config). Buckets that have refilled completely carry no information and are
 * evicted by `sweep`, so memory stays bounded by the callers active in the last minute or so.
 */
export interface RateLimitResult {
  ok: boolean;
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

export class RateLimiter {
  private buckets = new Map<string, Bucket>();
  constructor(
    private perMinute: number,
    private burst: number,
    private now: () => number = () => performance.now(),
  ) {}

  configure(perMinute: number, burst: number) {
    this.perMinute = perMinute;
    this.burst = burst;
  }

  get settings() {
    return { per_minute: this.perMinute, burst: this.burst };
  }

  take(key: string): RateLimitResult {
    const now = this.now();
    const ratePerMs = this.perMinute / 60_000;
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: this.burst, at: now };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * ratePerMs);
      b.at = now;
    }
    const ok = b.tokens >= 1;
    if (ok) b.tokens -= 1;
    return {
      ok,
      limit: this.burst,
      remaining: Math.floor(b.tokens),
      resetSec: Math.ceil((this.burst - b.tokens) / ratePerMs / 1000),
      retryAfterSec: ok ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / ratePerMs / 1000)),
    };
  }

  /** The caller's bucket as it stands, without taking a token (for responses that are not limited). */
  peek(key: string): RateLimitResult {
    const b = this.buckets.get(key);
    const ratePerMs = this.perMinute / 60_000;
    const tokens = b ? Math.min(this.burst, b.tokens + (this.now() - b.at) * ratePerMs) : this.burst;
    return { ok: true, limit: this.burst, remaining: Math.floor(tokens), resetSec: Math.ceil((this.burst - tokens) / ratePerMs / 1000), retryAfterSec: 0 };
  }

  /** Drops buckets that are full again (idle callers). */
  sweep() {
    const now = this.now();
    const ratePerMs = this.perMinute / 60_000;
    for (const [key, b] of this.buckets) {
      if (b.tokens + (now - b.at) * ratePerMs >= this.burst) this.buckets.delete(key);
    }
  }

  get size() {
    return this.buckets.size;
  }
}
