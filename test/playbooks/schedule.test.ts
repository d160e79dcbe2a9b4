/** Cron schedules of playbooks (src/playbooks/schedule.ts): what is accepted, and how a refusal is worded. */
import { expect, test } from "bun:test";
import { AppError } from "../../src/lib/errors.ts";
import { checkSchedule } from "../../src/playbooks/schedule.ts";

const refusal = (expr: string) => {
  try {
    checkSchedule(expr, "UTC");
  } catch (e) {
    return e as AppError;
  }
  throw new Error(`${expr} was accepted`);
};

test("5 fields, 6 fields (seconds first) and nicknames are accepted", () => {
  for (const expr of ["0 3 * * *", "*/10 * * * * *", "@daily", "  0 3 * * 1-5  "]) expect(checkSchedule(expr, "UTC")).toBe(expr);
});

test("7 fields (a year) are refused on `schedule`, worded for our rule; so are fewer than 5", () => {
  for (const expr of ["0 0 3 * * * 2027", "* *", "0 0 0 3 * * * *"]) {
    const e = refusal(expr);
    expect(e).toBeInstanceOf(AppError);
    expect([e.code, e.details?.field]).toEqual(["VALIDATION_FAILED", "schedule"]);
    expect(e.message).toContain("5 fields");
    expect(e.message).toContain("or 6");
    expect(e.message).not.toMatch(/seven/i);
  }
});
