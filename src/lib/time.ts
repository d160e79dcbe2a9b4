/** ISO 8601 UTC with milliseconds, the API's timestamp format. */
export function iso(ms: number): string;
export function iso(ms: number | null | undefined): string | null;
export function iso(ms: number | null | undefined): string | null {
  return ms == null ? null : new Date(ms).toISOString();
}

/**
 * A date or date-time of a query (RFC 3339's profile of ISO 8601): `YYYY-MM-DD`, the UTC day's
 * midnight; or `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with `Z` or a `±HH:MM` offset. A date-time
 * without an offset is refused, not read in the server's time zone (nor guessed to be UTC); so is
 * any other text around or in it, and a date or time the calendar does not have. A fraction past
 * milliseconds is cut. Answers the instant in milliseconds, or why the text is not one.
 */
export function parseInstant(v: string): { ms: number } | { reason: string } {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:\d{2})?)?$/.exec(v);
  if (!m) return { reason: "not a date (YYYY-MM-DD) or a date-time with Z or an offset (YYYY-MM-DDTHH:MM:SSZ, …+01:00)" };
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(0);
  day.setUTCFullYear(y, mo - 1, d); // (Date.UTC would read years 0-99 as 1900-1999)
  // A day that does not exist rolls over (2026-02-30 → March 2nd): refused instead.
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return { reason: `${m[0].slice(0, 10)} is not a day of the calendar` };
  if (m[4] === undefined) return { ms: day.getTime() };
  if (m[8] === undefined) return { reason: "a date-time needs Z (UTC) or an offset such as +01:00" };
  const [h, min, s] = [Number(m[4]), Number(m[5]), Number(m[6] ?? 0)];
  if (h > 23 || min > 59 || s > 59) return { reason: `${m[4]}:${m[5]}${m[6] ? `:${m[6]}` : ""} is not a time of day` };
  let offset = 0;
  if (m[8] !== "Z" && m[8] !== "z") {
    const [oh, om] = [Number(m[8].slice(1, 3)), Number(m[8].slice(4, 6))];
    if (oh > 23 || om > 59) return { reason: `${m[8]} is not a UTC offset` };
    offset = (m[8][0] === "-" ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const fraction = m[7] ? Number(m[7].slice(0, 3).padEnd(3, "0")) : 0;
  return { ms: day.getTime() + ((h * 60 + min) * 60 + s) * 1000 + fraction - offset };
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses "500ms", "10s", "30m", "1h", "7d" or a bare number of seconds into milliseconds. */
export function parseDuration(input: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(input);
  if (!m) return null;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? "s"]!);
}

export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
