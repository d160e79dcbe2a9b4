/** Small formatters shared by the views. */
export const usd = (n: number | null | undefined) => `$${(n ?? 0) < 0.01 && (n ?? 0) > 0 ? (n ?? 0).toFixed(4) : (n ?? 0).toFixed(2)}`;
export const int = (n: number | null | undefined) => (n ?? 0).toLocaleString("en-US");

/** A duration: "850 ms", "20.1 s", "3 min 5 s". */
export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 59_950) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 86_400_000],
  ["month", 30 * 86_400_000],
  ["day", 86_400_000],
  ["hour", 3_600_000],
  ["minute", 60_000],
];
const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** "3 minutes ago", "yesterday", "just now". */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const diff = new Date(iso).getTime() - now;
  for (const [unit, ms] of UNITS) if (Math.abs(diff) >= ms) return rtf.format(Math.round(diff / ms), unit);
  return "just now";
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "—");

/** A time shown relative, with the exact time as its tooltip — spread on the element: `<td {...stamp(iso)} />`. */
export const stamp = (iso: string | null | undefined) => ({ title: when(iso), children: ago(iso) });
