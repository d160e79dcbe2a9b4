import { expect, test } from "bun:test";
import { VersionedJson } from "../../src/lib/versioned-json.ts";

test("made once per version, made again when the version moves, forgotten when the record is gone", () => {
  const cache = new VersionedJson(10);
  let made = 0;
  const make = (version: number, json: string) => () => (made++, { version, json });
  expect(cache.get("a", 1, make(1, '{"v":1}'))).toBe('{"v":1}');
  expect(cache.get("a", 1, make(1, "never"))).toBe('{"v":1}');
  expect(made).toBe(1);
  expect(cache.get("a", 2, make(2, '{"v":2}'))).toBe('{"v":2}');
  expect(made).toBe(2);
  expect(cache.get("a", 2, make(2, "never"))).toBe('{"v":2}');
  expect(cache.get("a", 3, () => null)).toBeNull();
  expect(cache.size).toBe(0);
});

test("the row read may be newer than the version asked for: it is stored under its own", () => {
  const cache = new VersionedJson(10);
  expect(cache.get("a", 1, () => ({ version: 2, json: "two" }))).toBe("two");
  expect(cache.get("a", 2, () => ({ version: 9, json: "never" }))).toBe("two");
  expect(cache.get("a", 1, () => ({ version: 2, json: "two again" }))).toBe("two again");
});

test("bounded: the oldest entry goes first", () => {
  const cache = new VersionedJson(3);
  for (const id of ["a", "b", "c", "d"]) cache.get(id, 1, () => ({ version: 1, json: id }));
  expect(cache.size).toBe(3);
  let remade = "";
  cache.get("a", 1, () => ((remade = "a"), { version: 1, json: "a" }));
  expect(remade).toBe("a");
  cache.get("d", 1, () => ((remade = "d!"), { version: 1, json: "d" }));
  expect(remade).toBe("a");
});
