/** The retry policy's arithmetic, and Retry-After honoured (and capped) against a real server. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { backoffDelay, DEFAULT_RETRY_POLICY, parseRetryAfter, retryableStatus, retryPolicy, setRetryPolicy } from "../../../src/agents/providers/retry.ts";
import { getProvider } from "../../../src/agents/providers/index.ts";
import { startMockAnthropic } from "../../helpers/mock-anthropic.ts";
import type { MockProviderServer } from "../../helpers/mock-provider.ts";
import { FAST_RETRIES, request, run } from "./scenarios.ts";

describe("retry policy", () => {
  const P = { retries: 3, baseDelayMs: 100, maxDelayMs: 1000, maxRetryAfterMs: 5000 };

  test("exponential backoff with jitter between 50% and 100% of the step, capped", () => {
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, P, undefined, () => 1))).toEqual([100, 200, 400, 800]);
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, P, undefined, () => 0))).toEqual([50, 100, 200, 400]);
    expect(backoffDelay(10, P, undefined, () => 1)).toBe(1000);
  });

  test("Retry-After wins over backoff but is capped", () => {
    expect(backoffDelay(0, P, 2500)).toBe(2500);
    expect(backoffDelay(0, P, 60_000)).toBe(5000);
    expect(backoffDelay(0, P, 0)).toBe(0);
  });

  test("Retry-After parsing: retry-after-ms, seconds, HTTP date, junk", () => {
    const h = (o: Record<string, string>) => new Headers(o);
    expect(parseRetryAfter(h({ "retry-after-ms": "250" }))).toBe(250);
    expect(parseRetryAfter(h({ "retry-after": "3" }))).toBe(3000);
    expect(parseRetryAfter(h({ "retry-after": new Date(10_000).toUTCString() }), 4000)).toBe(6000);
    expect(parseRetryAfter(h({ "retry-after": "soon" }))).toBeUndefined();
    expect(parseRetryAfter(h({}))).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });

  test("retryable statuses", () => {
    expect([408, 409, 429, 500, 502, 503, 529].every(retryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 413, 422].some(retryableStatus)).toBe(false);
    expect(retryableStatus(undefined)).toBe(false);
  });

  test("setRetryPolicy changes only the fields given", () => {
    setRetryPolicy({ retries: 7, baseDelayMs: undefined });
    expect(retryPolicy()).toEqual({ ...DEFAULT_RETRY_POLICY, retries: 7 });
    setRetryPolicy(DEFAULT_RETRY_POLICY);
    expect(retryPolicy()).toEqual({ ...DEFAULT_RETRY_POLICY });
  });
});

describe("Retry-After against a server", () => {
  let mock: MockProviderServer;
  beforeAll(() => {
    setRetryPolicy(FAST_RETRIES);
    mock = startMockAnthropic();
  });
  afterAll(async () => {
    setRetryPolicy(DEFAULT_RETRY_POLICY);
    await mock.stop();
  });

  test("a 429 with retry-after-ms waits that long before the next attempt", async () => {
    mock.reset();
    mock.enqueue({ error: { status: 429, message: "rate limited", headers: { "retry-after-ms": "150" } } }, { text: "ok" });
    const { res } = await run(getProvider("anthropic"), request(mock));
    expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    const gap = mock.requests[1]!.receivedAt - mock.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(140);
  });

  test("a Retry-After longer than the cap is cut to the cap", async () => {
    mock.reset();
    mock.enqueue({ error: { status: 503, message: "maintenance", retryAfter: 30 } }, { text: "ok" });
    const { res } = await run(getProvider("anthropic"), request(mock));
    expect(res!.content).toEqual([{ type: "text", text: "ok" }]);
    const gap = mock.requests[1]!.receivedAt - mock.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(FAST_RETRIES.maxRetryAfterMs - 10);
    expect(gap).toBeLessThan(5000);
  });

  test("retries 0: the first failure is final", async () => {
    mock.reset();
    setRetryPolicy({ retries: 0 });
    try {
      mock.enqueue({ error: { status: 500, message: "once" } }, { text: "never" });
      const { err } = await run(getProvider("anthropic"), request(mock));
      expect((err as Error).message).toBe("once");
      expect(mock.requests).toHaveLength(1);
    } finally {
      setRetryPolicy(FAST_RETRIES);
    }
  });
});
