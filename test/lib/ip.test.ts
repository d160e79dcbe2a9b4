/** The SSRF guard's address classes, including the IPv6 forms that carry an IPv4 address. */
import { describe, expect, test } from "bun:test";
import { parseWebhookUrl } from "../../src/lib/ssrf.ts";
import { classifyAddress, parseIPv6 } from "../../src/lib/ip.ts";

describe("classifyAddress", () => {
  test.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["169.254.169.254", "link-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["100.64.0.1", "cgnat"],
    ["100.127.255.255", "cgnat"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "link-local"],
    ["::ffff:a9fe:a9fe", "link-local"],
    ["::ffff:10.0.0.1", "private"],
    ["::127.0.0.1", "loopback"],
    ["::ffff:0:127.0.0.1", "loopback"],
    ["64:ff9b::127.0.0.1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:7f00:1::", "loopback"],
    ["2002:0a00:0001::1", "private"],
    ["2001:0::1", "reserved"],
    ["2001:db8::1", "reserved"],
    ["192.0.0.192", "reserved"],
    ["not-an-ip", "invalid"],
    ["1.2.3", "invalid"],
  ] as const)("%s → %s", (addr, reason) => {
    expect(classifyAddress(addr)).toBe(reason);
  });

  test.each(["93.184.216.34", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])(
    "%s is public",
    (addr) => {
      expect(classifyAddress(addr)).toBeNull();
    },
  );

  test("odd IPv4 spellings are canonicalised by the URL parser before classification", () => {
    for (const spelled of ["2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "127.1", "%31%32%37.0.0.1"]) {
      const parsed = parseWebhookUrl(`http://${spelled}/hook`);
      expect("url" in parsed).toBe(true);
      if ("url" in parsed) expect(classifyAddress(parsed.url.hostname)).toBe("loopback");
    }
  });

  test("IPv6 parser", () => {
    expect(Array.from(parseIPv6("::ffff:1.2.3.4")!)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
    expect(parseIPv6("1::2::3")).toBeNull();
    expect(parseIPv6("1:2:3:4:5:6:7:8:9")).toBeNull();
    expect(parseIPv6("12345::")).toBeNull();
  });
});

describe("parseWebhookUrl", () => {
  test.each([
    ["ftp://example.com/x", "http or https"],
    ["javascript:alert(1)", "http or https"],
    ["not a url", "valid absolute URL"],
    ["/relative", "valid absolute URL"],
    ["https://user:pw@example.com/", "credentials"],
    ["https://example.com/" + "a".repeat(2100), "at most"],
    ["http://1.1.1.1:0/", "port 0"],
    ["https://example.com:000/hook", "port 0"],
    ["http://example.com:65536/", "valid absolute URL"],
  ])("%s is refused", (raw, why) => {
    const r = parseWebhookUrl(raw);
    expect("error" in r && r.error).toContain(why);
  });

  test("ports 1 and 65535 are allowed", () => {
    expect("url" in parseWebhookUrl("http://example.com:1/")).toBe(true);
    expect("url" in parseWebhookUrl("https://example.com:65535/")).toBe(true);
  });

  test("drops the fragment and keeps path and query", () => {
    const r = parseWebhookUrl("https://Example.COM:8443/a/b?x=1#frag");
    expect("url" in r && r.url.href).toBe("https://example.com:8443/a/b?x=1");
  });
});
