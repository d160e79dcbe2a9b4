/**
 * install.sh from a release directory (a runcell binary next to it, no sources): it installs that
 * binary instead of building, and refuses a test run.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

/**
 * install.sh's Docker step run by a user who is not in the docker group, with sudo (uid 65534
 * here; a fake `sudo` marks what runs "as root", a fake `docker` answers only that, as a socket of
 * root and the docker group would). The functions are taken out of install.sh as they are.
 */
describe("the Docker step as a user outside the docker group", () => {
  const NOBODY = 65534;
  const script = readFileSync(join(ROOT, "install.sh"), "utf8");
  const docker = script.slice(script.indexOf("# --- Docker ---"), script.indexOf("# --- The default workspace image"));

  function run(mode: string, opts: { engineRunning: boolean; inGroup?: boolean }) {
    const dir = mkdtempSync("/tmp/runcell-install-docker-");
    chmodSync(dir, 0o777);
    const bin = join(dir, "bin");
    mkdirSync(bin, { mode: 0o755 });
    const exe = (name: string, text: string) => writeFileSync(join(bin, name), `#!/bin/sh\n${text}\n`, { mode: 0o755 });
    exe("sudo", 'FAKE_ROOT=1 exec "$@"');
    exe("docker", `[ "$FAKE_ROOT" = 1 ] || [ "$FAKE_GROUP" = 1 ] || { echo "permission denied while trying to connect to the Docker daemon socket" >&2; exit 1; }\n[ -e ${dir}/running ] || exit 1\necho 27.5.1`);
    exe("dockerd", `touch ${dir}/dockerd-started`);
    if (opts.engineRunning) writeFileSync(join(dir, "running"), "");
    chmodSync(dir, 0o777);
    const harness = `set -euo pipefail
MODE=${mode}; WITH_DOCKER=1; SUDO=sudo
step() { printf '\\n==> %s\\n' "$*"; }
ok() { printf '    ok: %s\\n' "$*"; }
die() { printf '\\n!!! %s\\n' "$*" >&2; exit 1; }
apt_install() { die "apt_install $*"; }
${docker}
ensure_docker; echo REACHED`;
    const r = Bun.spawnSync(["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "bash", "-c", harness], {
      env: { PATH: `${bin}:/usr/bin:/bin`, HOME: dir, ...(opts.inGroup ? { FAKE_GROUP: "1" } : {}) },
      stdout: "pipe",
      stderr: "pipe",
    });
    const out = { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString(), secondDockerd: existsSync(join(dir, "dockerd-started")) };
    rmSync(dir, { recursive: true, force: true });
    return out;
  }

  test.skipIf(process.getuid?.() !== 0)("a running engine it cannot reach: no second dockerd; serve and test stop at once saying what to do, service goes on", () => {
    for (const mode of ["serve", "test"]) {
      const r = run(mode, { engineRunning: true });
      expect(r.code, r.stderr).toBe(1);
      expect(r.secondDockerd).toBe(false);
      expect(r.stdout).not.toContain("starting dockerd");
      expect(r.stderr).toContain("the Docker engine runs, but nobody cannot use it");
      expect(r.stderr).toContain("sudo usermod -aG docker nobody");
      expect(r.stderr).toContain("root-equivalent");
      expect(r.stderr).toContain("./install.sh service");
    }
    const service = run("service", { engineRunning: true });
    expect(service.code, service.stderr).toBe(0);
    expect(service.stdout).toContain("ok: engine 27.5.1 answers (to root; nobody is not in the docker group, which service does not need)");
    expect(service.stdout).toContain("REACHED");
    expect(service.secondDockerd).toBe(false);
  }, 20_000);

  test.skipIf(process.getuid?.() !== 0)("an engine that answers the user (a member of the docker group) goes on", () => {
    const member = run("serve", { engineRunning: true, inGroup: true });
    expect(member.code, member.stderr).toBe(0);
    expect(member.stdout).toContain("ok: engine 27.5.1 answers");
    expect(member.stdout).toContain("REACHED");
    expect(member.secondDockerd).toBe(false);
  });
});
