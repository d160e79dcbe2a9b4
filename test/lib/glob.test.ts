/** `*` patterns (src/lib/glob.ts): what an anchored `.*` regular expression matches, in linear time. */
import { expect, test } from "bun:test";
import { glob } from "../../src/lib/glob.ts";

const reference = (pattern: string) => new RegExp(`^${pattern.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);

test("matches exactly what the regular expression matches (random patterns and texts over a small alphabet)", () => {
  const pick = (n: number, alphabet: string) => Array.from({ length: n }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join("");
  for (let i = 0; i < 20_000; i++) {
    const pattern = pick(Math.floor(Math.random() * 7), "ab*_");
    const text = pick(Math.floor(Math.random() * 9), "ab_");
    expect(glob(pattern).test(text), `${JSON.stringify(pattern)} on ${JSON.stringify(text)}`).toBe(reference(pattern).test(text));
  }
});

test("the usual patterns", () => {
  expect(glob("mcp__fs__*").test("mcp__fs__read_file")).toBe(true);
  expect(glob("mcp__fs__*").test("mcp__fsx__read")).toBe(false);
  expect(glob("*").test("")).toBe(true);
  expect(glob("runcell/*:latest").test("runcell/workspace:latest")).toBe(true);
  expect(glob("a*a").test("a")).toBe(false);
  expect(glob("exact.name").test("exactxname")).toBe(false);
});

test("a pattern built to make a backtracking matcher take exponential time answers at once", () => {
  const name = "a".repeat(64);
  const started = performance.now();
  for (let stars = 5; stars <= 40; stars++) expect(glob(`${"*a".repeat(stars)}*b`).test(name)).toBe(false);
  expect(performance.now() - started).toBeLessThan(100);
});
