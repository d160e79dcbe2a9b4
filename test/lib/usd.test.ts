/** Amounts in USD (src/lib/usd.ts): rounded to 1e-9; written in a sentence without an exponent; limits compared on that grid. */
import { expect, test } from "bun:test";
import { formatUsd, roundUsd, usdReached } from "../../src/lib/usd.ts";

test("rounded to 1e-9, so sums of shown costs are the shown totals", () => {
  expect(roundUsd(4.5e-7)).toBe(4.5e-7);
  expect(roundUsd(4.5e-7 * 3)).toBe(1.35e-6);
  expect(roundUsd(0.1 + 0.2)).toBe(0.3);
  expect(roundUsd(1.2345678914)).toBe(1.234567891);
  expect(roundUsd(0.0000000004)).toBe(0);
});

test("in a sentence: decimals without trailing zeros, never an exponent", () => {
  expect([0, 4.5e-7, 0.0123, 1, 100, 0.1 + 0.2, 1e-9].map(formatUsd)).toEqual(["0", "0.00000045", "0.0123", "1", "100", "0.3", "0.000000001"]);
});

test("a sum that adds up to the limit has reached it, whatever its float error; a billionth short has not", () => {
  expect(0.7 + 0.1 < 0.8).toBe(true);
  expect(usdReached(0.7 + 0.1, 0.8)).toBe(true);
  expect(usdReached(0.1 + 0.2, 0.3)).toBe(true);
  // Rounded to the millionth (as a stored or displayed cost may be), the same answer.
  expect(usdReached(Math.round((0.7 + 0.1) * 1e6) / 1e6, 0.8)).toBe(true);
  let sum = 0;
  for (let i = 0; i < 1000; i++) sum += 0.001;
  expect(usdReached(sum, 1)).toBe(true);
  expect(usdReached(0.8 - 1e-9, 0.8)).toBe(false);
  expect(usdReached(0.8 + 1e-9, 0.8)).toBe(true);
  expect(usdReached(0, 0.000001)).toBe(false);
  expect(usdReached(9999.999999999, 10000)).toBe(false);
  expect(usdReached(10000, 10000)).toBe(true);
});
