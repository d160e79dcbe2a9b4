/**
 * The forms a secret's value is echoed back in, and the placeholder that replaces them (the
 * scrubber of src/agents/scrub.ts; git's messages, src/git/).
 */
export const SCRUBBED = "[redacted secret]";

/**
 * The shortest value that is scrubbed: a shorter one would mangle ordinary text ("pw", "42").
 * The vault refuses a new value shorter than this (src/vault/names.ts).
 */
export const SCRUB_MIN_LENGTH = 4;

/** A part of a value (its token after a scheme or a user name) is scrubbed from this length on. */
const PART_MIN_LENGTH = 8;
const SCHEME = /^(?:bearer|basic|token|bot|apikey)\s+/i;

/**
 * The forms a secret's value can be echoed back in, all scrubbed: the value; the token of a
 * header value (`Bearer <token>`, which servers quote without the scheme); the password of a
 * `user:password` credential; the value percent-encoded (as a URL or a form encodes it, in either
 * case of hex); base64 of the value, of its password part, and of git's Basic credential for it
 * (`x-access-token:<value>`, or `user:password` itself).
 */
export function secretForms(value: string): string[] {
  const forms = new Set([value]);
  const part = (p: string) => {
    if (p.length >= PART_MIN_LENGTH) forms.add(p);
  };
  const base64 = (v: string) => Buffer.from(v).toString("base64").replace(/=+$/, "");
  const token = value.replace(SCHEME, "");
  if (token !== value) part(token);
  const colon = token.indexOf(":");
  const password = colon > 0 ? token.slice(colon + 1) : "";
  part(password);
  // Percent-encoded as URLs do it (upper- and lower-case hex) and as forms do (space as "+").
  for (const encoded of [encodeURIComponent(value), new URLSearchParams({ v: value }).toString().slice(2)]) {
    if (encoded === value) continue;
    forms.add(encoded);
    forms.add(encoded.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
  }
  if (value.length >= PART_MIN_LENGTH) {
    forms.add(base64(value));
    if (colon < 0) forms.add(base64(`x-access-token:${value}`));
  }
  if (password.length >= PART_MIN_LENGTH) forms.add(base64(password));
  return [...forms];
}

/** `text` with every form of `value` replaced by the placeholder (nothing for a value under 4 characters). */
export function redactValue(text: string, value: string | null | undefined): string {
  if (!value || value.length < 4) return text;
  let out = text;
  for (const f of secretForms(value).sort((a, b) => b.length - a.length)) if (f.length >= 4 && out.includes(f)) out = out.split(f).join(SCRUBBED);
  return out;
}
