/**
 * Prefixed, time-ordered identifiers: `<prefix>_<10 chars time><16 chars randomness>` in Crockford
 * base32, lower case (26 chars, like a ULID). Ordering by id is ordering by creation, which is
 * what keyset pagination ("newest first") relies on; ids made in the same millisecond in this
 * process still sort in creation order (the random part is incremented).
 */
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export const PREFIX = {
  user: "usr",
  token: "tok",
  login: "login",
  task: "task",
  playbook: "pb",
  session: "sess",
  profile: "prof",
  container: "ctr",
  integration: "int",
  notification: "ntf",
  oauth: "oac",
  audit: "aud",
  replica: "rep",
} as const;
export type IdKind = keyof typeof PREFIX;

let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encodeTime(ms: number): string {
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  // 80 bits → 16 base32 chars.
  let out = "";
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

function increment(bytes: Uint8Array): Uint8Array {
  const next = bytes.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 255) {
      next[i]!++;
      return next;
    }
    next[i] = 0;
  }
  return crypto.getRandomValues(new Uint8Array(10));
}

export function ulid(now = Date.now()): string {
  if (now <= lastTime) {
    lastRandom = increment(lastRandom);
  } else {
    lastTime = now;
    lastRandom = crypto.getRandomValues(new Uint8Array(10));
  }
  return encodeTime(lastTime) + encodeRandom(lastRandom);
}

export function newId(kind: IdKind): string {
  return `${PREFIX[kind]}_${ulid()}`;
}

/** True when `value` looks like an id of `kind` (used to reject garbage before a query). */
export function isId(kind: IdKind, value: string): boolean {
  return value.length === PREFIX[kind].length + 27 && value.startsWith(PREFIX[kind] + "_");
}
