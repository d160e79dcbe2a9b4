/** What PostgreSQL is given for U+0000 (src/db/pg/storable.ts) and where a request holds one (src/lib/json-input.ts). */
import { expect, test } from "bun:test";
import { storableJson, storableText } from "../../src/db/pg/storable.ts";
import { jsonDepth, MAX_DEPTH, nulField, refuseBadStrings, refuseDeep } from "../../src/lib/json-input.ts";

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
  expect(() => refuseBadStrings('{"a":"\\u0000"}', { a: "\u0000" })).toThrow("a must not contain NUL (U+0000) characters");
  // The text "\u0000" (an escaped backslash) is not a NUL.
  expect(() => refuseBadStrings('{"a":"\\\\u0000"}', { a: "\\u0000" })).not.toThrow();
});

test("depth is counted on the text (brackets inside strings do not count); deeper than MAX_DEPTH is refused before parsing", () => {
  expect(jsonDepth('{"a":[1,{"b":"[[[[{{{{"}]}')).toBe(3);
  const backslash = "\\";
  expect(jsonDepth(`"${backslash}${backslash}"[[[`)).toBe(3); // an escaped backslash: the string closes after it
  expect(jsonDepth(`"${backslash}"[[[`)).toBe(0); // an escaped quote: still inside the string
  const deep = "[".repeat(MAX_DEPTH + 1) + "]".repeat(MAX_DEPTH + 1);
  expect(() => refuseDeep(deep)).toThrow(`deeper than ${MAX_DEPTH} levels`);
  expect(() => refuseDeep("[".repeat(MAX_DEPTH) + "]".repeat(MAX_DEPTH))).not.toThrow();
  // A million brackets: measured in linear time, no parse.
  const started = performance.now();
  expect(() => refuseDeep("[".repeat(1_000_000))).toThrow();
  expect(performance.now() - started).toBeLessThan(200);
});
