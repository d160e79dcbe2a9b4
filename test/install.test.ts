/**
 * install.sh from a release directory (a runcell binary next to it, no sources): it installs that
 * binary instead of building, and refuses a test run.
 */
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");

test("a release directory installs its binary", async () => {
  const build = Bun.spawnSync(["bun", "run", "scripts/build.ts"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(build.exitCode).toBe(0);
  const release = mkdtempSync("/tmp/runcell-release-");
  copyFileSync(join(ROOT, "install.sh"), join(release, "install.sh"));
  copyFileSync(join(ROOT, "dist/runcell"), join(release, "runcell"));
  Bun.spawnSync(["chmod", "+x", join(release, "install.sh"), join(release, "runcell")]);
  const bin = join(release, "bin");
  const env = { PATH: process.env.PATH ?? "", HOME: release, RUNCELL_INSTALL_DIR: bin };
  const r = Bun.spawnSync(["./install.sh", "build", "--no-docker"], { cwd: release, env, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  expect(r.stdout.toString()).toContain("Installing the release binary");
  expect(r.stdout.toString()).not.toContain("Building dist/runcell");
  expect(existsSync(join(bin, "runcell"))).toBe(true);
  expect(Bun.spawnSync([join(bin, "runcell"), "version"]).stdout.toString()).toMatch(/^runcell \d+\.\d+\.\d+/);
  const t = Bun.spawnSync(["./install.sh", "test", "--no-docker"], { cwd: release, env, stdout: "pipe", stderr: "pipe" });
  expect(t.exitCode).not.toBe(0);
  expect(t.stderr.toString()).toContain("no test suite");
  const u = Bun.spawnSync(["./install.sh", "frobnicate"], { cwd: release, env, stdout: "pipe", stderr: "pipe" });
  expect(u.exitCode).toBe(2);
}, 120_000);
