/**
 * Throttling of password guesses: sign-in (per account — or per known device, src/auth/device.ts —
 * and per client IP) and the admin password (per client IP; an IPv6 client's /64 counts as one
 * IP). After THRESHOLD failures a key is blocked for an exponentially growing time (2 s, 4 s, 8 s …
 * capped at 15 min); a key with no failure for an hour is forgotten. An attempt is charged
 * *before* the password is checked, so a burst of parallel guesses cannot slip past the threshold
 * while argon2 runs. A success clears the account's (or device's) key, and gives back to the client
 * address only the attempt it was charged: an address's own correct sign-in between guesses at
 * other accounts does not wipe the record of those guesses.
 *
 * Memory is bounded: at most `maxEntries` keys (least recently failed dropped first), and `sweep`
 * (run every minute) removes keys that are neither blocked nor remembered.
 */
import { addressKey } from "../lib/address-key.ts";
import { Errors } from "../lib/errors.ts";

export interface ThrottleOptions {
  /** Failures allowed before the first block. */
  threshold: number;
  /** First block length; doubles with every further failure. */
  baseMs: number;
  maxMs: number;
  /** A key without a failure for this long starts from zero again. */
  forgetMs: number;
  maxEntries: number;
}

export const THROTTLE_DEFAULTS: ThrottleOptions = { threshold: 5, baseMs: 2_000, maxMs: 15 * 60_000, forgetMs: 60 * 60_000, maxEntries: 100_000 };

interface Entry {
  failures: number;
  blockedUntil: number;
  last: number;
}

export class LoginThrottle {
  private entries = new Map<string, Entry>();
  readonly options: ThrottleOptions;

  constructor(
    private now: () => number,
    options: Partial<ThrottleOptions> = {},
  ) {
    this.options = { ...THROTTLE_DEFAULTS, ...options };
  }

  private live(key: string, now: number): Entry | undefined {
    const e = this.entries.get(key);
    if (e && e.blockedUntil <= now && now - e.last > this.options.forgetMs) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }

  /** Milliseconds until every key may try again (0: allowed now). */
  blockedFor(...keys: string[]): number {
    const now = this.now();
    let wait = 0;
    for (const k of keys) {
      const e = this.live(k, now);
      if (e && e.blockedUntil > now) wait = Math.max(wait, e.blockedUntil - now);
    }
    return wait;
  }

  /** Records one failed (or about-to-be-checked) attempt on every key. */
  fail(...keys: string[]) {
    const now = this.now();
    const { threshold, baseMs, maxMs, maxEntries } = this.options;
    for (const k of keys) {
      const e = this.live(k, now) ?? { failures: 0, blockedUntil: 0, last: now };
      e.failures++;
      e.last = now;
      if (e.failures >= threshold) e.blockedUntil = now + Math.min(maxMs, baseMs * 2 ** Math.min(30, e.failures - threshold));
      // Re-insert so the map stays ordered by last failure (oldest first).
      this.entries.delete(k);
      this.entries.set(k, e);
    }
    while (this.entries.size > maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /** A success clears the keys. */
  succeed(...keys: string[]) {
    for (const k of keys) this.entries.delete(k);
  }

  /**
   * Gives back one charged attempt, and the block that charge set: the key was not blocked when the
   * attempt was let through (the next failure blocks it again, as it would have).
   */
  refund(key: string) {
    const e = this.entries.get(key);
    if (!e) return;
    e.failures = Math.max(0, e.failures - 1);
    e.blockedUntil = 0;
    if (e.failures === 0) this.entries.delete(key);
  }

  /**
   * Charge-first guard around one password check: 429 RATE_LIMITED (with Retry-After) while any
   * key is blocked; otherwise charges the attempt and runs `check`. When `check` says ok, the keys
   * are cleared — those in `refundOnly` only get this attempt back.
   */
  async attempt<T>(keys: string[], check: () => Promise<{ ok: boolean; value: T }>, what = "sign-in", refundOnly: readonly string[] = []): Promise<T> {
    const wait = this.blockedFor(...keys);
    if (wait > 0) {
      const sec = Math.max(1, Math.ceil(wait / 1000));
      throw Errors.rateLimited(sec, `Too many failed ${what} attempts: try again in ${sec} s`);
    }
    this.fail(...keys);
    const r = await check();
    if (r.ok) for (const k of keys) refundOnly.includes(k) ? this.refund(k) : this.succeed(k);
    return r.value;
  }

  /** Drops keys that are neither blocked nor remembered any more. */
  sweep() {
    const now = this.now();
    for (const [k, e] of this.entries) if (e.blockedUntil <= now && now - e.last > this.options.forgetMs) this.entries.delete(k);
  }

  get size() {
    return this.entries.size;
  }
}

/**
 * The keys of one password sign-in: the account's — or, from a device known to that account
 * (src/auth/device.ts), the device's — and the client address's (an IPv6 client's whole /64 is
 * one, src/lib/address-key.ts), which a success only refunds.
 */
export function signInKeys(email: string, ip: string | undefined, device?: string | null): { keys: string[]; refundOnly: string[] } {
  const address = `signin:ip:${addressKey(ip ?? "unknown")}`;
  return { keys: [device ? `signin:device:${device}` : `signin:acct:${email}`, address], refundOnly: [address] };
}
export const adminKeys = (ip: string) => [`admin:ip:${addressKey(ip)}`];
