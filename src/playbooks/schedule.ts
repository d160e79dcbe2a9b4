/**
 * Cron schedules of playbooks (croner: 5 or 6 fields, seconds allowed, nicknames such as
 * "@daily"), in an IANA time zone with DST handled by croner. Only computes times; the scheduler
 * keeps them in rows.
 */
import { Cron } from "croner";
import { Errors } from "../lib/errors.ts";

/** VALIDATION_FAILED on `timezone` unless it is an IANA time zone this runtime knows. */
export function checkTimezone(tz: string): string {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    throw Errors.validation("timezone", `timezone "${tz}" is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)`, { reason: "unknown time zone" });
  }
  return tz;
}

/** VALIDATION_FAILED on `schedule` unless croner parses it and it has a future slot. */
export function checkSchedule(expr: string, tz: string): string {
  let next: Date | null;
  try {
    next = new Cron(expr, { timezone: tz, paused: true }).nextRun();
  } catch (e) {
    throw Errors.validation("schedule", `schedule is not a valid cron expression: ${(e as Error).message.replace(/^CronPattern: /, "")}`, { reason: "invalid cron expression" });
  }
  if (!next) throw Errors.validation("schedule", "schedule never fires (no future time matches it)", { reason: "no future run" });
  return expr;
}

/** The first slot strictly after `after` (ms), or null. */
export function nextSlot(expr: string, tz: string, after: number): number | null {
  return new Cron(expr, { timezone: tz, paused: true }).nextRun(new Date(after))?.getTime() ?? null;
}

/** The next `n` slots after `after`, as ms (for previews). */
export function nextSlots(expr: string, tz: string, after: number, n: number): number[] {
  return new Cron(expr, { timezone: tz, paused: true }).nextRuns(n, new Date(after)).map((d) => d.getTime());
}
