/** What PostgreSQL is given for U+0000 (src/db/pg/storable.ts) and where a request holds one (src/lib/nul.ts). */
import { expect, test } from "bun:test";
import { storableJson, storableText } from "../../src/db/pg/storable.ts";
import { nulField, refuseNul } from "../../src/lib/nul.ts";

test("storableJson replaces the \\u0000 escape only, never the text \\u0000 (an escaped backslash before it)", () => {
  const value = { a: "x\u0000y", b: "the text \\u0000", c: ["\\\u0000"], d: "\\\\u0000" };
  const out = JSON.parse(storableJson(JSON.stringify(value)));
  expect(out).toEqual({ a: "x\uFFFDy", b: "the text \\u0000", c: ["\\\uFFFD"], d: "\\\\u0000" });
  const plain = JSON.stringify({ a: "nothing here" });
  expect(storableJson(plain)).toBe(plain);
});

test("storableText: strings with U+0000 get U+FFFD; other values as they are", () => {
  expect(storableText("a\u0000b\u0000")).toBe("a\uFFFDb\uFFFD");
  expect(storableText("clean")).toBe("clean");
  expect(storableText(42)).toBe(42);
  expect(storableText(null)).toBe(null);
});

test("nulField names the first field holding U+0000, keys included", () => {
  expect(nulField({ a: "x", b: { c: ["ok", "n\u0000"] } })).toBe("b.c[1]");
  expect(nulField({ ["k\u0000"]: 1 })).toBe("k\u0000");
  expect(nulField("\u0000")).toBe("body");
  expect(nulField({ a: "x", n: 1, t: true, z: null })).toBeNull();
  expect(() => refuseNul('{"a":"\\u0000"}', { a: "\u0000" })).toThrow("a must not contain NUL (U+0000) characters");
  // The text "\u0000" (an escaped backslash) is not a NUL.
  expect(() => refuseNul('{"a":"\\\\u0000"}', { a: "\\u0000" })).not.toThrow();
});
