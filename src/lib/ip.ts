/**
 * Address classification for the webhook SSRF guard: which IP addresses a webhook may not reach.
 * Works on the canonical text forms that the WHATWG URL parser and getaddrinfo produce (odd IPv4
 * spellings such as 2130706433, 0x7f.1 or 0177.0.0.1 are canonicalised by `new URL` before they
 * get here). IPv6 forms that carry an IPv4 address (mapped ::ffff:a.b.c.d, compatible ::a.b.c.d,
 * NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the IPv4 address they carry.
 */

/** Why an address is refused ("loopback", "private", …), or null when a webhook may reach it. */
export type BlockReason =
  | "unspecified"
  | "loopback"
  | "private"
  | "link-local"
  | "cgnat"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "invalid";

interface V4Range {
  base: number;
  bits: number;
  reason: BlockReason;
}

const v4 = (cidr: string, reason: BlockReason): V4Range => {
  const [addr, bits] = cidr.split("/") as [string, string];
  return { base: parseIPv4(addr)!, bits: Number(bits), reason };
};

/** Order matters only for the reason reported; every listed range is refused. */
const V4_BLOCKED: V4Range[] = [
  v4("0.0.0.0/8", "unspecified"),
  v4("127.0.0.0/8", "loopback"),
  v4("10.0.0.0/8", "private"),
  v4("172.16.0.0/12", "private"),
  v4("192.168.0.0/16", "private"),
  v4("169.254.0.0/16", "link-local"), // includes 169.254.169.254, the cloud metadata service
  v4("100.64.0.0/10", "cgnat"),
  v4("224.0.0.0/4", "multicast"),
  v4("255.255.255.255/32", "broadcast"),
  v4("240.0.0.0/4", "reserved"),
  v4("192.0.0.0/24", "reserved"), // IETF protocol assignments (e.g. 192.0.0.192, Oracle Cloud metadata)
  v4("192.0.2.0/24", "reserved"), // documentation
  v4("198.51.100.0/24", "reserved"),
  v4("203.0.113.0/24", "reserved"),
  v4("198.18.0.0/15", "reserved"), // benchmarking
];

/** Strict dotted-quad IPv4 → 32-bit unsigned integer, or null. */
export function parseIPv4(s: string): number | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const b = Number(p);
    if (b > 255) return null;
    n = n * 256 + b;
  }
  return n;
}

/** IPv6 text (with `::`, an embedded dotted quad and an optional %zone) → 16 bytes, or null. */
export function parseIPv6(input: string): Uint8Array | null {
  let s = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (!s.includes(":")) return null;
  const words: number[] = [];
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const parseHalf = (h: string): number[] | null => {
    if (h === "") return [];
    const out: number[] = [];
    const groups = h.split(":");
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i]!;
      if (i === groups.length - 1 && g.includes(".")) {
        const four = parseIPv4(g);
        if (four == null) return null;
        out.push(Math.floor(four / 65536), four % 65536);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
        out.push(parseInt(g, 16));
      }
    }
    return out;
  };
  const head = parseHalf(halves[0]!);
  const tail = halves.length === 2 ? parseHalf(halves[1]!) : [];
  if (!head || !tail) return null;
  if (halves.length === 2) {
    const fill = 8 - head.length - tail.length;
    if (fill < 1) return null;
    words.push(...head, ...new Array<number>(fill).fill(0), ...tail);
  } else {
    if (head.length !== 8) return null;
    words.push(...head);
  }
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[i * 2] = w >> 8;
    bytes[i * 2 + 1] = w & 0xff;
  });
  return bytes;
}

function classifyV4(n: number): BlockReason | null {
  for (const r of V4_BLOCKED) {
    const size = 2 ** (32 - r.bits);
    if (Math.floor(n / size) === Math.floor(r.base / size)) return r.reason;
  }
  return null;
}

const v4At = (b: Uint8Array, at: number) => ((b[at]! << 24) >>> 0) + (b[at + 1]! << 16) + (b[at + 2]! << 8) + b[at + 3]!;
const zeros = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every((x) => x === 0);

function classifyV6(b: Uint8Array): BlockReason | null {
  if (zeros(b, 0, 16)) return "unspecified";
  if (zeros(b, 0, 15) && b[15] === 1) return "loopback";
  // IPv4-mapped ::ffff:a.b.c.d and IPv4-translated ::ffff:0:a.b.c.d
  if (zeros(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyV4(v4At(b, 12));
  if (zeros(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(b, 10, 12)) return classifyV4(v4At(b, 12));
  // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks)
  if (zeros(b, 0, 12)) return classifyV4(v4At(b, 12)) ?? "reserved";
  // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (zeros(b, 4, 12)) return classifyV4(v4At(b, 12));
    if (b[4] === 0 && b[5] === 1) return "reserved";
  }
  // 6to4 2002:AABB:CCDD::/48 carries a.b.c.d in bytes 2..5
  if (b[0] === 0x20 && b[1] === 0x02) return classifyV4(v4At(b, 2));
  // Teredo 2001:0::/32 tunnels to addresses we cannot judge: refuse
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) return "reserved";
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return "reserved"; // 2001:db8::/32 documentation
  if (b[0] === 0x01 && b[1] === 0x00 && zeros(b, 2, 8)) return "reserved"; // 100::/64 discard
  if ((b[0]! & 0xfe) === 0xfc) return "private"; // fc00::/7 unique local
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return "link-local"; // fe80::/10
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return "private"; // fec0::/10 site-local (deprecated)
  if (b[0] === 0xff) return "multicast";
  return null;
}

/** The reason `address` (an IP literal, brackets allowed) is refused, or null if allowed. */
export function classifyAddress(address: string): BlockReason | null {
  const four = parseIPv4(address);
  if (four != null) return classifyV4(four);
  const six = parseIPv6(address);
  if (six) return classifyV6(six);
  return "invalid";
}

/** True when `host` (a URL hostname, brackets allowed) is an IP literal rather than a name. */
export function isIpLiteral(host: string): boolean {
  return parseIPv4(host) != null || parseIPv6(host) != null;
}

export const REASON_TEXT: Record<BlockReason, string> = {
  unspecified: "an unspecified address",
  loopback: "a loopback address",
  private: "a private-network address",
  "link-local": "a link-local address (cloud metadata lives there)",
  cgnat: "a carrier-grade NAT address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
  reserved: "a reserved or special-purpose address",
  invalid: "not a valid IP address",
};
