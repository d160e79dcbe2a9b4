/**
 * The identity CLI, run as real subprocesses on a real data dir: admin create-user, admin
 * set-password (--stdin and the no-echo terminal prompt), token create, doctor's admin-password
 * check, and `serve` printing the first-run setup link (and the admin password file at start).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTestApp, tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { api } from "../helpers/users.ts";

const ROOT = join(import.meta.dir, "..", "..");
const dirs: string[] = [];
const dataDir = () => {
  const d = tempDir();
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Starts a test app on `dir` (the same database the CLI wrote), runs `fn`, stops it. */
async function withApp<T>(dir: string, fn: (t: Awaited<ReturnType<typeof startTestApp>>) => Promise<T>): Promise<T> {
  const t = await startTestApp({ dataDir: dir });
  try {
    return await fn(t);
  } finally {
    await t.stop();
  }
}
const signIn = (t: Awaited<ReturnType<typeof startTestApp>>, email: string, password: string) => api(t, "POST", "/api/auth/sign-in/email", {}, { email, password });

describe("runcell admin create-user", () => {
  test("without --password-stdin: generates a strong password and prints it once; the account works", async () => {
    const dir = dataDir();
    const r = await runCli(["admin", "create-user", "--email", " Root@Example.com ", "--role", "admin", "--data-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^created user usr_\w+ root@example\.com \(role admin\)$/m);
    const password = /^password: (\S+)$/m.exec(r.stdout)![1]!;
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(r.stdout).toContain("shown only once");
    await withApp(dir, async (t) => {
      const s = await signIn(t, "root@example.com", password);
      expect(s.status).toBe(200);
      expect(s.body.user.role).toBe("admin");
    });
  });

  test("without --role the server's first account is its admin (as the setup link makes it), the next ones users", async () => {
    const dir = dataDir();
    const first = await runCli(["admin", "create-user", "--email", "first@example.com", "--data-dir", dir]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("(role admin: the server's first account)");
    const second = await runCli(["admin", "create-user", "--email", "second@example.com", "--data-dir", dir]);
    expect(second.stdout).toContain("(role user)");
    const third = await runCli(["admin", "create-user", "--email", "third@example.com", "--role", "admin", "--data-dir", dir]);
    expect(third.stdout).toContain("(role admin)");
    // Several made at once on an empty server: one admin, the one made first.
    const racy = dataDir();
    expect((await runCli(["migrate", "--data-dir", racy])).code).toBe(0);
    const made = await Promise.all([1, 2, 3, 4].map((n) => runCli(["admin", "create-user", "--email", `race${n}@example.com`, "--data-dir", racy])));
    expect(made.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(made.filter((r) => r.stdout.includes("(role admin")).length).toBe(1);
    // An explicit --role user on an empty server is honoured.
    const other = dataDir();
    expect((await runCli(["admin", "create-user", "--email", "plain@example.com", "--role", "user", "--data-dir", other])).stdout).toContain("(role user)");
  });

  test("--password-stdin reads the password; role defaults to user once an account exists; --name is kept", async () => {
    const dir = dataDir();
    expect((await runCli(["admin", "create-user", "--email", "root@example.com", "--data-dir", dir])).code).toBe(0);
    const r = await runCli(["admin", "create-user", "--email", "bob@example.com", "--name", "Bob B", "--password-stdin", "--data-dir", dir], { stdin: "bob's long passphrase\n" });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("password:");
    expect(r.stdout).toContain("(role user)");
    await withApp(dir, async (t) => {
      const s = await signIn(t, "bob@example.com", "bob's long passphrase");
      expect(s.status).toBe(200);
      expect(s.body.user).toMatchObject({ name: "Bob B", role: "user" });
    });
  });

  test.each([
    [["--email", "dup@example.com"], 1, /already exists/, true],
    [["--email", "weak@example.com", "--password-stdin"], 1, /at least 8 characters/, false],
    [["--email", "not-an-email"], 1, /not a valid address/, false],
    [[], 2, /--email is required/, false],
    [["--email", "r@example.com", "--role", "root"], 2, /--role: expected admin or user/, false],
    [["--email", "x@example.com", "extra"], 2, /unexpected argument "extra"/, false],
  ])("%p → exit %d", async (args, code, message, seedDuplicate) => {
    const dir = dataDir();
    if (seedDuplicate) expect((await runCli(["admin", "create-user", "--email", "DUP@example.com", "--data-dir", dir])).code).toBe(0);
    const r = await runCli(["admin", "create-user", ...(args as string[]), "--data-dir", dir], { stdin: "short" });
    expect(r.code).toBe(code);
    expect(r.stderr).toMatch(message as RegExp);
  });
});

describe("runcell admin set-password", () => {
  test("--stdin stores an argon2id hash; the server accepts it on /admin/*; doctor turns OK", async () => {
    const dir = dataDir();
    const before = await runCli(["doctor", "--data-dir", dir]);
    expect(before.stdout).toMatch(/^FAIL admin password: none is set.*\n\s+fix: run `runcell admin set-password`/m);
    const r = await runCli(["admin", "set-password", "--stdin", "--data-dir", dir], { stdin: "the operator's password\n" });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`admin password set (argon2id hash stored in ${join(dir, "runcell.db")})`);
    const after = await runCli(["doctor", "--data-dir", dir]);
    expect(after.stdout).toMatch(/^OK {3}admin password: set \(argon2id hash in the database\)$/m);
    await withApp(dir, async (t) => {
      const hash = (await t.app.services.settings.get<string>("admin_password_hash"))!;
      expect(hash).toStartWith("$argon2id$v=19$m=19456,t=2,p=1$");
      expect((await api(t, "GET", "/admin/stats", { authorization: "Bearer the operator's password" })).status).toBe(200);
      expect((await api(t, "GET", "/admin/stats", { authorization: "Bearer the operator's passwor" })).status).toBe(401);
    });
  });

  test.each([
    [["--stdin"], "short", 1, /at least 12 characters/],
    [["--stdin"], "pässwörd-ünïcode-123\n", 1, /must be printable ASCII/],
    [["--stdin"], "  leading-and-trailing  \n", 1, /must not begin or end with whitespace/],
    [[], undefined, 2, /stdin is not a terminal/],
    [["--bogus"], undefined, 2, /unknown flag --bogus/],
  ])("%p with stdin %p → exit %d", async (args, stdin, code, message) => {
    const r = await runCli(["admin", "set-password", ...(args as string[]), "--data-dir", dataDir()], { stdin: stdin as string | undefined });
    expect(r.code).toBe(code);
    expect(r.stderr).toMatch(message);
  });

  test("on a terminal it prompts twice without echoing; a mismatch changes nothing", async () => {
    const dir = dataDir();
    const drive = async (first: string, second: string) => {
      // python's pty gives the child a real terminal (raw mode, no echo are then observable).
      const script = `
import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bun", ["bun", ${JSON.stringify(join(ROOT, "src/main.ts"))}, "admin", "set-password", "--data-dir", ${JSON.stringify(dir)}])
out = b""
def until(s):
    global out
    end = time.time() + 15
    while s not in out and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: break
until(b"New admin password")
os.write(fd, ${JSON.stringify(first)}.encode() + b"\\r")
until(b"Repeat")
os.write(fd, ${JSON.stringify(second)}.encode() + b"\\r")
until(b"\\x00never")
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("\\nEXIT=%d" % os.WEXITSTATUS(st))
`;
      const p = Bun.spawn(["python3", "-c", script], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root" } });
      const out = await new Response(p.stdout).text();
      await p.exited;
      return out;
    };
    const mismatch = await drive("first typed password", "second typed password");
    expect(mismatch).toContain("EXIT=1");
    expect(mismatch).toContain("differ");
    expect(mismatch).not.toContain("typed password");
    const ok = await drive("terminal typed secret", "terminal typed secret");
    expect(ok).toContain("EXIT=0");
    expect(ok).toContain("admin password set");
    expect(ok).not.toContain("terminal typed secret");
    await withApp(dir, async (t) => {
      expect((await api(t, "GET", "/admin/config", { authorization: "Bearer terminal typed secret" })).status).toBe(200);
    });
  }, 30_000);
});

describe("runcell token create", () => {
  test("prints only the token on stdout (once); it authenticates /v1/*", async () => {
    const dir = dataDir();
    expect((await runCli(["admin", "create-user", "--email", "ci@example.com", "--data-dir", dir])).code).toBe(0);
    const r = await runCli(["token", "create", "--email", "CI@example.com", "--name", "ci", "--data-dir", dir]);
    expect(r.code).toBe(0);
    const token = r.stdout.trim();
    expect(token).toMatch(/^rc_[0-9a-f]{64}$/);
    expect(r.stderr).toMatch(/created API token tok_\w+ "ci" for ci@example\.com/);
    await withApp(dir, async (t) => {
      const list = await api(t, "GET", "/v1/api-tokens", { authorization: `Bearer ${token}` });
      expect(list.status).toBe(200);
      expect(list.body.data.map((x: { name: string }) => x.name)).toEqual(["ci"]);
    });
  });

  test("an email no account uses → exit 1, on a data dir that has a database", async () => {
    const dir = dataDir();
    expect((await runCli(["admin", "create-user", "--email", "someone@example.com", "--data-dir", dir])).code).toBe(0);
    const r = await runCli(["token", "create", "--email", "nobody@example.com", "--name", "x", "--data-dir", dir]);
    expect([r.code, r.stdout]).toEqual([1, ""]);
    expect(r.stderr).toMatch(/no account uses nobody@example\.com/);
  });

  test("a mistyped --data-dir (token create, audit): says there is no database there, exit 1, and creates nothing", async () => {
    const parent = dataDir();
    for (const [args, dir] of [
      [["token", "create", "--email", "ci@example.com", "--name", "x"], join(parent, "typo")],
      [["audit"], join(parent, "typo2")],
      // A directory that exists but holds no database is not given one either.
      [["token", "create", "--email", "ci@example.com", "--name", "x"], parent],
    ] as const) {
      const r = await runCli([...args, "--data-dir", dir]);
      expect([r.code, r.stdout]).toEqual([1, ""]);
      expect(r.stderr).toContain(`there is no runcell database in ${dir} (no runcell.db); check --data-dir`);
      expect(existsSync(join(dir, "runcell.db"))).toBe(false);
    }
    expect(existsSync(join(parent, "typo"))).toBe(false);
  });

  test.each([
    [["create", "--email", "nobody@example.com"], 2, /--name is required/],
    [["create", "--name", "x"], 2, /--email is required/],
    [["list"], 2, /unknown subcommand "list"/],
  ])("%p → exit %d", async (args, code, message) => {
    const r = await runCli(["token", ...(args as string[]), "--data-dir", dataDir()]);
    expect(r.code).toBe(code);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  });

  test("--help shows usage and examples", async () => {
    const r = await runCli(["token", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("runcell token create --email E --name N");
    expect(r.stdout).toContain("Examples:");
    const a = await runCli(["admin", "--help"]);
    expect(a.stdout).toContain("runcell admin set-password [--stdin]");
    expect(a.stdout).toContain("runcell admin create-user --email E");
  });
});

describe("runcell serve and the first run", () => {
  /** Starts `serve` in the background and collects its stdout. */
  async function serve(dir: string, extra: string[] = [], env: Record<string, string> = {}) {
    const port = await freePort();
    const proc = Bun.spawn(["bun", join(ROOT, "src/main.ts"), "serve", "--http", `127.0.0.1:${port}`, "--data-dir", dir, ...extra], {
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
    });
    let out = "";
    let err = "";
    const drain = async (stream: ReadableStream<Uint8Array>, add: (s: string) => void) => {
      const reader = stream.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        add(dec.decode(value, { stream: true }));
      }
    };
    void drain(proc.stdout, (s) => (out += s));
    void drain(proc.stderr, (s) => (err += s));
    return {
      url: `http://127.0.0.1:${port}`,
      proc,
      out: () => out,
      err: () => err,
      async stop() {
        proc.kill("SIGTERM");
        return proc.exited;
      },
    };
  }

  test("with no account, serve prints a one-time /setup# link (not through the logger) that creates the first admin; the next start prints none", async () => {
    const dir = dataDir();
    const s = await serve(dir);
    try {
      const link = await waitFor(() => /^ {4}(http:\/\/\S+\/setup#([A-Za-z0-9_-]{43}))$/m.exec(s.out()), { what: "the setup link", timeoutMs: 15_000 });
      expect(link[1]).toStartWith(`${s.url}/setup#`);
      // The JSON log lines never carry it.
      for (const line of s.out().split("\n").filter((l) => l.startsWith("{"))) expect(line).not.toContain(link[2]!);
      const r = await fetch(`${s.url}/api/auth/setup`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: s.url },
        body: JSON.stringify({ token: link[2], email: "first@example.com", password: "first admin pw" }),
      });
      expect(r.status).toBe(201);
      expect(((await r.json()) as { user: { role: string } }).user.role).toBe("admin");
    } finally {
      expect(await s.stop()).toBe(0);
    }
    const again = await serve(dir);
    try {
      await waitFor(() => again.out().includes("runcell listening"), { what: "listening", timeoutMs: 15_000 });
      await Bun.sleep(100);
      expect(again.out()).not.toContain("/setup#");
    } finally {
      await again.stop();
    }
  }, 40_000);

  test("--admin-password-file sets the admin password at start; a too-short one stops the start with exit 2", async () => {
    const dir = dataDir();
    const file = join(dir, "admin.pw");
    writeFileSync(file, "file based admin password\n");
    chmodSync(file, 0o600);
    const s = await serve(dir, ["--admin-password-file", file]);
    try {
      await waitFor(() => s.out().includes("runcell listening"), { what: "listening", timeoutMs: 15_000 });
      const ok = await waitFor(async () => {
        const r = await fetch(`${s.url}/admin/stats`, { headers: { authorization: "Bearer file based admin password" } });
        return r.status === 200;
      });
      expect(ok).toBe(true);
    } finally {
      await s.stop();
    }
    writeFileSync(file, "short\n");
    const fresh = dataDir();
    const bad = await serve(fresh, ["--admin-password-file", file]);
    const code = await bad.proc.exited;
    expect(code).toBe(2);
    expect(bad.err()).toContain("admin password from --admin-password-file");
    expect(bad.err()).toContain("at least 12 characters");
    // Checked before the data dir is touched: no database made (nor migrated, on an existing one).
    expect(existsSync(join(fresh, "runcell.db"))).toBe(false);
    // One an Authorization header cannot carry unchanged (trailing spaces, non-ASCII): refused at once too.
    for (const text of ["trailing spaces here   \r\n", "pässwörd-ünïcode-123\n"]) {
      writeFileSync(file, text);
      const unusable = await serve(fresh, ["--admin-password-file", file]);
      expect(await unusable.proc.exited).toBe(2);
      expect(unusable.err()).toMatch(/must not begin or end with whitespace|must be printable ASCII/);
      expect(existsSync(join(fresh, "runcell.db"))).toBe(false);
    }
    const missing = await serve(fresh, ["--admin-password-file", join(dir, "nope.pw")]);
    expect(await missing.proc.exited).toBe(2);
    expect(missing.err()).toContain(`admin password from --admin-password-file ${join(dir, "nope.pw")}`);
    expect(missing.err()).toContain(": the file does not exist");
    expect(existsSync(join(fresh, "runcell.db"))).toBe(false);
  }, 40_000);
});
