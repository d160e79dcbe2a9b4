/** The dashboard's formatters (web/src/lib/format.ts), as plain functions. */
import { expect, test } from "bun:test";
import { duration } from "../../web/src/lib/format.ts";

test("a tool's duration reads in ms below a second, then in seconds with one decimal, then in minutes", () => {
  expect(duration(0)).toBe("0 ms");
  expect(duration(850)).toBe("850 ms");
  expect(duration(1000)).toBe("1.0 s");
  expect(duration(20_085)).toBe("20.1 s");
  expect(duration(59_940)).toBe("59.9 s");
  expect(duration(185_000)).toBe("3 min 5 s");
});
