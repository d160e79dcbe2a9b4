/**
 * Defence in depth for the vault: a secret's value reaches the workspace as an environment
 * variable, so a command could print it, and a remote server given it (a model, an MCP or git
 * server) may quote it back. Everything that leaves the container or such a server on its way to
 * events, the transcript or the model passes through a scrubber that replaces every secret value
 * of the user — in the forms it is echoed in (`secretForms`) — with a placeholder. Values added during a task (a secret set or rotated meanwhile)
 * join the set, and none leaves it: a deleted secret's value may still sit in the workspace.
 *
 * Streamed text is scrubbed across chunk boundaries: `stream()` holds back the tail of what it has
 * seen that could be the beginning of a secret, until the next chunk shows whether it is one (or
 * `flush()` at the end of the model response).
 */
import { SCRUB_MIN_LENGTH as MIN_LENGTH, SCRUBBED, secretForms } from "../lib/secret-forms.ts";

export { SCRUBBED, secretForms };

export interface StreamScrub {
  /** The part of the text so far that is safe to send now. */
  push(text: string): string;
  /** What was held back, scrubbed (call at the end of the stream). */
  flush(): string;
}

export interface Scrubber {
  (text: string): string;
  /** Adds values to scrub from now on. */
  add(values: string[]): void;
  stream(): StreamScrub;
}

export function makeScrubber(initial: string[]): Scrubber {
  let secrets: string[] = [];
  const known = new Set<string>();
  const add = (values: string[]) => {
    let changed = false;
    for (const value of values) {
      for (const v of secretForms(value)) {
        if (v.length < MIN_LENGTH || known.has(v)) continue;
        known.add(v);
        changed = true;
      }
    }
    if (changed) secrets = [...known].sort((a, b) => b.length - a.length);
  };
  add(initial);
  const scrub = ((text: string) => {
    let out = text;
    for (const s of secrets) if (out.includes(s)) out = out.split(s).join(SCRUBBED);
    return out;
  }) as Scrubber;
  scrub.add = add;
  scrub.stream = () => {
    let held = "";
    return {
      push(text) {
        // `held` is raw text. Cut where the earliest tail that is a proper prefix of some secret
        // begins (it may still become one: a shorter secret inside it is not replaced yet, or the
        // rest of the longer one would leak), and never inside a complete occurrence.
        const all = held + text;
        let cut = all.length;
        for (const s of secrets) {
          const n = longestPrefixAtEnd(all, s);
          if (n > all.length - cut) cut = all.length - n;
        }
        for (let moved = true; moved; ) {
          moved = false;
          for (const s of secrets) {
            const i = all.indexOf(s, Math.max(0, cut - s.length + 1));
            if (i !== -1 && i < cut) {
              cut = i;
              moved = true;
            }
          }
        }
        held = all.slice(cut);
        return scrub(all.slice(0, cut));
      },
      flush() {
        const rest = scrub(held);
        held = "";
        return rest;
      },
    };
  };
  return scrub;
}

/** Two odd bases of polynomial hashes modulo 2^32 (Math.imul: integer arithmetic, no division). */
const B1 = 0x01000193;
const B2 = 0x5bd1e995;

/**
 * The length of the longest proper prefix of `secret` that `text` ends with (0: none), in time
 * linear in the secret's length: the prefixes' and the text's suffixes' polynomial hashes are
 * grown one character at a time and compared. (Comparing each prefix with endsWith is quadratic:
 * a 64 KiB secret of one letter against text of that letter held the event loop for seconds.) A
 * hash collision only holds back text that the next push or the flush then releases, scrubbed.
 */
export function longestPrefixAtEnd(text: string, secret: string): number {
  const max = Math.min(secret.length - 1, text.length);
  const end = text.length;
  let hp1 = 0;
  let hp2 = 0;
  let hs1 = 0;
  let hs2 = 0;
  let pw1 = 1;
  let pw2 = 1;
  let best = 0;
  for (let n = 1; n <= max; n++) {
    const c = secret.charCodeAt(n - 1);
    hp1 = (Math.imul(hp1, B1) + c) | 0;
    hp2 = (Math.imul(hp2, B2) + c) | 0;
    const d = text.charCodeAt(end - n);
    hs1 = (Math.imul(d, pw1) + hs1) | 0;
    hs2 = (Math.imul(d, pw2) + hs2) | 0;
    pw1 = Math.imul(pw1, B1);
    pw2 = Math.imul(pw2, B2);
    if (hp1 === hs1 && hp2 === hs2) best = n;
  }
  return best;
}

/** Scrubs every string inside a JSON-like value. */
export function scrubDeep<T>(value: T, scrub: (text: string) => string): T {
  if (typeof value === "string") return scrub(value) as T;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubDeep(v, scrub)])) as T;
  }
  return value;
}
