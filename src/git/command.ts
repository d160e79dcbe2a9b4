/**
 * Running the host's git for a repository of a user: a private temporary directory, an environment
 * with nothing of the server's (no provider keys, no global or system git config), hooks and
 * credential helpers off, only the URL's protocol allowed, redirects not followed, and the
 * credential given through a one-shot askpass script that reads it from git's own environment —
 * never from the command line, the URL, or a file in a workspace. A connection to a host that is
 * not exempt from the network rule is pinned to the checked address (http.curloptResolve for
 * http(s), ssh's HostName for ssh), so DNS cannot be swapped between check and connect.
 */
import { chmod, lstat, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { redactValue } from "../lib/secret-forms.ts";
import type { ResolvedAddress } from "../lib/ssrf.ts";
import { shellLine } from "../lib/shell.ts";
import type { RepoUrl } from "./repository.ts";

export const GIT_TIMEOUT_MS = 10 * 60_000;
const STDERR_MAX = 64 * 1024;
/** Kept beyond STDERR_MAX until the end, so that no credential is cut in two where the kept text begins. */
const STDERR_MARGIN = 16 * 1024;

export interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Set when the command was stopped because its directory grew past `maxDirBytes`. */
  tooLarge?: boolean;
  /** Set (the timeout in ms) when the command was stopped after its timeout. */
  timedOut?: number;
  /** Set when the command was stopped by its signal. */
  cancelled?: boolean;
}

export interface GitContext {
  dir: string;
  /** `-c` options every command of this context gets. */
  config: string[];
  env: Record<string, string>;
  /** `text` (git's output, a remote's words) without the credential in any form it is echoed in. */
  redact(text: string): string;
  cleanup(): Promise<void>;
}

const ASKPASS = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$RC_GIT_USERNAME" ;;
  *) printf '%s\\n' "$RC_GIT_PASSWORD" ;;
esac
`;

/**
 * Working directories are `runcell-git-<pid>-XXXXXX` under the temporary directory: the pid of the
 * server that made them lets a later start tell a dead server's leftovers (a `kill -9` mid-clone
 * leaves the clone and, for ssh, the private key file) from a live one's (replicas on one host).
 */
const DIR_PREFIX = "runcell-git-";
const OWNED = /^runcell-git-(\d+)-[A-Za-z0-9]{6}$/;
/** A directory older than this is a leftover whoever made it (a clone or push never runs this long). */
const LEFTOVER_AGE_MS = 24 * 3600_000;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * Removes git working directories left under `root` by servers that died mid-clone or mid-push
 * (their pid no longer runs; or older than a day, whatever made them — also earlier builds' pid-less
 * `runcell-git-XXXXXX`). Answers how many were removed.
 */
export async function sweepGitDirs(root = tmpdir(), now = Date.now()): Promise<number> {
  let removed = 0;
  for (const name of await readdir(root).catch(() => [] as string[])) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const path = join(root, name);
    const info = await lstat(path).catch(() => null);
    if (!info?.isDirectory() || (typeof process.getuid === "function" && info.uid !== process.getuid())) continue;
    const owner = OWNED.exec(name);
    const pid = owner ? Number(owner[1]) : null;
    if (pid === process.pid) continue;
    if (!(pid !== null && !alive(pid)) && now - info.mtimeMs < LEFTOVER_AGE_MS) continue;
    await rm(path, { recursive: true, force: true }).then(() => removed++, () => {});
  }
  return removed;
}

/** A private working directory and the options and environment for git against `repo`. */
export async function gitContext(repo: RepoUrl, credential: string | null, pinned: ResolvedAddress[] | null, root = tmpdir()): Promise<GitContext> {
  const dir = await mkdtemp(join(root, `${DIR_PREFIX}${process.pid}-`));
  await chmod(dir, 0o700);
  const config = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "credential.helper=",
    "protocol.allow=never",
    `protocol.${repo.scheme}.allow=always`,
    "http.followRedirects=false",
    "submodule.recurse=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
  ];
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: dir,
    LC_ALL: "C",
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
  };
  const addr = pinned?.[0];
  if (repo.scheme === "ssh") {
    // Only the credential from the vault: never the server account's keys, agent or ssh config
    // (OpenSSH finds ~ from the passwd entry, not $HOME, and reads /etc/ssh/ssh_config).
    const ssh = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=accept-new", "-o", `UserKnownHostsFile=${join(dir, "known_hosts")}`];
    if (credential) {
      const key = join(dir, "id");
      await writeFile(key, credential.endsWith("\n") ? credential : credential + "\n", { mode: 0o600 });
      ssh.push("-i", key);
    } else ssh.push("-o", "IdentityFile=none");
    if (addr) ssh.push("-o", `HostKeyAlias=${repo.host}`, "-o", `HostName=${addr.address}`);
    env.GIT_SSH_COMMAND = shellLine(ssh);
  } else {
    // (An address in the URL itself is not resolved: nothing to pin.)
    if (addr && !isIP(repo.host)) config.push(`http.curloptResolve=${repo.host}:${repo.port}:${addr.family === 6 ? `[${addr.address}]` : addr.address}`);
    if (credential) {
      const askpass = join(dir, "askpass");
      await writeFile(askpass, ASKPASS, { mode: 0o700 });
      const colon = credential.indexOf(":");
      env.GIT_ASKPASS = askpass;
      env.RC_GIT_USERNAME = colon > 0 ? credential.slice(0, colon) : "x-access-token";
      env.RC_GIT_PASSWORD = colon > 0 ? credential.slice(colon + 1) : credential;
    }
  }
  return { dir, config, env, redact: (text) => redactValue(text, credential), cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Bytes under `dir` (`du -sb`), or null when it could not be measured. */
export async function dirBytes(dir: string): Promise<number | null> {
  const du = Bun.spawn(["du", "-sb", dir], { stdin: "ignore", stdout: "pipe", stderr: "ignore" });
  const out = await new Response(du.stdout).text();
  await du.exited;
  const n = Number.parseInt(out, 10);
  return Number.isFinite(n) ? n : null;
}

export const DIR_CHECK_EVERY_MS = 1000;

/**
 * Runs `git -c … <args>`; stderr is kept (its last 64 KiB). Killed on abort, after the timeout,
 * or (`maxDirBytes`) once the context's directory holds more than that, measured every second.
 */
export async function runGit(ctx: GitContext, args: string[], opts: { cwd?: string; signal?: AbortSignal; timeoutMs?: number; onProgress?: (line: string) => void; maxDirBytes?: number | null } = {}): Promise<GitRun> {
  // Its own process group, so that a kill also stops what git started (remote helpers, index-pack,
  // ssh), which would otherwise go on writing and hold the pipes open.
  const proc = Bun.spawn(["git", ...ctx.config.flatMap((c) => ["-c", c]), ...args], { cwd: opts.cwd ?? ctx.dir, env: ctx.env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  const kill = () => {
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {
      proc.kill("SIGKILL");
    }
  };
  const timeoutMs = opts.timeoutMs ?? GIT_TIMEOUT_MS;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, timeoutMs);
  let tooLarge = false;
  let measuring = false;
  const max = opts.maxDirBytes;
  const watch =
    max == null
      ? null
      : setInterval(() => {
          if (measuring) return;
          measuring = true;
          void dirBytes(ctx.dir)
            .then((n) => {
              if (n !== null && n > max && proc.exitCode === null) {
                tooLarge = true;
                kill();
              }
            })
            .finally(() => (measuring = false));
        }, DIR_CHECK_EVERY_MS);
  opts.signal?.addEventListener("abort", kill, { once: true });
  // What git and the remote say is redacted of the credential here, before anything is cut or
  // passed on: progress a whole line at a time, stderr once whole (with a margin kept beyond its
  // 64 KiB so that no credential is cut in two at its start).
  let stderr = "";
  let partial = "";
  const progress = (line: string) => {
    const l = line.trim();
    if (l && opts.onProgress) opts.onProgress(ctx.redact(l));
  };
  const readErr = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of proc.stderr as unknown as AsyncIterable<Uint8Array>) {
      const text = dec.decode(chunk, { stream: true });
      stderr = (stderr + text).slice(-(STDERR_MAX + STDERR_MARGIN));
      const lines = (partial + text).split(/[\r\n]/);
      partial = lines.pop()!.slice(-STDERR_MARGIN);
      for (const line of lines) progress(line);
    }
    progress(partial);
  })();
  // (stdout is git's data — a commit id, porcelain lines — and is redacted where it is shown.)
  const [stdout] = await Promise.all([new Response(proc.stdout).text(), readErr]);
  // The context's directory is a host path ("Cloning into '/tmp/runcell-git-x/repo'..."): said
  // relative to it, as no user needs to know where the server keeps its temporary files.
  stderr = ctx.redact(stderr).split(`${ctx.dir}/`).join("").split(ctx.dir).join(".").slice(-STDERR_MAX);
  const code = await proc.exited;
  clearTimeout(timer);
  if (watch) clearInterval(watch);
  opts.signal?.removeEventListener("abort", kill);
  const res: GitRun = { code, stdout, stderr };
  if (tooLarge) res.tooLarge = true;
  if (timedOut && code !== 0) res.timedOut = timeoutMs;
  if (opts.signal?.aborted && code !== 0) res.cancelled = true;
  return res;
}

/** What the remote said (its `remote:` lines, progress left out): a hook's reason for refusing a push, at most 500 characters. */
export function remoteMessages(stderr: string): string {
  return stderr
    .replace(/\r/g, "\n")
    .split("\n")
    .filter((l) => l.startsWith("remote:"))
    .map((l) => l.slice("remote:".length).trim())
    .filter((l) => l && !/^(Counting|Compressing|Receiving|Resolving|Enumerating|Writing|Total|error: failed to push)/.test(l))
    .join(" ")
    .slice(0, 500);
}

/** What went wrong, in one sentence, from git's stderr. */
export function gitFailure(r: GitRun, credentialSecret: string | undefined): string {
  if (r.cancelled) return "it was cancelled";
  if (r.timedOut) return `git did not finish within ${r.timedOut % 60_000 ? `${r.timedOut / 1000} s` : `${r.timedOut / 60_000} minutes`} and was stopped`;
  const text = r.stderr.replace(/\r/g, "\n");
  if (/Authentication failed|could not read (Username|Password)|terminal prompts disabled|HTTP (401|403)|Permission denied \(publickey|returned error: 40[13]/i.test(text)) {
    return credentialSecret
      ? `authentication failed: the remote refused the credential in the vault secret "${credentialSecret}"`
      : "authentication failed: the remote needs a credential (set credential_secret to a vault secret holding a token)";
  }
  if (/Remote branch .* not found|couldn't find remote ref|not our ref|no such remote ref/i.test(text)) return "the ref was not found in the repository";
  if (/repository .* not found|returned error: 404|does not appear to be a git repository/i.test(text)) return "the repository was not found";
  if (/Could not resolve host|Connection refused|Connection timed out|Failed to connect|Could not connect/i.test(text)) return "the git server could not be reached";
  const last = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^(remote: )?(Counting|Compressing|Receiving|Resolving|Enumerating|Writing|Total)|^Cloning into /.test(l))
    .pop();
  return last ? last.replace(/^(fatal|error): /, "").slice(0, 500) : `git exited with code ${r.code}`;
}
