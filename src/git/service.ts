/**
 * Git repositories of a session (`s.git`): cloned on the server with the host's git and copied into
 * the workspace before the first turn, and pushed back from the server — so the credential from
 * the vault is used by runcell's side only and never enters the workspace (files, .git/config,
 * environment, process list). A checkout is idempotent: a directory that already holds a
 * repository is left alone, so a restarted or resumed task does not clone twice.
 */
import type { Box } from "../workspaces/box.ts";
import { Readable } from "node:stream";
import { join, posix } from "node:path";
import type { RepositoryConfig, WorkspaceRow } from "../db/schema.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { BlockedAddressError, ResolveError, type ResolvedAddress } from "../lib/ssrf.ts";
import type { Logger } from "../log.ts";
import type { ExecOptions, ExecResult } from "../workspaces/exec.ts";
import { BRANCH_PATTERN } from "../schema/session.ts";
import { resolveWorkspacePath, WORKSPACE_ROOT } from "../workspaces/paths.ts";
import { dirBytes, type GitContext, type GitRun, gitContext, gitFailure, remoteMessages, runGit } from "./command.ts";
import { copyHistory } from "./extract.ts";
import { linkCommands, takeClimbingLinks } from "./links.ts";
import { checkoutPath, displayUrl, parseRepoUrl, type RepoUrl } from "./repository.ts";

export interface GitDeps {
  secrets: { secretValue(userId: string, name: string, field: string): Promise<string> };
  net: { pin(userId: string, url: URL): Promise<ResolvedAddress[] | null>; mayUsePrivate(userId: string, url: URL): Promise<boolean> };
  workspaces: {
    forSession(sessionId: string): Promise<WorkspaceRow | null>;
    box(row: WorkspaceRow): Box;
    exec(sessionId: string, opts: ExecOptions): Promise<ExecResult>;
    busy(sessionId: string, delta: 1 | -1): Promise<void>;
  };
  log: Logger;
  /** The disk cap of the user's workspaces in bytes (null: none): a clone larger than it is stopped on the host. */
  diskCap?(userId: string): Promise<number | null>;
  /** Where clones are made before they are copied (default: the OS temp dir). */
  tmpRoot?: string;
}

export interface Checkout {
  url: string;
  path: string;
  ref: string | null;
  /** Set when this call cloned it; null when the directory already held a repository. */
  commit: string | null;
  bytes: number;
  ms: number;
}

export interface PushInput {
  path: string;
  branch?: string;
  remote_branch?: string;
}

export interface PushResult {
  repository: string;
  path: string;
  branch: string;
  remote_branch: string;
  commit: string;
  status: "pushed" | "up_to_date";
}

const SHA = /^[0-9a-f]{40}$/;
const MB = 1024 * 1024;
const BRANCH_RE = new RegExp(BRANCH_PATTERN);

const FIND = `for p; do
  if [ -e "$p/.git" ]; then echo "git $p"
  elif [ -e "$p" ] && [ -n "$(ls -A "$p" 2>/dev/null)" ]; then echo "busy $p"
  fi
done
printf 'uid %s %s\\n' "$(id -u 2>/dev/null || echo 0)" "$(id -g 2>/dev/null || echo 0)"`;

const MKDIR = `p="$1"
while [ ! -e "$(dirname "$p")" ]; do p="$(dirname "$p")"; done
mkdir -p -- "$1" && printf 'made %s\\n' "$p"`;

export class GitRepos {
  constructor(private d: GitDeps) {}

  private async context(userId: string, r: RepositoryConfig, field: string, repo: RepoUrl): Promise<GitContext> {
    const credential = r.credential_secret ? await this.d.secrets.secretValue(userId, r.credential_secret, `${field}.credential_secret`) : null;
    const u = new URL(repo.url);
    if (repo.scheme === "http" && !(await this.d.net.mayUsePrivate(userId, u))) {
      throw Errors.validation(`${field}.url`, `${field}.url must use https or ssh`, { reason: "invalid scheme" });
    }
    let pinned: ResolvedAddress[] | null;
    try {
      pinned = await this.d.net.pin(userId, u);
    } catch (e) {
      if (e instanceof BlockedAddressError || e instanceof ResolveError) throw new AppError("BAD_GATEWAY", `${displayUrl(r.url)} is refused: ${e.message}`);
      throw e;
    }
    return gitContext(repo, credential, pinned, this.d.tmpRoot);
  }

  /**
   * Clones every repository whose directory does not hold one yet into the session's (running)
   * workspace. `onRepo` hears of each clone before and after it; a failure throws BAD_GATEWAY
   * (VALIDATION_FAILED for a missing secret) and leaves nothing behind in the workspace.
   */
  async checkout(
    userId: string,
    sessionId: string,
    repos: RepositoryConfig[],
    hooks: { start?(r: RepositoryConfig, path: string): void; done?(c: Checkout): void; failed?(r: RepositoryConfig, path: string, message: string): void } = {},
    signal?: AbortSignal,
  ): Promise<Checkout[]> {
    if (!repos.length) return [];
    const paths = repos.map((r, i) => checkoutPath(r, `repositories[${i}]`));
    const found = await this.d.workspaces.exec(sessionId, { cmd: ["/bin/sh", "-c", FIND, "runcell-git", ...paths], timeoutMs: 60_000, maxOutputBytes: 64 * 1024 });
    const lines = found.output.split("\n");
    const state = new Map(lines.filter((l) => /^(git|busy) /.test(l)).map((l) => [l.slice(l.indexOf(" ") + 1), l.slice(0, l.indexOf(" "))]));
    const ids = /^uid (\d+) (\d+)$/m.exec(found.output);
    const owner = { uid: Number(ids?.[1] ?? 0), gid: Number(ids?.[2] ?? 0) };
    const out: Checkout[] = [];
    for (const [i, r] of repos.entries()) {
      const path = paths[i]!;
      const url = displayUrl(r.url);
      if (state.get(path) === "git") {
        out.push({ url, path, ref: r.ref ?? null, commit: null, bytes: 0, ms: 0 });
        continue;
      }
      hooks.start?.(r, path);
      try {
        if (state.get(path) === "busy") throw Errors.validation(`repositories[${i}].path`, `${path} already exists in the workspace and is not a git repository; choose another path`, { reason: "path in use" });
        const c = await this.cloneInto(userId, sessionId, r, i, path, owner, signal);
        hooks.done?.(c);
        out.push(c);
      } catch (e) {
        const message = e instanceof AppError ? e.message : `Cloning ${url} failed: ${(e as Error).message}`;
        hooks.failed?.(r, path, message);
        throw e instanceof AppError ? e : new AppError("BAD_GATEWAY", message);
      }
    }
    return out;
  }

  private async cloneInto(userId: string, sessionId: string, r: RepositoryConfig, i: number, path: string, owner: { uid: number; gid: number }, signal?: AbortSignal): Promise<Checkout> {
    const field = `repositories[${i}]`;
    const repo = parseRepoUrl(r.url, `${field}.url`);
    const started = performance.now();
    const ctx = await this.context(userId, r, field, repo);
    const log = this.d.log.child({ session_id: sessionId, repository: repo.url });
    try {
      const dir = join(ctx.dir, "repo");
      const depth = r.depth ?? 1;
      const cap = (await this.d.diskCap?.(userId)) ?? null;
      const cloning = `Cloning ${repo.url}${r.ref ? ` (${r.ref})` : ""} failed`;
      const tooLarge = (what: string, capBytes: number) =>
        new AppError("BAD_GATEWAY", `${cloning}: the repository takes more than this server's disk cap of ${Math.round(capBytes / MB)} MB per workspace (workspace_disk_mb); clone a smaller ref or depth`, {
          repository: repo.url,
          step: what,
          limit: "workspace_disk_mb",
        });
      const fail = (what: string, res: GitRun) =>
        res.tooLarge && cap !== null ? tooLarge(what, cap) : new AppError("BAD_GATEWAY", `${cloning}: ${gitFailure(res, r.credential_secret)}`, { repository: repo.url, step: what });
      let last = 0;
      const onProgress = (line: string) => {
        if (performance.now() - last > 2000) {
          last = performance.now();
          log.info("git clone progress", { line: line.slice(0, 200) });
        }
      };
      // A commit SHA in either case (git prints lower case; upper case names the same commit).
      const sha = r.ref && SHA.test(r.ref.toLowerCase()) ? r.ref.toLowerCase() : null;
      if (sha) {
        for (const args of [["init", "-q", dir], ["-C", dir, "remote", "add", "origin", repo.url]]) {
          const res = await runGit(ctx, args, { signal });
          if (res.code !== 0) throw fail("init", res);
        }
        const fetched = await runGit(ctx, ["-C", dir, "fetch", "--progress", ...(depth > 0 ? ["--depth", String(depth)] : []), "origin", sha], { signal, onProgress, maxDirBytes: cap });
        if (fetched.code !== 0) throw fail("fetch", fetched);
        const co = await runGit(ctx, ["-C", dir, "checkout", "-q", "--detach", "FETCH_HEAD"], { signal, maxDirBytes: cap });
        if (co.code !== 0) throw fail("checkout", co);
      } else {
        const args = ["clone", "--progress", "--no-recurse-submodules", ...(depth > 0 ? ["--depth", String(depth), "--single-branch"] : []), ...(r.ref ? ["--branch", r.ref] : []), "--", repo.url, dir];
        const res = await runGit(ctx, args, { signal, onProgress, maxDirBytes: cap });
        if (res.code !== 0) throw fail("clone", res);
      }
      // A clone that finished between two measurements is measured once more before it is copied.
      if (cap !== null && ((await dirBytes(dir)) ?? 0) > cap) throw tooLarge("clone", cap);
      const head = await runGit(ctx, ["-C", dir, "rev-parse", "HEAD"]);
      const commit = head.stdout.trim();
      const bytes = await this.copyIn(sessionId, dir, path, owner);
      const c: Checkout = { url: repo.url, path, ref: r.ref ?? null, commit, bytes, ms: Math.round(performance.now() - started) };
      log.info("repository checked out", { path, commit, bytes, ms: c.ms });
      return c;
    } finally {
      await ctx.cleanup();
    }
  }

  /** Copies a checkout into the workspace with Docker's archive API, owned by the container's user. */
  private async copyIn(sessionId: string, dir: string, path: string, owner: { uid: number; gid: number }): Promise<number> {
    const row = await this.d.workspaces.forSession(sessionId);
    if (!row?.docker_id) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no running workspace`);
    // Made with its missing parents; the first of those made is what a failure removes.
    const mk = await this.d.workspaces.exec(sessionId, { cmd: ["/bin/sh", "-c", MKDIR, "runcell-git", path], timeoutMs: 30_000, maxOutputBytes: 4096 });
    if (mk.exitCode !== 0) throw new AppError("CONTAINER_FAILED", `Could not create ${path} in the workspace: ${mk.output.trim()}`);
    const made = /^made (\/workspace\/.+)$/m.exec(mk.output)?.[1] ?? path;
    // Unpacked at the workspace's root with the checkout's relative path as the entries' prefix (not
    // into the checkout itself): Docker refuses a symlink that points outside the directory it
    // unpacks into, and a repository's `cfg -> ../shared.json` is legal. Links that climb above
    // /workspace, refused even so, are made after the copy (links.ts).
    const links = await takeClimbingLinks(dir, path);
    const rel = posix.relative(WORKSPACE_ROOT, path);
    const tar = Bun.spawn(["tar", "-C", dir, "--numeric-owner", `--owner=${owner.uid}`, `--group=${owner.gid}`, "--transform", `s,^\\.,${rel.replace(/[\\,&]/g, "\\$&")},S`, "-cf", "-", "."], { stdout: "pipe", stderr: "pipe" });
    let bytes = 0;
    const counted = (tar.stdout as ReadableStream<Uint8Array>).pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          bytes += chunk.byteLength;
          ctl.enqueue(chunk);
        },
      }),
    );
    // Nothing half-copied stays behind.
    const undo = () => this.d.workspaces.exec(sessionId, { cmd: ["rm", "-rf", "--", made], timeoutMs: 60_000, maxOutputBytes: 4096 }).catch(() => {});
    try {
      await this.d.workspaces.box(row).writeArchive(WORKSPACE_ROOT, Readable.fromWeb(counted as never));
    } catch (e) {
      tar.kill();
      await undo();
      throw new AppError("CONTAINER_FAILED", `Could not copy the repository into ${path}: ${(e as Error).message}`);
    }
    if ((await tar.exited) !== 0) throw new AppError("INTERNAL_ERROR", `Packing the clone failed: ${(await new Response(tar.stderr).text()).trim().slice(0, 300)}`);
    for (const cmd of linkCommands(links)) {
      const ln = await this.d.workspaces.exec(sessionId, { cmd, timeoutMs: 60_000, maxOutputBytes: 4096 });
      if (ln.exitCode !== 0) {
        await undo();
        // (ln's message names the link.)
        throw new AppError("BAD_GATEWAY", `Could not create the repository's symlinks that point above /workspace in ${path}: ${ln.output.trim().slice(0, 300) || `ln exited with code ${ln.exitCode}`}`);
      }
    }
    return bytes;
  }

  /**
   * Pushes a branch of a checked-out repository to its remote with the repository's credential:
   * the workspace's objects and refs are copied into a fresh repository on the server and pushed
   * from there (the workspace's own git config and hooks are never used).
   */
  async push(userId: string, sessionId: string, repos: RepositoryConfig[], input: PushInput, signal?: AbortSignal): Promise<PushResult> {
    const abs = resolveWorkspacePath(input.path, "path");
    const i = repos.findIndex((r, k) => checkoutPath(r, `repositories[${k}]`) === abs);
    if (i < 0) {
      const known = repos.map((r, k) => checkoutPath(r, `repositories[${k}]`));
      throw Errors.validation("path", `${abs} is not one of this session's repositories${known.length ? ` (${known.join(", ")})` : ": the session has none"}`, { reason: "not a repository" });
    }
    for (const [k, v] of [["branch", input.branch], ["remote_branch", input.remote_branch]] as const) {
      if (v !== undefined && !BRANCH_RE.test(v)) throw Errors.validation(k, `${k} is not a valid branch name`, { reason: "invalid format" });
    }
    const r = repos[i]!;
    const field = `repositories[${i}]`;
    const repo = parseRepoUrl(r.url, `${field}.url`);
    const row = await this.d.workspaces.forSession(sessionId);
    if (!row?.docker_id) throw new AppError("CONTAINER_FAILED", `Session ${sessionId} has no workspace container`);
    const ctx = await this.context(userId, r, field, repo);
    await this.d.workspaces.busy(sessionId, 1);
    try {
      const bare = join(ctx.dir, "push.git");
      const init = await runGit(ctx, ["init", "-q", "--bare", bare]);
      if (init.code !== 0) throw new AppError("INTERNAL_ERROR", `git init failed: ${gitFailure(init, undefined)}`);
      await copyHistory(this.d.workspaces.box(row), `${abs}/.git`, bare);
      let branch = input.branch;
      if (!branch) {
        const head = (await Bun.file(join(bare, "HEAD")).text().catch(() => "")).trim();
        const m = /^ref: refs\/heads\/(.+)$/.exec(head);
        if (!m || !BRANCH_RE.test(m[1]!)) throw Errors.validation("branch", `HEAD of ${abs} is not on a branch: name the branch to push`, { reason: "detached HEAD" });
        branch = m[1]!;
      }
      const remoteBranch = input.remote_branch ?? branch;
      const rev = await runGit(ctx, ["--git-dir", bare, "rev-parse", "--verify", "-q", `refs/heads/${branch}^{commit}`]);
      if (rev.code !== 0 || !SHA.test(rev.stdout.trim())) throw Errors.validation("branch", `${abs} has no branch ${branch}`, { reason: "unknown branch" });
      const commit = rev.stdout.trim();
      const pushed = await runGit(ctx, ["--git-dir", bare, "push", "--porcelain", repo.url, `${commit}:refs/heads/${remoteBranch}`], { signal });
      const line = pushed.stdout.split("\n").find((l) => /^[ +\-*=!]\t/.test(l));
      if (pushed.code !== 0 || !line || line.startsWith("!")) {
        const said = remoteMessages(pushed.stderr);
        const why = line?.startsWith("!") ? `the remote rejected it (${ctx.redact(line.split("\t").pop()?.trim() ?? "")})${said ? `; it said: ${said}` : ""}` : gitFailure(pushed, r.credential_secret);
        throw new AppError("BAD_GATEWAY", `Pushing ${branch} of ${abs} to ${repo.url} failed: ${why}`, { repository: repo.url });
      }
      this.d.log.info("repository pushed", { session_id: sessionId, repository: repo.url, branch, remote_branch: remoteBranch, commit });
      return { repository: repo.url, path: abs, branch, remote_branch: remoteBranch, commit, status: line.startsWith("=") ? "up_to_date" : "pushed" };
    } finally {
      await this.d.workspaces.busy(sessionId, -1);
      await ctx.cleanup();
    }
  }
}
