/**
 * The git command's environment (src/git/command.ts): ssh uses the vault's key alone — never the
 * server account's keys, agent or ssh config, as OpenSSH itself resolves them (`ssh -G` prints the
 * options a connection would use) — and an https URL that is an address is not pinned again.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dirBytes, gitContext, type GitContext, gitFailure, runGit, sweepGitDirs } from "../../src/git/command.ts";
import { startTestApp } from "../helpers/app.ts";
import { waitFor } from "../helpers/net.ts";

let ctx: GitContext | null = null;
afterEach(async () => {
  await ctx?.cleanup();
  ctx = null;
});

/** What ssh would use for `host` when git runs GIT_SSH_COMMAND (`-G`: print the options, connect nowhere). */
function effective(c: GitContext, host: string): Map<string, string[]> {
  const r = Bun.spawnSync(["sh", "-c", `${c.env.GIT_SSH_COMMAND} -G ${host}`], { env: c.env });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  const out = new Map<string, string[]>();
  for (const line of r.stdout.toString().split("\n")) {
    const [k, ...v] = line.split(" ");
    if (k) out.set(k, [...(out.get(k) ?? []), v.join(" ")]);
  }
  return out;
}

test("ssh without a credential offers no key at all: no default identity files, no agent, no ssh_config", async () => {
  ctx = await gitContext({ scheme: "ssh", host: "git.example.com", port: 22, url: "ssh://git@git.example.com/a/b.git" }, null, null);
  const opts = effective(ctx, "git.example.com");
  expect(opts.get("identityfile")).toEqual(["none"]);
  expect(opts.get("identityagent")).toEqual(["none"]);
  expect(opts.get("identitiesonly")).toEqual(["yes"]);
  expect(ctx.env.GIT_SSH_COMMAND).toStartWith("ssh -F /dev/null ");
});

test("ssh with the vault's key: that key only", async () => {
  ctx = await gitContext({ scheme: "ssh", host: "git.example.com", port: 22, url: "ssh://git@git.example.com/a/b.git" }, "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----", null);
  const opts = effective(ctx, "git.example.com");
  expect(opts.get("identityfile")).toEqual([`${ctx.dir}/id`]);
  expect(opts.get("identityagent")).toEqual(["none"]);
});

test("https: a host name is pinned to its checked address; an address in the URL is not pinned again", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, null, [{ address: "2606:4700::1111", family: 6 }]);
  expect(ctx.config).toContain("http.curloptResolve=git.example.com:443:[2606:4700::1111]");
  await ctx.cleanup();
  ctx = await gitContext({ scheme: "https", host: "2606:4700::1111", port: 443, url: "https://[2606:4700::1111]/a/b.git" }, null, [{ address: "2606:4700::1111", family: 6 }]);
  expect(ctx.config.some((c) => c.startsWith("http.curloptResolve="))).toBe(false);
});

test("runGit stops a command whose directory grows past maxDirBytes, and says so", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, null, null);
  // An alias writing 1 MiB every 100 ms into the context's directory (git's cwd): 5 s if left alone.
  const fill = "alias.fill=!i=0; while [ $i -lt 50 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); sleep 0.1; done";
  const started = performance.now();
  const r = await runGit({ ...ctx, config: [...ctx.config, fill] }, ["fill"], { maxDirBytes: 3 * 1024 * 1024 });
  expect(r.tooLarge).toBe(true);
  expect(r.code).not.toBe(0);
  expect(performance.now() - started).toBeLessThan(4000);
  const bytes = (await dirBytes(ctx.dir))!;
  expect(bytes).toBeGreaterThan(3 * 1024 * 1024);
  expect(bytes).toBeLessThan(45 * 1024 * 1024);
});

test("runGit without maxDirBytes lets the command finish", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, null, null);
  const fill = "alias.fill=!i=0; while [ $i -lt 5 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); done";
  const r = await runGit({ ...ctx, config: [...ctx.config, fill] }, ["fill"]);
  expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
  expect(await dirBytes(ctx.dir)).toBeGreaterThanOrEqual(5 * 1024 * 1024);
});

test("redact hides the credential in the forms a remote echoes it: whole, its password, base64 of the Basic credential", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, "bot:ghp_0123456789abcdef", null);
  const basic = Buffer.from("bot:ghp_0123456789abcdef").toString("base64");
  const out = ctx.redact(`remote: hello bot:ghp_0123456789abcdef, your token ghp_0123456789abcdef, header Basic ${basic}`);
  expect(out).not.toContain("ghp_0123456789abcdef");
  expect(out).not.toContain(basic.replace(/=+$/, ""));
  expect(out).toContain("[redacted secret]");
  const none = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, null, null);
  expect(none.redact("nothing to hide")).toBe("nothing to hide");
  await none.cleanup();
});

test("a failure never shows the context's host directory; a timeout and a cancel say so, not git's last line", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, null, null);
  const fail = "alias.fail=!echo \"Cloning into '$PWD/repo'...\" >&2; echo \"fatal: could not write $PWD/repo/x\" >&2; exit 1";
  const failed = await runGit({ ...ctx, config: [...ctx.config, fail] }, ["fail"]);
  expect(failed.stderr).not.toContain(ctx.dir);
  expect(gitFailure(failed, undefined)).toBe("could not write repo/x");

  const hang = "alias.hang=!echo \"Cloning into '$PWD/repo'...\" >&2; sleep 30";
  const slow = await runGit({ ...ctx, config: [...ctx.config, hang] }, ["hang"], { timeoutMs: 500 });
  expect(slow.timedOut).toBe(500);
  expect(gitFailure(slow, undefined)).toBe("git did not finish within 0.5 s and was stopped");
  expect(gitFailure({ code: 137, stdout: "", stderr: "", timedOut: 600_000 }, undefined)).toBe("git did not finish within 10 minutes and was stopped");

  const ac = new AbortController();
  setTimeout(() => ac.abort("cancel"), 300);
  const stopped = await runGit({ ...ctx, config: [...ctx.config, hang] }, ["hang"], { signal: ac.signal });
  expect(stopped.cancelled).toBe(true);
  expect(gitFailure(stopped, undefined)).toBe("it was cancelled");
});

// A server killed mid-clone or mid-push leaves its working directory, and for ssh the private key
// file in it: the next start removes a dead server's directories, never a live one's (replicas).
test("leftover working directories: a dead server's (or a day-old one) are removed at start, a live server's kept", async () => {
  const root = mkdtempSync(join(tmpdir(), "runcell-gitroot-"));
  try {
    const dead = Bun.spawnSync(["true"]).pid; // exited: its pid runs nothing now (reuse is unlikely within the test)
    const live = Bun.spawn(["sleep", "30"]);
    const make = (name: string, ageMs = 0) => {
      const d = join(root, name);
      mkdirSync(d, { mode: 0o700 });
      writeFileSync(join(d, "id"), "-----BEGIN OPENSSH PRIVATE KEY-----\n", { mode: 0o600 });
      if (ageMs) utimesSync(d, new Date(Date.now() - ageMs), new Date(Date.now() - ageMs));
    };
    make(`runcell-git-${dead}-aB3dE9`);
    make(`runcell-git-${live.pid}-Zz0Yy1`);
    make(`runcell-git-${process.pid}-Qq1Ww2`, 2 * 86_400_000);
    make("runcell-git-Old123"); // an earlier build's name, recent: kept
    make("runcell-git-Old456", 2 * 86_400_000); // … a day old: a leftover
    make("other-dir");
    expect(await sweepGitDirs(root)).toBe(2);
    expect(readdirSync(root).sort()).toEqual([`runcell-git-${live.pid}-Zz0Yy1`, `runcell-git-${process.pid}-Qq1Ww2`, "other-dir", "runcell-git-Old123"].sort());
    live.kill();
    await live.exited;
    expect(await sweepGitDirs(root)).toBe(1);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a context's directory names this server's pid, and a starting server sweeps the temporary directory", async () => {
  ctx = await gitContext({ scheme: "https", host: "git.example.com", port: 443, url: "https://git.example.com/a/b.git" }, "tok", null);
  expect(ctx.dir.split("/").pop()).toMatch(new RegExp(`^runcell-git-${process.pid}-[A-Za-z0-9]{6}$`));
  // A temporary directory of this test's own (another test process's server start would sweep the shared one too).
  const root = mkdtempSync(join(tmpdir(), "runcell-gitroot-"));
  const saved = process.env.TMPDIR;
  const dead = Bun.spawnSync(["true"]).pid;
  const leftover = `runcell-git-${dead}-LfT0v3`;
  mkdirSync(join(root, leftover), { mode: 0o700 });
  writeFileSync(join(root, leftover, "id"), "key", { mode: 0o600 });
  process.env.TMPDIR = root;
  try {
    const t = await startTestApp();
    try {
      // (The line is written once the whole sweep is over, after the directory went.)
      await waitFor(() => t.logs.some((l) => l.includes("leftover git working directories removed") && l.includes('"count":1')) || undefined, { timeoutMs: 10_000, what: "the sweep's log line" });
      expect(readdirSync(root)).not.toContain(leftover);
    } finally {
      await t.stop();
    }
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    rmSync(root, { recursive: true, force: true });
  }
});
