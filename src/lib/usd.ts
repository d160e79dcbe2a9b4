/**
 * Whether an amount of dollars has reached a limit (a task's max_budget_usd, a monthly cap). Costs
 * are sums of floating-point amounts, and 0.7 + 0.1 is 0.7999999999999999: compared as they are, a
 * cost that adds up exactly to the budget would still be under it and buy one more model request.
 * Both sides are compared on a grid of a billionth of a dollar — far finer than any price, far
 * coarser than the rounding error of such sums — so the result does not depend on how (or whether)
 * the stored cost was rounded.
 */
const GRID = 1e9;

export const usdReached = (spent: number, limit: number): boolean => Math.round(spent * GRID) >= Math.round(limit * GRID);
