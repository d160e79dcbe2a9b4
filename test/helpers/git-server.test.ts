import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GitServer, startGitServer } from "./git-server.ts";

let server: GitServer;
let scratch: string;

beforeAll(async () => {
  server = await startGitServer({ user: "alice", password: "s3cret" });
  scratch = mkdtempSync(join(tmpdir(), "runcell-git-test-"));
});
afterAll(async () => {
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** The host's git, isolated: no config, no credential helper, no prompts, no askpass. */
async function git(args: string[], cwd = scratch, extraEnv: Record<string, string> = {}) {
  const proc = Bun.spawn(["git", "-c", "credential.helper=", ...args], {
    cwd,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: scratch,
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_TERMINAL_PROMPT: "0",
      GIT_ASKPASS: "",
      SSH_ASKPASS: "",
      GIT_AUTHOR_NAME: "Pusher",
      GIT_AUTHOR_EMAIL: "pusher@example.test",
      GIT_COMMITTER_NAME: "Pusher",
      GIT_COMMITTER_EMAIL: "pusher@example.test",
      ...extraEnv,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** GIT_TRACE_CURL prints the request headers git sends (on stderr), without the bodies. */
const TRACE_HEADERS = { GIT_TRACE_CURL: "1", GIT_TRACE_CURL_NO_DATA: "1" };

/** The clone URL with credentials in it. */
function withCreds(repoUrl: string, user = server.user, password = server.password) {
  const u = new URL(repoUrl);
  u.username = user;
  u.password = password;
  return u.toString();
}

function dirSize(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    total += e.isDirectory() ? dirSize(p) : statSync(p).size;
  }
  return total;
}

describe("git server helper", () => {
  test("clone with the right credentials", async () => {
    const url = await server.createRepo("hello", { "README.md": "# hello\n", "src/a.txt": "a\n" });
    expect(url).toBe(`${server.url}/hello.git`);
    const r = await git(["clone", withCreds(url), "hello"]);
    expect(r.stderr).not.toContain("fatal");
    expect(r.code).toBe(0);
    expect(await Bun.file(join(scratch, "hello/README.md")).text()).toBe("# hello\n");
    expect(await Bun.file(join(scratch, "hello/src/a.txt")).text()).toBe("a\n");
    expect((await git(["rev-parse", "--abbrev-ref", "HEAD"], join(scratch, "hello"))).stdout.trim()).toBe("main");
    expect(server.requests).toContainEqual({ method: "GET", path: "/hello.git/info/refs?service=git-upload-pack", authorized: true });
    expect(server.requests).toContainEqual({ method: "POST", path: "/hello.git/git-upload-pack", authorized: true });
  });

  test("protocol v0 and another branch name work too", async () => {
    const url = await server.createRepo("trunk", undefined, { branch: "trunk" });
    const r = await git(["-c", "protocol.version=0", "ls-remote", withCreds(url)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^[0-9a-f]{40}\tHEAD\n[0-9a-f]{40}\trefs\/heads\/trunk\n$/);
    expect(await server.log("trunk", "trunk")).toMatch(/^[0-9a-f]{40}\tInitial commit\n$/);
  });

  test("clone without credentials fails with 401", async () => {
    const url = await server.createRepo("private");
    const before = server.requests.length;
    const r = await git(["clone", url, "private-anon"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("terminal prompts disabled");
    expect(server.requests.slice(before)).toContainEqual({ method: "GET", path: "/private.git/info/refs?service=git-upload-pack", authorized: false });

    const res = await fetch(`${url}/info/refs?service=git-upload-pack`);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Basic realm="git"');
  });

  test("a wrong password fails", async () => {
    const url = await server.createRepo("guarded");
    const r = await git(["clone", withCreds(url, server.user, "wrong"), "guarded-bad"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Authentication failed");
    const w = await git(["clone", withCreds(url, "mallory", server.password), "guarded-bad2"]);
    expect(w.code).not.toBe(0);
  });

  test("a push lands, small and large (chunked request body)", async () => {
    const url = await server.createRepo("pushme");
    const work = join(scratch, "pushme");
    expect((await git(["clone", withCreds(url), work])).code).toBe(0);

    await Bun.write(join(work, "new.txt"), "new\n");
    expect((await git(["add", "new.txt"], work)).code).toBe(0);
    expect((await git(["commit", "-m", "Add new.txt"], work)).code).toBe(0);
    const small = await git(["push", "origin", "main"], work);
    expect(small.stderr).not.toContain("error");
    expect(small.code).toBe(0);
    const sha = (await git(["rev-parse", "HEAD"], work)).stdout.trim();
    expect((await server.log("pushme")).split("\n")[0]).toBe(`${sha}\tAdd new.txt`);
    expect(server.requests).toContainEqual({ method: "POST", path: "/pushme.git/git-receive-pack", authorized: true });

    // A pack above http.postBuffer (1 MiB) is sent with Transfer-Encoding: chunked (no Content-Length).
    await Bun.write(join(work, "big.bin"), randomBytes(3 * 1024 * 1024));
    await git(["add", "big.bin"], work);
    await git(["commit", "-m", "Add big.bin"], work);
    const big = await git(["push", "origin", "HEAD:refs/heads/feature"], work, TRACE_HEADERS);
    expect(big.code).toBe(0);
    expect(big.stderr).toContain("Transfer-Encoding: chunked");
    expect((await server.log("pushme", "feature")).split("\n")[0]).toMatch(/^[0-9a-f]{40}\tAdd big\.bin$/);
  });

  test("a fetch whose negotiation is gzipped (many refs)", async () => {
    const url = await server.createRepo("manyrefs");
    const work = join(scratch, "manyrefs");
    await git(["clone", withCreds(url), work]);
    for (let i = 0; i < 60; i++) await git(["branch", `a-branch-with-a-rather-long-name-${i}`], work);
    expect((await git(["push", "origin", "--all"], work)).code).toBe(0);
    // Over 1 KiB of "want" lines: git sends the upload-pack request with Content-Encoding: gzip.
    const r = await git(["clone", "--mirror", withCreds(url), "manyrefs-mirror"], scratch, TRACE_HEADERS);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("Content-Encoding: gzip");
    expect((await git(["for-each-ref"], join(scratch, "manyrefs-mirror"))).stdout.trim().split("\n").length).toBe(61);
  });

  test("an unknown repository is a 404", async () => {
    const auth = `Basic ${btoa(`${server.user}:${server.password}`)}`;
    const res = await fetch(`${server.url}/nope.git/info/refs?service=git-upload-pack`, { headers: { authorization: auth } });
    expect(res.status).toBe(404);
    await res.text();
  });

  test("createLargeRepo clones at about the asked size", async () => {
    const bytes = 5 * 1024 * 1024;
    const url = await server.createLargeRepo("large", bytes);
    const commits = (await server.log("large")).trim().split("\n");
    expect(commits.length).toBeGreaterThan(1);
    const r = await git(["clone", "--quiet", withCreds(url), "large"]);
    expect(r.code).toBe(0);
    const files = readdirSync(join(scratch, "large")).filter((f) => f.endsWith(".bin"));
    expect(files.length).toBe(5);
    const packed = dirSize(join(scratch, "large/.git/objects"));
    expect(packed).toBeGreaterThan(bytes * 0.95);
    expect(packed).toBeLessThan(bytes * 1.1);
  });
});
