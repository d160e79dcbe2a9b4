/**
 * A local Git smart-HTTP server: bare repositories in a temp directory, served by git's own
 * `git http-backend` run as a CGI program (one process per request), behind HTTP Basic auth.
 *
 *   const git = await startGitServer();                  // user "git", random password
 *   const url = await git.createRepo("demo", { "a.txt": "hi\n" });   // → http://127.0.0.1:PORT/demo.git
 *   // clone with http://git:<password>@127.0.0.1:PORT/demo.git, push, then:
 *   await git.log("demo")                                // "<sha>\t<subject>\n…" of main
 *   git.requests                                         // [{ method, path, authorized }, …]
 *   git.delay("demo", 20_000)                            // hold each request to demo.git 20 s (a slow server)
 *   await git.stop();
 *
 * Every repository accepts pushes (`http.receivepack true`). The helper's own git runs never
 * read or write the user's git config (GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type GitRequest = { method: string; path: string; authorized: boolean };

export type GitServer = {
  /** Base URL, e.g. http://127.0.0.1:PORT (clone URLs are `${url}/<name>.git`). */
  url: string;
  user: string;
  password: string;
  /** The directory holding the bare repositories (`<root>/<name>.git`). */
  root: string;
  /** Every request received; `path` is the path plus query string. */
  requests: GitRequest[];
  createRepo(name: string, files?: Record<string, string>, opts?: { branch?: string }): Promise<string>;
  createLargeRepo(name: string, bytes: number): Promise<string>;
  log(name: string, ref?: string): Promise<string>;
  /** Holds every later request to `<name>.git` for `ms` before answering it (0: no more). */
  delay(name: string, ms: number): void;
  stop(): Promise<void>;
};

/** Environment for every git process the helper starts: no user/system config, no prompts. */
const GIT_ENV = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
  GIT_AUTHOR_NAME: "Test Author",
  GIT_AUTHOR_EMAIL: "author@example.test",
  GIT_COMMITTER_NAME: "Test Committer",
  GIT_COMMITTER_EMAIL: "committer@example.test",
};

/** Runs git, returns stdout; throws with stderr when it fails. */
async function git(args: string[], cwd?: string): Promise<string> {
  const proc = Bun.spawn(["git", ...args], { cwd, env: { ...GIT_ENV, HOME: cwd ?? tmpdir() }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`git ${args.join(" ")} exited ${code}: ${err.trim()}`);
  return out;
}

export async function startGitServer(opts: { user?: string; password?: string } = {}): Promise<GitServer> {
  const user = opts.user ?? "git";
  const password = opts.password ?? randomBytes(16).toString("hex");
  const root = mkdtempSync(join(tmpdir(), "runcell-git-"));
  const requests: GitRequest[] = [];
  const delays = new Map<string, number>();
  const expectedAuth = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // large clones/pushes may pause longer than Bun's 10 s default
    maxRequestBodySize: 1024 * 1024 * 1024,
    async fetch(req) {
      const u = new URL(req.url);
      const authorized = req.headers.get("authorization") === expectedAuth;
      requests.push({ method: req.method, path: u.pathname + u.search, authorized });
      if (!authorized) {
        return new Response("authentication required\n", { status: 401, headers: { "WWW-Authenticate": 'Basic realm="git"' } });
      }
      const ms = delays.get(/^\/([^/]+)\.git\//.exec(u.pathname)?.[1] ?? "");
      if (ms) await Bun.sleep(ms);
      return runHttpBackend(req, u, root, user);
    },
  });
  const url = `http://127.0.0.1:${server.port}`;

  /** An empty bare repository that accepts pushes over HTTP. */
  async function initBare(name: string, branch: string): Promise<string> {
    const dir = join(root, `${name}.git`);
    await git(["init", "--quiet", "--bare", `--initial-branch=${branch}`, dir]);
    await git(["--git-dir", dir, "config", "http.receivepack", "true"]);
    return dir;
  }

  /** A scratch work tree pushed into the bare repository, then removed. */
  async function withWorkTree(bare: string, branch: string, fill: (work: string) => Promise<void>): Promise<void> {
    const work = mkdtempSync(join(tmpdir(), "runcell-git-work-"));
    try {
      await git(["init", "--quiet", `--initial-branch=${branch}`], work);
      await fill(work);
      await git(["push", "--quiet", bare, `HEAD:refs/heads/${branch}`], work);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  return {
    url,
    user,
    password,
    root,
    requests,

    async createRepo(name, files = { "README.md": "# test\n" }, repoOpts = {}) {
      const branch = repoOpts.branch ?? "main";
      const bare = await initBare(name, branch);
      await withWorkTree(bare, branch, async (work) => {
        for (const [path, content] of Object.entries(files)) await Bun.write(join(work, path), content);
        await git(["add", "-A"], work);
        await git(["commit", "--quiet", "--allow-empty", "-m", "Initial commit"], work);
      });
      return `${url}/${name}.git`;
    },

    async createLargeRepo(name, bytes) {
      const FILE = 1024 * 1024;
      const COMMITS = 4;
      const fileCount = Math.max(1, Math.round(bytes / FILE));
      const perCommit = Math.ceil(fileCount / COMMITS);
      const bare = await initBare(name, "main");
      await withWorkTree(bare, "main", async (work) => {
        for (let c = 0, n = 0; n < fileCount; c++) {
          for (let i = 0; i < perCommit && n < fileCount; i++, n++) {
            // Random bytes: zlib cannot shrink them, so the pack is about `bytes` on the wire.
            await Bun.write(join(work, `blob-${String(n).padStart(4, "0")}.bin`), randomBytes(Math.min(FILE, bytes)));
          }
          await git(["add", "-A"], work);
          await git(["commit", "--quiet", "-m", `Large commit ${c + 1}`], work);
        }
      });
      return `${url}/${name}.git`;
    },

    async log(name, ref = "main") {
      return git(["--git-dir", join(root, `${name}.git`), "log", "--format=%H%x09%s", ref]);
    },

    delay(name, ms) {
      delays.set(name, ms);
    },

    async stop() {
      await server.stop(true);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * One CGI request (RFC 3875) to `git http-backend`: request metadata goes in environment
 * variables, the request body is streamed to its stdin, and its stdout is a CGI response —
 * header lines (`Status: 200 OK`, `Content-Type: …`, …), a blank line, then the body.
 */
async function runHttpBackend(req: Request, u: URL, root: string, remoteUser: string): Promise<Response> {
  const h = req.headers;
  const env: Record<string, string> = {
    ...GIT_ENV,
    HOME: root,
    GIT_PROJECT_ROOT: root, // repositories are looked up under here by PATH_INFO
    GIT_HTTP_EXPORT_ALL: "1", // serve every repo, without a git-daemon-export-ok file
    PATH_INFO: decodeURIComponent(u.pathname), // e.g. /demo.git/info/refs
    QUERY_STRING: u.search.slice(1), // e.g. service=git-upload-pack
    REQUEST_METHOD: req.method,
    CONTENT_TYPE: h.get("content-type") ?? "",
    // http-backend refuses receive-pack (push) unless the request is authenticated (REMOTE_USER)
    // or the repo sets http.receivepack; we do both.
    REMOTE_USER: remoteUser,
    REMOTE_ADDR: "127.0.0.1",
  };
  // Without CONTENT_LENGTH (a chunked body) http-backend reads stdin to EOF.
  const length = h.get("content-length");
  if (length !== null) env.CONTENT_LENGTH = length;
  // The client gzips large fetch negotiations; http-backend inflates them itself.
  const encoding = h.get("content-encoding");
  if (encoding) env.HTTP_CONTENT_ENCODING = encoding;
  // Protocol v2 is requested through the Git-Protocol header, passed on as GIT_PROTOCOL.
  const protocol = h.get("git-protocol");
  if (protocol) env.GIT_PROTOCOL = protocol;

  const proc = Bun.spawn(["git", "http-backend"], {
    env,
    stdin: req.body ?? "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stderr = new Response(proc.stderr).text();

  // Read stdout until the blank line that ends the CGI headers.
  const reader = proc.stdout.getReader();
  let buf: Uint8Array = new Uint8Array(0);
  let head: { end: number; sep: number } | null = null;
  while (!head) {
    const { value, done } = await reader.read();
    if (done) break;
    buf = concat(buf, value);
    const m = /\r?\n\r?\n/.exec(Buffer.from(buf).toString("latin1"));
    if (m) head = { end: m.index, sep: m[0].length };
  }
  if (!head) {
    await proc.exited;
    return new Response(`git http-backend gave no CGI headers: ${await stderr}\n`, { status: 502 });
  }

  let status = 200;
  const headers = new Headers();
  for (const line of Buffer.from(buf.subarray(0, head.end)).toString("latin1").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
    else headers.append(name, value);
  }

  // The body: what followed the headers in the last chunk, then the rest of stdout as it comes.
  const rest = buf.subarray(head.end + head.sep);
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (rest.length) controller.enqueue(rest);
    },
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel() {
      proc.kill();
    },
  });
  return new Response(body, { status, headers });
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
