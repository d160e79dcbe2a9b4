/**
 * U+0000 in what clients send. PostgreSQL's text and jsonb cannot hold it (SQLite can), so a NUL
 * in a request would be stored on one database and an internal error on the other: it is refused
 * where requests are read (a JSON body or stream frame, a query string, a path), the same on both.
 * What runcell stores from elsewhere (model text, tool output) is made storable in src/db/pg/.
 */
import { Errors } from "./errors.ts";

/** The field (`prompt`, `env.A`, `repositories[0].url`) of the first string or key holding U+0000, or null. */
export function nulField(value: unknown, base = ""): string | null {
  if (typeof value === "string") return value.includes("\0") ? base || "body" : null;
  if (!value || typeof value !== "object") return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const f = nulField(value[i], `${base}[${i}]`);
      if (f) return f;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    const at = base ? `${base}.${k}` : k;
    if (k.includes("\0")) return at;
    const f = nulField(v, at);
    if (f) return f;
  }
  return null;
}

/** VALIDATION_FAILED naming the field when parsed JSON `value` (from `text`) holds U+0000. */
export function refuseNul(text: string, value: unknown): void {
  // JSON can carry U+0000 only escaped: without the escape there is nothing to look for.
  if (!text.includes("\\u0000")) return;
  const field = nulField(value);
  if (field) throw nulError(field);
}

export const nulError = (field: string) => Errors.validation(field, `${field.replace(/\0/g, "\\u0000")} must not contain NUL (U+0000) characters`, { reason: "NUL character" });
