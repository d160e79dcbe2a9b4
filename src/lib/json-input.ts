/**
 * What every JSON a client sends (a request body, a stream message) must be besides valid JSON,
 * checked where it is read, before anything else looks at it:
 * - at most MAX_DEPTH levels of arrays and objects (checked on the text, before it is parsed):
 *   deeper values would overflow the stack of the code that walks them (validation, scrubbing,
 *   printing a playbook's input);
 * - no U+0000 in a string or key: PostgreSQL's text and jsonb cannot hold it (SQLite can), so it
 *   would be stored on one database and an internal error on the other;
 * - no lone UTF-16 surrogate (`"\ud800"`): it cannot be stored as UTF-8 and would come back as
 *   U+FFFD, not as the answer showed it;
 * - no `__proto__` key: the copies made of bodies would turn it into an object's prototype and
 *   drop it silently.
 * A query parameter or path with U+0000 is refused by the router (src/http/router.ts). What
 * runcell stores from elsewhere (model text, tool output) is made storable in src/db/pg/.
 */
import { AppError, Errors } from "./errors.ts";

export const MAX_DEPTH = 64;

/** How deep the arrays and objects of JSON `text` nest (strings skipped). */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // \ escapes the next character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) max = depth;
    } else if (c === 93 || c === 125) depth--;
  }
  return max;
}

type Problem = "NUL character" | "lone surrogate" | "__proto__ key";

const problemOf = (s: string): Problem | null => (s.includes("\0") ? "NUL character" : !s.isWellFormed() ? "lone surrogate" : null);

/** The field (`prompt`, `env.A`, `repositories[0].url`) of the first string or key with a problem, and the problem. */
export function badField(value: unknown, base = ""): { field: string; problem: Problem } | null {
  if (typeof value === "string") {
    const problem = problemOf(value);
    return problem ? { field: base || "body", problem } : null;
  }
  if (!value || typeof value !== "object") return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const f = badField(value[i], `${base}[${i}]`);
      if (f) return f;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    const at = base ? `${base}.${k}` : k;
    if (k === "__proto__") return { field: at, problem: "__proto__ key" };
    const problem = problemOf(k);
    if (problem) return { field: at, problem };
    const f = badField(v, at);
    if (f) return f;
  }
  return null;
}

/** The field of the first string or key holding U+0000, or null. */
export const nulField = (value: unknown): string | null => {
  const f = badField(value);
  return f?.problem === "NUL character" ? f.field : null;
};


/** VALIDATION_FAILED when JSON `text` nests deeper than MAX_DEPTH (call before parsing it). */
export function refuseDeep(text: string, field = "body"): void {
  if (text.length > 2 * MAX_DEPTH && jsonDepth(text) > MAX_DEPTH) {
    throw Errors.validation(field, `The JSON nests deeper than ${MAX_DEPTH} levels of arrays and objects`, { reason: "too deep", max_depth: MAX_DEPTH });
  }
}

/** VALIDATION_FAILED naming the field when parsed JSON `value` (from `text`) holds U+0000, a lone surrogate or a `__proto__` key. */
export function refuseBadStrings(text: string, value: unknown): void {
  // Each can only come from a \u escape (a NUL, a surrogate, a key spelled "\u005f_proto__") or
  // the key's plain name in the text: without either, nothing to walk.
  if (!text.includes("\\u") && !text.includes("__proto__")) return;
  const bad = badField(value);
  if (bad) throw problemError(bad.field, bad.problem);
}

export function problemError(field: string, problem: Problem) {
  const shown = field.replace(/\0/g, "\\u0000").replace(/\p{Cs}/gu, "\\ufffd").slice(0, 200);
  const why =
    problem === "NUL character"
      ? "must not contain NUL (U+0000) characters"
      : problem === "lone surrogate"
        ? "must not contain a lone UTF-16 surrogate (not a character: it cannot be stored as UTF-8)"
        : "is not a name a field may have";
  return Errors.validation(field, `${shown} ${why}`, { reason: problem });
}

export const nulError = (field: string) => problemError(field, "NUL character");

/**
 * A client's JSON text (a request body, a stream message) parsed under every rule above: too deep
 * is refused before parsing, a syntax error names its reason (`Malformed JSON<what>: …`, never the
 * text), and a parsed value is checked for NUL, lone surrogates and `__proto__` keys. `field` names
 * the whole of it in the error (`body`, `frame`).
 */
export function parseClientJson(text: string, field: string, what: string): unknown {
  refuseDeep(text, field);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new AppError("VALIDATION_FAILED", `Malformed JSON${what}: ${syntaxReason(e)}`, { field });
  }
  refuseBadStrings(text, value);
  return value;
}

/**
 * Why JSON.parse refused a client's text, for the error body: the parser's reason without the
 * excerpt it quotes (`Unexpected identifier "sk_live_…"` — an unquoted secret or password would
 * otherwise come back in the answer, and from there into proxies' and clients' logs).
 */
export function syntaxReason(e: unknown): string {
  const reason = String((e as Error)?.message ?? e)
    .replace(/^JSON Parse error:\s*/, "")
    .replace(/\s*"(?:[^"\\]|\\.)*"?/g, "")
    .replace(/(Invalid escape character)\s*\S+$/, "$1")
    .trim();
  return reason || "not valid JSON";
}
