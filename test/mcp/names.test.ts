/** The names MCP tools reach the model under, and allowed_tools patterns. */
import { expect, test } from "bun:test";
import { modelToolName, toolFilter } from "../../src/mcp/names.ts";

const PROVIDER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

test("mcp__<server>__<tool>, other characters as _", () => {
  const taken = new Set<string>();
  expect(modelToolName("github", "create_issue", taken)).toBe("mcp__github__create_issue");
  expect(modelToolName("fs", "read.file/v2 (beta)", taken)).toBe("mcp__fs__read_file_v2__beta_");
});

test("too long, or taken: a short hash of the original keeps names unique and valid", () => {
  const taken = new Set<string>();
  const long = modelToolName("server", "x".repeat(100), taken);
  expect(long).toMatch(PROVIDER_NAME);
  expect(long.startsWith("mcp__server__xxx")).toBe(true);
  const a = modelToolName("fs", "a.b", taken);
  const b = modelToolName("fs", "a_b", taken);
  expect(a).toBe("mcp__fs__a_b");
  expect(b).not.toBe(a);
  expect(b).toMatch(PROVIDER_NAME);
  expect(modelToolName("fs", "Bash", new Set(["mcp__fs__Bash"]))).not.toBe("mcp__fs__Bash");
});

test("the same name asked for again and again: every answer is a different valid name", () => {
  const taken = new Set<string>();
  const names = Array.from({ length: 5 }, () => modelToolName("d3", "same", taken));
  expect(new Set(names).size).toBe(5);
  for (const n of names) expect(n).toMatch(PROVIDER_NAME);
  expect(names[0]).toBe("mcp__d3__same");
});

test.each([
  [[], "mcp__a__x", true],
  [["mcp__a__*"], "mcp__a__x", true],
  [["mcp__a__*"], "mcp__b__x", false],
  [["!mcp__a__write_*"], "mcp__a__write_file", false],
  [["!mcp__a__write_*"], "mcp__a__read_file", true],
  [["mcp__*", "!mcp__b__*"], "mcp__b__x", false],
  [["mcp__a__read.file"], "mcp__a__readXfile", false],
] as [string[], string, boolean][])("allowed_tools %j: %s → %p", (patterns, name, expected) => {
  expect(toolFilter(patterns)(name)).toBe(expected);
});
