import { expect, test } from "bun:test";
import { usdReached } from "../../src/lib/usd.ts";

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
