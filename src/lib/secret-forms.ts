/**
 * The forms a secret's value is echoed back in, and the placeholder that replaces them (the
 * scrubber of src/agents/scrub.ts; git's messages, src/git/).
 */
export const SCRUBBED = "[redacted secret]";

/** A part of a value (its token after a scheme or a user name) is scrubbed from this length on. */
const PART_MIN_LENGTH = 8;
const SCHEME = /^(?:bearer|basic|token|bot|apikey)\s+/i;

/**
 * The forms a secret's value can be echoed back in, all scrubbed: the value; the token of a
 * header value (`Bearer <token>`, which servers quote without the scheme); the password of a
 * `user:password` credential; the value percent-encoded (a URL or a query); base64 of the value,
 * and of git's Basic credential for it (`x-access-token:<value>`, or `user:password` itself).
 */
export function secretForms(value: string): string[] {
  const forms = new Set([value]);
  const part = (p: string) => {
    if (p.length >= PART_MIN_LENGTH) forms.add(p);
  };
  const token = value.replace(SCHEME, "");
  if (token !== value) part(token);
  const colon = token.indexOf(":");
  if (colon > 0) part(token.slice(colon + 1));
  const encoded = encodeURIComponent(value);
  if (encoded !== value) forms.add(encoded);
  if (value.length >= PART_MIN_LENGTH) {
    forms.add(Buffer.from(value).toString("base64").replace(/=+$/, ""));
    if (colon < 0) forms.add(Buffer.from(`x-access-token:${value}`).toString("base64").replace(/=+$/, ""));
  }
  return [...forms];
}

/** `text` with every form of `value` replaced by the placeholder (nothing for a value under 4 characters). */
export function redactValue(text: string, value: string | null | undefined): string {
  if (!value || value.length < 4) return text;
  let out = text;
  for (const f of secretForms(value).sort((a, b) => b.length - a.length)) if (f.length >= 4 && out.includes(f)) out = out.split(f).join(SCRUBBED);
  return out;
}
