/** The limiter key of a client address: IPv4 as is (also in IPv6 dress), IPv6 by its /64. */
import { describe, expect, test } from "bun:test";
import { addressKey } from "../../src/lib/address-key.ts";

describe("addressKey", () => {
  test.each([
    // IPv4: the address itself
    ["198.51.100.7", "198.51.100.7"],
    ["127.0.0.1", "127.0.0.1"],
    ["0.0.0.0", "0.0.0.0"],
    ["255.255.255.255", "255.255.255.255"],
    // an IPv4 client on a dual-stack socket, or forwarded so by a proxy: the IPv4 address
    ["::ffff:198.51.100.7", "198.51.100.7"],
    ["::FFFF:198.51.100.7", "198.51.100.7"],
    ["::ffff:c633:6407", "198.51.100.7"],
    ["0:0:0:0:0:ffff:c633:6407", "198.51.100.7"],
    ["[::ffff:198.51.100.7]", "198.51.100.7"],
    ["::198.51.100.7", "198.51.100.7"], // IPv4-compatible (deprecated)
    // IPv6: the /64, in RFC 5952 form
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:0DB8:0001:0002:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
    ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
    ["[2001:db8:1:2::1]", "2001:db8:1:2::/64"],
    ["2001:db8:0:0:1::", "2001:db8::/64"],
    ["2001:0:0:1::5", "2001:0:0:1::/64"],
    ["2001:db8:0:1::", "2001:db8:0:1::/64"],
    ["2001:db8::", "2001:db8::/64"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4::/64"],
    ["2001:db8:1:2::c633:6407", "2001:db8:1:2::/64"], // a dotted tail outside ::ffff:0:0/96 stays IPv6
    ["2001:db8:1:2::198.51.100.7", "2001:db8:1:2::/64"],
    ["64:ff9b::c633:6407", "64:ff9b::/64"],
    ["::1", "::/64"],
    ["::", "::/64"],
    // zone ids dropped
    ["fe80::1%eth0", "fe80::/64"],
    ["fe80::abcd:1%25en0", "fe80::/64"],
    // not an address: as is
    ["unknown", "unknown"],
    ["", ""],
    ["198.51.100.7:4431", "198.51.100.7:4431"],
    ["256.1.1.1", "256.1.1.1"],
    ["2001:db8::1::2", "2001:db8::1::2"],
    ["example.com", "example.com"],
  ])("%p → %p", (address, key) => {
    expect(addressKey(address)).toBe(key);
  });

  test("every address of one /64 shares a key; a neighbouring /64 and the /48 around it do not", () => {
    const same = ["2001:db8:aa:bb::1", "2001:db8:aa:bb:ffff:ffff:ffff:ffff", "2001:0db8:00aa:00bb:1234:5678:9abc:def0", "2001:db8:aa:bb:0:0:0:0"];
    expect(new Set(same.map(addressKey))).toEqual(new Set(["2001:db8:aa:bb::/64"]));
    for (const other of ["2001:db8:aa:bc::1", "2001:db8:aa::1", "2001:db8:ab:bb::1", "2001:db9:aa:bb::1"]) {
      expect(addressKey(other)).not.toBe("2001:db8:aa:bb::/64");
    }
  });

  test("two IPv4 addresses never share a key, whatever their spelling", () => {
    expect(addressKey("198.51.100.7")).not.toBe(addressKey("198.51.100.8"));
    expect(addressKey("::ffff:198.51.100.8")).toBe(addressKey("198.51.100.8"));
  });
});
