/**
 * Cron schedules of playbooks (croner: 5 or 6 fields, seconds allowed, nicknames such as
 * "@daily"), in an IANA time zone with DST handled by croner. Only computes times; the scheduler
 * keeps them in rows.
 */
import { Cron } from "croner";
import { Errors } from "../lib/errors.ts";

/**
 * The IANA time zone `tz` names, spelled as the tz database spells it ("utc" → "UTC",
 * "europe/berlin" → "Europe/Berlin"); VALIDATION_FAILED on `timezone` for anything else. `Intl`
 * also takes UTC offsets ("+02:00"), which are not zone names and would not follow DST: refused.
 */
export function checkTimezone(tz: string): string {
  let name: string | undefined;
  if (/^[A-Za-z]/.test(tz)) {
    try {
      name = new Intl.DateTimeFormat("en-US", { timeZone: tz }).resolvedOptions().timeZone;
    } catch {}
  }
  if (!name) throw Errors.validation("timezone", `timezone "${tz}" is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)`, { reason: "unknown time zone" });
  return name;
}

/**
 * VALIDATION_FAILED on `schedule` unless it has 5 or 6 fields (or is a nickname), croner parses it
 * and it has a future slot. croner also takes a 7th field (a year); the documented syntax does not,
 * so it is refused here before croner sees it.
 */
export function checkSchedule(expr: string, tz: string): string {
  const fields = expr.trim().split(/\s+/).length;
  if (!expr.trim().startsWith("@") && fields !== 5 && fields !== 6) {
    throw Errors.validation(
      "schedule",
      `schedule must have 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), or be a nickname such as @daily; got ${fields}`,
      { reason: "invalid cron expression" },
    );
  }
  let next: Date | null;
  try {
    next = new Cron(expr, { timezone: tz, paused: true }).nextRun();
  } catch (e) {
    throw Errors.validation("schedule", `schedule is not a valid cron expression: ${(e as Error).message.replace(/^CronPattern: /, "")}`, { reason: "invalid cron expression" });
  }
  if (!next) throw Errors.validation("schedule", "schedule never fires (no future time matches it)", { reason: "no future run" });
  return expr;
}

/** How many upcoming runs the floor is checked over: a cron's intervals vary (0,1 * * * * runs twice a minute apart, then waits). */
const FLOOR_WINDOW = 10;

/**
 * VALIDATION_FAILED on `schedule` when two of its next runs (after `after`) are closer than
 * `floorSec` (the operator's min_schedule_interval). Checked over the next FLOOR_WINDOW runs, not
 * every run forever: a pattern whose runs bunch up only later in the year passes here and is
 * thinned to the floor when it fires.
 */
export function checkInterval(expr: string, tz: string, floorSec: number, after: number): void {
  const runs = nextSlots(expr, tz, after, FLOOR_WINDOW);
  let closest = Infinity;
  for (let i = 1; i < runs.length; i++) closest = Math.min(closest, runs[i]! - runs[i - 1]!);
  if (closest >= floorSec * 1000) return;
  throw Errors.validation(
    "schedule",
    `schedule runs ${closest / 1000} s apart at its closest; this server allows a playbook's schedule to run at most once every ${floorSec} s (min_schedule_interval: the operator sets it with --min-schedule-interval or PATCH /admin/config, or for one user with PATCH /admin/users/:id)`,
    { reason: "too frequent", limit: "min_schedule_interval", min: floorSec },
  );
}

/**
 * Parsed patterns, shared by the playbooks that use the same one, each with the last answer of
 * nextSlot: for any `after` in [from, next) the next slot is `next` again (croner's search costs
 * tens of µs; a thousand playbooks on one pattern due in one second ask the same question).
 */
interface Parsed {
  cron: Cron;
  from: number;
  next: number | null;
}
const parsed = new Map<string, Parsed>();
const PARSED_MAX = 1000;

function entry(expr: string, tz: string): Parsed {
  const key = `${tz}\n${expr}`;
  let p = parsed.get(key);
  if (!p) {
    if (parsed.size >= PARSED_MAX) parsed.delete(parsed.keys().next().value!);
    parsed.set(key, (p = { cron: new Cron(expr, { timezone: tz, paused: true }), from: Infinity, next: null }));
  }
  return p;
}

const cron = (expr: string, tz: string) => entry(expr, tz).cron;

/** The first slot strictly after `after` (ms), or null. */
export function nextSlot(expr: string, tz: string, after: number): number | null {
  const p = entry(expr, tz);
  if (p.next !== null && p.from <= after && after < p.next) return p.next;
  p.from = after;
  p.next = p.cron.nextRun(new Date(after))?.getTime() ?? null;
  return p.next;
}

/** The next `n` slots after `after`, as ms (for previews). */
export function nextSlots(expr: string, tz: string, after: number, n: number): number[] {
  return cron(expr, tz).nextRuns(n, new Date(after)).map((d) => d.getTime());
}
