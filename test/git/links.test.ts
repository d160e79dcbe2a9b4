/**
 * Symlinks of a checkout that climb above /workspace: taken out of the checkout on the host (and
 * nothing else), without following a link to a directory out of the checkout.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { linkCommands, takeClimbingLinks } from "../../src/git/links.ts";

const dir = mkdtempSync(join(tmpdir(), "runcell-links-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("only relative links whose target leaves /workspace are taken; links to host directories are not walked", async () => {
  mkdirSync(join(dir, "tests/fixtures"), { recursive: true });
  writeFileSync(join(dir, "a.txt"), "hi\n");
  const links: Record<string, string> = {
    "tests/fixtures/up": "../../../outside", // /workspace/outside from /workspace/app/tests/fixtures: stays
    "tests/fixtures/up2": "../../../../outside", // climbs to /outside
    "escape-link": "../../../../../../etc/hostname",
    "beside": "../shared.json",
    "abs": "/etc/passwd",
    "etc": "/etc", // a directory on the host: never walked
    "etc-rel": "../../../../../../../etc",
  };
  for (const [l, target] of Object.entries(links)) symlinkSync(target, join(dir, l));
  const taken = await takeClimbingLinks(dir, "/workspace/app");
  expect(taken.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
    { path: "/workspace/app/escape-link", target: "../../../../../../etc/hostname" },
    { path: "/workspace/app/etc-rel", target: "../../../../../../../etc" },
    { path: "/workspace/app/tests/fixtures/up2", target: "../../../../outside" },
  ]);
  for (const t of taken) expect(existsSync(join(dir, t.path.slice("/workspace/app/".length)))).toBe(false);
  for (const l of ["tests/fixtures/up", "beside", "abs", "etc"]) expect(lstatSync(join(dir, l)).isSymbolicLink()).toBe(true);
  expect(existsSync(join(dir, "a.txt"))).toBe(true);
});

test("many links are made in batches that keep each command line small", () => {
  const links = Array.from({ length: 3000 }, (_, i) => ({ path: `/workspace/app/dir/link-number-${i}`, target: `../../../../up/${"x".repeat(20)}/${i}` }));
  const cmds = linkCommands(links);
  expect(cmds.length).toBeGreaterThan(1);
  expect(cmds.flatMap((c) => c.slice(4))).toEqual(links.flatMap((l) => [l.target, l.path]));
  for (const c of cmds) expect(c.slice(4).join("\0").length).toBeLessThanOrEqual(64 * 1024 + 200);
});
