/**
 * The key a client address is limited under (the rate-limit bucket, the sign-in and admin-password
 * throttles). An IPv4 address is its own key; an IPv6 client normally holds a whole /64 (2^64
 * addresses it can rotate through at will), so an IPv6 address is keyed by its /64 prefix, as
 * Cloudflare, GitHub and nginx's guides do. Only keys use this: logs, audit rows and the admin
 * views keep the full address.
 */
import { parseIPv4, parseIPv6 } from "./ip.ts";

const v4Text = (b: Uint8Array, at: number) => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;

/** The eight 16-bit groups in RFC 5952 form: lowercase, no leading zeros, the longest run of two or more zero groups (the first of equals) as `::`. */
function v6Text(words: number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  if (best < 0) return hex(words);
  return `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

/**
 * `address` → its limiter key: an IPv4 address (also written as an IPv4-mapped `::ffff:a.b.c.d`
 * or IPv4-compatible `::a.b.c.d` IPv6 address, as a dual-stack socket reports an IPv4 client) →
 * the dotted quad; any other IPv6 address → its /64 prefix (`2001:db8:1:2::/64`), a zone id
 * dropped; anything that is not an IP address (`unknown`) → itself.
 */
export function addressKey(address: string): string {
  const four = parseIPv4(address);
  if (four != null) return `${four >>> 24}.${(four >>> 16) & 255}.${(four >>> 8) & 255}.${four & 255}`;
  const b = parseIPv6(address);
  if (!b) return address;
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4Text(b, 12); // mapped
  // compatible (deprecated); :: and ::1 are not IPv4 addresses
  if (zeros(0, 12) && !zeros(12, 15)) return v4Text(b, 12);
  const words = [0, 2, 4, 6].map((i) => (b[i]! << 8) | b[i + 1]!);
  return `${v6Text([...words, 0, 0, 0, 0])}/64`;
}
