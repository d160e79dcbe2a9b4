/**
 * Amounts in USD. Shown rounded to 1e-9, the precision a model request's cost is computed to
 * (src/agents/pricing.ts): the records (a task, a session, a playbook run), usage reports and the
 * monthly spend are rounded the same way, so the sum of the shown task costs is the shown total,
 * up to that last digit. Limits are compared on the same grid.
 */
const GRID = 1e9;

export const roundUsd = (n: number) => Math.round(n * GRID) / GRID;

/** The same amount for a sentence: decimals, never an exponent (4.5e-7 is "0.00000045"). */
export const formatUsd = (n: number) => roundUsd(n).toFixed(9).replace(/\.?0+$/, "");

/**
 * Whether an amount of dollars has reached a limit (a task's max_budget_usd, a monthly cap). Costs
 * are sums of floating-point amounts, and 0.7 + 0.1 is 0.7999999999999999: compared as they are, a
 * cost that adds up exactly to the budget would still be under it and buy one more model request.
 * Both sides are compared on the billionth-of-a-dollar grid — far finer than any price, far
 * coarser than the rounding error of such sums — so the result does not depend on how (or whether)
 * the stored cost was rounded.
 */
export const usdReached = (spent: number, limit: number): boolean => Math.round(spent * GRID) >= Math.round(limit * GRID);
