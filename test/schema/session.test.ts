/** The branch names a push takes (src/schema/session.ts BRANCH_PATTERN) are exactly those git itself accepts, in runcell's character set. */
import { expect, test } from "bun:test";
import { BRANCH_PATTERN } from "../../src/schema/session.ts";

const re = new RegExp(BRANCH_PATTERN);
const gitAccepts = (name: string) => Bun.spawnSync(["git", "check-ref-format", "--branch", name], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

test.each(["main", "feature/x", "agent/fix-login", "v1.2", "a.b/c-d_e", "release/2026.11"])("%p is a branch", (name) => {
  expect(re.test(name)).toBe(true);
  expect(gitAccepts(name)).toBe(true);
});

test.each(["HEAD", "refs/tags/x", "refs/heads/main", ".hidden", "foo.", "a/.b", "a/.", "x.lock", "a.lock/b", "a..b", "a//b", "a/", "-x", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "@{u}"])("%p is refused", (name) => {
  expect(re.test(name)).toBe(false);
  // Where git refuses it too, the two agree; "refs/…" git would take as a branch named so (refs/heads/refs/…): refused here on purpose.
  if (!name.startsWith("refs/")) expect(gitAccepts(name)).toBe(false);
});
