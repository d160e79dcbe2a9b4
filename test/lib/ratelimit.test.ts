/**
 * The token bucket's share among replicas (src/lib/ratelimit.ts): with N live replicas each one
 * enforces ceil(limit / N) of the rate and the burst, never less than 1; the sum over the replicas
 * stays within the configured limit plus N−1; when N changes, every bucket keeps its fill ratio;
 * with one replica (SQLite) nothing changes. A fake clock: no waiting, exact numbers.
 */
import { describe, expect, test } from "bun:test";
import { RateLimiter, shareOf } from "../../src/lib/ratelimit.ts";

function limiter(perMinute: number, burst: number, replicas: { n: number }) {
  const clock = { t: 0 };
  const l = new RateLimiter(perMinute, burst, () => clock.t);
  l.splitAcross(() => replicas.n);
  return { l, clock };
}

/** Tokens a caller gets at once from a limiter. */
const drain = (l: RateLimiter, key = "u:1") => {
  let n = 0;
  while (l.take(key).ok) n++;
  return n;
};

describe("shareOf", () => {
  test.each([
    [60, 1, 60],
    [60, 2, 30],
    [20, 3, 7],
    [21, 2, 11],
    [10, 4, 3],
    [1, 5, 1],
    [3, 10, 1],
    [10, 0, 10],
  ])("%i over %i replicas → %i", (limit, n, share) => {
    expect(shareOf(limit, n)).toBe(share);
  });

  test("the sum over N replicas is within [limit, limit + N − 1] whenever limit ≥ N", () => {
    for (let limit = 1; limit <= 200; limit++) {
      for (let n = 1; n <= Math.min(limit, 16); n++) {
        const sum = n * shareOf(limit, n);
        expect(sum).toBeGreaterThanOrEqual(limit);
        expect(sum).toBeLessThanOrEqual(limit + n - 1);
      }
    }
  });
});

describe("a limiter split across replicas", () => {
  test("one replica (SQLite, or a lone server): the configured limit, unchanged", () => {
    const { l } = limiter(60, 10, { n: 1 });
    const first = l.take("u:1");
    expect(first).toMatchObject({ ok: true, limit: 10, remaining: 9 });
    expect(drain(l)).toBe(9);
    expect(l.share).toEqual({ per_minute: 60, burst: 10, replicas: 1 });
    expect(l.exceeded()).toBe("Rate limit exceeded: 60 requests per minute, burst 10");
  });

  test("three replicas: burst 20 → 7 here, rate 60/min → 20/min (Retry-After 3 s), the headers' limit is the share", () => {
    const { l, clock } = limiter(60, 20, { n: 3 });
    expect(l.peek("u:1")).toMatchObject({ limit: 7, remaining: 7 });
    expect(drain(l)).toBe(7);
    const refused = l.take("u:1");
    expect(refused).toMatchObject({ ok: false, limit: 7, remaining: 0 });
    // 20 a minute: one token every 3 s.
    expect(refused.retryAfterSec).toBe(3);
    expect(refused.resetSec).toBe(21);
    clock.t += 2999;
    expect(l.take("u:1").ok).toBe(false);
    clock.t += 2;
    expect(l.take("u:1").ok).toBe(true);
    expect(l.settings).toEqual({ per_minute: 60, burst: 20 });
    expect(l.share).toEqual({ per_minute: 20, burst: 7, replicas: 3 });
    expect(l.exceeded()).toBe("Rate limit exceeded: 20 requests per minute, burst 7 on this server (its share of 60 per minute, burst 20, across 3 replicas)");
  });

  test("a caller spread over N replicas gets at most the configured burst plus N − 1, and a caller stuck to one gets its share only", () => {
    for (const [burst, n] of [[20, 2], [21, 2], [10, 3], [7, 4], [100, 7]] as const) {
      const replicas = { n };
      const servers = Array.from({ length: n }, () => limiter(60, burst, replicas).l);
      // Round robin until every server refuses.
      let accepted = 0;
      for (let i = 0; i < 10 * burst; i++) if (servers[i % n]!.take("u:spread").ok) accepted++;
      expect(accepted).toBeGreaterThanOrEqual(burst);
      expect(accepted).toBeLessThanOrEqual(burst + n - 1);
      expect(drain(servers[0]!, "u:sticky")).toBe(Math.ceil(burst / n));
    }
  });

  test("N changes: the buckets rescale keeping their fill ratio, the shares follow at once", () => {
    const replicas = { n: 1 };
    const { l } = limiter(60, 20, replicas);
    for (let i = 0; i < 10; i++) expect(l.take("u:half").ok).toBe(true);
    expect(l.peek("u:full")).toMatchObject({ limit: 20, remaining: 20 });
    l.take("u:empty");
    drain(l, "u:empty");

    replicas.n = 2;
    expect(l.peek("u:half")).toMatchObject({ limit: 10, remaining: 5 });
    expect(l.peek("u:full")).toMatchObject({ limit: 10, remaining: 10 });
    expect(l.peek("u:empty")).toMatchObject({ limit: 10, remaining: 0 });
    expect(drain(l, "u:half")).toBe(5);

    // A replica left: back to the whole limit; the half-spent bucket of 10 (now empty) stays empty,
    // a fresh caller gets the whole burst.
    replicas.n = 1;
    expect(l.peek("u:half")).toMatchObject({ limit: 20, remaining: 0 });
    expect(l.peek("u:new")).toMatchObject({ limit: 20, remaining: 20 });
    expect(drain(l, "u:new")).toBe(20);
  });

  test("a rescale first brings a bucket up to now at the old rate", () => {
    const replicas = { n: 1 };
    const { l, clock } = limiter(60, 10, replicas);
    drain(l);
    clock.t += 4000; // 4 tokens back at 60/min
    replicas.n = 2; // 4 of 10 → 2 of 5
    expect(l.peek("u:1")).toMatchObject({ limit: 5, remaining: 2 });
    clock.t += 2000; // 30/min: one more token
    expect(l.peek("u:1").remaining).toBe(3);
  });

  test("PATCH /admin/config's new limits are divided too; sweep drops buckets full at the share", () => {
    const replicas = { n: 4 };
    const { l, clock } = limiter(60, 10, replicas);
    l.configure(120, 41);
    expect(l.share).toEqual({ per_minute: 30, burst: 11, replicas: 4 });
    expect(l.settings).toEqual({ per_minute: 120, burst: 41 });
    l.take("u:1");
    expect(l.size).toBe(1);
    l.sweep();
    expect(l.size).toBe(1);
    clock.t += 2000; // 30/min: one token in 2 s, full again
    l.sweep();
    expect(l.size).toBe(0);
  });
});

describe("key spaces and the full bucket (the pipeline's /healthz reports an address's bucket without looking the address up while no address has one)", () => {
  test("holdsAny follows the buckets of a space as they are made and swept; full() is what peek says of a missing bucket, one object per share", () => {
    const replicas = { n: 1 };
    const { l, clock } = limiter(60, 10, replicas);
    expect(l.holdsAny("ip:")).toBe(false);
    const full = l.full();
    expect(full).toEqual(l.peek("ip:192.0.2.1"));
    expect(l.full()).toBe(full);
    expect(l.isFull(full)).toBe(true);
    expect(l.isFull(l.peek("ip:192.0.2.1"))).toBe(false);
    l.take("u:1");
    expect(l.holdsAny("ip:")).toBe(false);
    expect(l.holdsAny("u:")).toBe(true);
    l.take("ip:192.0.2.1");
    l.take("ip:192.0.2.2");
    expect(l.holdsAny("ip:")).toBe(true);
    expect(l.peek("ip:192.0.2.1").remaining).toBe(9);
    clock.t += 1000; // one token back: both addresses full again, swept
    l.sweep();
    expect(l.holdsAny("ip:")).toBe(false);
    expect(l.holdsAny("u:")).toBe(false);
    // The share changes: a new full report, with the new limit.
    replicas.n = 2;
    expect(l.full()).not.toBe(full);
    expect(l.full()).toMatchObject({ limit: 5, remaining: 5, resetSec: 0 });
  });
});

test("a client address's bucket is dropped once it is full again, without waiting for the sweep", async () => {
  const limiter = new RateLimiter(60_000, 5); // a token a millisecond
  limiter.take("ip:10.0.0.1");
  limiter.take("ip:10.0.0.1");
  limiter.take("u:usr_1");
  expect(limiter.holdsAny("ip:")).toBe(true);
  await Bun.sleep(30);
  expect(limiter.holdsAny("ip:")).toBe(false);
  limiter.close();
});
