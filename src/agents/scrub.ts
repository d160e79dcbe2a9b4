/**
 * Defence in depth for the vault: a secret's value reaches the workspace as an environment
 * variable, so a command could print it. Everything that leaves the container on its way to
 * events, the transcript or the model passes through a scrubber that replaces every secret value
 * of the user with a placeholder.
 */
export const SCRUBBED = "[redacted secret]";

export type Scrubber = (text: string) => string;

export function makeScrubber(values: string[]): Scrubber {
  const secrets = [...new Set(values.filter((v) => v.length >= 4))].sort((a, b) => b.length - a.length);
  if (secrets.length === 0) return (t) => t;
  return (text) => {
    let out = text;
    for (const s of secrets) if (out.includes(s)) out = out.split(s).join(SCRUBBED);
    return out;
  };
}

/** Scrubs every string inside a JSON-like value. */
export function scrubDeep<T>(value: T, scrub: Scrubber): T {
  if (typeof value === "string") return scrub(value) as T;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubDeep(v, scrub)])) as T;
  }
  return value;
}
