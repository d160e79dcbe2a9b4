/**
 * `runcell doctor` as an operator runs it: a real process (`bun src/main.ts doctor`) against real
 * data dirs, the real Docker engine, and a real `serve` holding the lock.
 *
 * A good setup (a migrated database, the admin password set, the test image, https behind a
 * proxy with --trust-proxy, a provider key) is all OK or WARN and exits 0, without printing the
 * key; a broken one — no Docker socket, a data dir that cannot be written, a damaged or newer
 * database — prints FAIL lines with their fix and exits 1; a data dir a running serve holds shows
 * that server's pid (information, not a failure); `--json` is an array of
 * {check, status, message, fix}.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, closeSync, openSync, rmSync, symlinkSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { CHECKS, type CheckResult, redactCommand, runChecks } from "../../src/admin/doctor.ts";
import { resolveConfig } from "../../src/config.ts";
import { DB_FILE } from "../../src/db/data-dir.ts";
import { BINARY_SCHEMA } from "../../src/db/migrate.ts";
import { VERSION } from "../../src/version.ts";
import { tempDir } from "../helpers/app.ts";
import { type CliResult, runCli } from "../helpers/cli.ts";
import { secondDockerd, secondDockerdEnv } from "../helpers/second-dockerd.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { createDatabase, dropDatabase, PG_SERVER } from "../helpers/pg.ts";
import { type ServerProcess, spawnServer } from "../helpers/server-process.ts";

const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
const NAMES = CHECKS.map((c) => c.name);
const KEY = "sk-ant-doctor-test-0123456789abcdefghijklmnopqrstuvwxyz";
const dirs: string[] = [];
const servers: ServerProcess[] = [];
const immutable: string[] = [];

afterAll(() => {
  for (const s of servers) if (s.proc.exitCode === null) s.proc.kill("SIGKILL");
  for (const d of immutable) Bun.spawnSync(["chattr", "-i", d]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(prefix = "runcell-doctor-") {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** A data dir a server has used: migrated, with the admin password set (through the CLI). */
async function goodDataDir(): Promise<string> {
  const d = dir();
  const migrated = await runCli(["migrate", "--data-dir", d]);
  expect(migrated.code, migrated.stderr).toBe(0);
  const pw = await runCli(["admin", "set-password", "--stdin", "--data-dir", d], { stdin: "the operator's password\n" });
  expect(pw.code, pw.stderr).toBe(0);
  return d;
}

const doctor = (args: string[], env: Record<string, string> = {}) => runCli(["doctor", ...args], { env });

interface Line {
  status: string;
  message: string;
  fix: string | null;
}

/** The text report as check → line (each check exactly once, in CHECKS order). */
function parse(r: CliResult): Map<string, Line> {
  const lines = r.stdout.split("\n");
  const out = new Map<string, Line>();
  const order: string[] = [];
  lines.forEach((l, i) => {
    const m = /^(OK|WARN|FAIL) +([a-z ]+): (.*)$/.exec(l);
    if (!m) return;
    const fixLine = /^ {5}fix: (.*)$/.exec(lines[i + 1] ?? "");
    expect(out.has(m[2]!)).toBe(false);
    out.set(m[2]!, { status: m[1]!, message: m[3]!, fix: fixLine ? fixLine[1]! : null });
    order.push(m[2]!);
  });
  expect(order).toEqual(NAMES);
  return out;
}

function expectStatus(report: Map<string, Line>, check: string, status: string, message?: RegExp | string) {
  const line = report.get(check)!;
  expect(line, check).toBeDefined();
  expect(`${check}: ${line.status}`).toBe(`${check}: ${status}`);
  if (message !== undefined) {
    if (typeof message === "string") expect(line.message).toContain(message);
    else expect(line.message).toMatch(message);
  }
  if (status === "OK") expect(line.fix).toBeNull();
  else expect(line.fix, `${check} has a fix`).toBeTruthy();
}

describe("a good setup", () => {
  const flags = (d: string) => ["--data-dir", d, "--workspace-image", IMAGE, "--public-url", "https://agents.example.com", "--trust-proxy", "--http", "127.0.0.1:7420"];

  test("every check OK or WARN, exit 0; the provider key is never printed", async () => {
    const d = await goodDataDir();
    const r = await doctor(flags(d), { ANTHROPIC_API_KEY: KEY });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const report = parse(r);
    for (const [check, line] of report) expect(`${check}: ${line.status}`).toMatch(/: (OK|WARN)$/);
    expectStatus(report, "data dir", "OK", `${d}: owner root (uid 0), mode 0700, writable`);
    expectStatus(report, "lock", "OK", "not held");
    expectStatus(report, "database", "OK", "quick_check ok");
    expectStatus(report, "schema", "OK", `current: ${BINARY_SCHEMA} (written by runcell ${VERSION})`);
    expectStatus(report, "disk", "OK", /free of .* on the data dir's filesystem/);
    expectStatus(report, "docker", "OK", /^unix:\/\/\/var\/run\/docker\.sock answers: Docker Engine \d+\.\d+/);
    expectStatus(report, "workspace image", "OK", `${IMAGE} present`);
    expectStatus(report, "clock", "OK", "matches the Docker engine's clock");
    expectStatus(report, "admin password", "OK", "set (argon2id hash in the database)");
    expectStatus(report, "public url", "OK", "https://agents.example.com behind a proxy (--trust-proxy; cookies are Secure)");
    expectStatus(report, "providers", "OK", "anthropic key set (ANTHROPIC_API_KEY)");
    expectStatus(report, "webhooks", "OK", "SSRF guard on");
    expectStatus(report, "git", "OK", /^git 2\.\d+.* at \/.*git \(repositories are cloned and pushed with it\)$/);
    expect(r.stdout).toMatch(/^15 checks: \d+ OK, \d+ WARN, 0 FAIL$/m);
    expect(r.stdout + r.stderr).not.toContain(KEY);
    expect(r.stdout + r.stderr).not.toContain(KEY.slice(8, 24));
  });

  test("--json: an array of {check, status, message, fix}, the same checks, exit 0", async () => {
    const d = await goodDataDir();
    const r = await doctor([...flags(d), "--json"], { OPENAI_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const results = JSON.parse(r.stdout) as CheckResult[];
    expect(results.map((x) => x.check)).toEqual(NAMES);
    for (const x of results) {
      expect(Object.keys(x).sort()).toEqual(["check", "fix", "message", "status"]);
      expect(["OK", "WARN"]).toContain(x.status);
      expect(typeof x.message).toBe("string");
      if (x.status === "OK") expect(x.fix).toBeNull();
      else expect(typeof x.fix).toBe("string");
    }
    expect(results.find((x) => x.check === "providers")!.message).toContain("openai key set (OPENAI_API_KEY)");
    expect(r.stdout).not.toContain(KEY);
  });

  test("WARNs keep exit 0: no provider key, https without --trust-proxy, the SSRF guard off, a readable data dir", async () => {
    const d = await goodDataDir();
    chmodSync(d, 0o755);
    const r = await doctor(["--data-dir", d, "--workspace-image", IMAGE, "--public-url", "https://agents.example.com", "--allow-private-webhooks"]);
    expect(r.code, r.stdout).toBe(0);
    const report = parse(r);
    expectStatus(report, "data dir", "WARN", "mode 0755");
    expect(report.get("data dir")!.fix).toBe(`chmod 700 ${d}`);
    expectStatus(report, "public url", "WARN", "--trust-proxy is off");
    expectStatus(report, "webhooks", "WARN", "SSRF guard off");
    expectStatus(report, "providers", "WARN", "no server key");
    // No git on the PATH: repositories cannot be cloned (a WARN: the rest works).
    const onlyBun = dir();
    symlinkSync(process.execPath, join(onlyBun, "bun"));
    const nogit = parse(await doctor(["--data-dir", d], { PATH: onlyBun }));
    expectStatus(nogit, "git", "WARN", "git is not installed");
    // --trust-proxy on a public listen address: anyone can forge X-Forwarded-For.
    const open = parse(await doctor(["--data-dir", d, "--public-url", "https://agents.example.com", "--trust-proxy", "--http", "0.0.0.0:7420"]));
    expectStatus(open, "public url", "WARN", "listens on 0.0.0.0:7420");
    expect(open.get("public url")!.fix).toContain("--http 127.0.0.1:7420");
  });
});

describe("a broken setup: FAIL lines with their fix, exit 1", () => {
  test("no Docker socket (--docker-host or RUNCELL_DOCKER_HOST at a missing socket)", async () => {
    const d = await goodDataDir();
    const missing = join(dir(), "docker.sock");
    for (const [args, env] of [
      [["--docker-host", `unix://${missing}`], {}],
      [[], { RUNCELL_DOCKER_HOST: `unix://${missing}` }],
    ] as [string[], Record<string, string>][]) {
      const r = await doctor(["--data-dir", d, ...args], env);
      expect(r.code).toBe(1);
      const report = parse(r);
      expectStatus(report, "docker", "FAIL", `cannot reach unix://${missing}: connect ENOENT ${missing}`);
      expect(report.get("docker")!.fix).toContain("sudo systemctl start docker");
      expectStatus(report, "workspace image", "WARN", "not checked, Docker is not reachable");
      expectStatus(report, "clock", "OK", "the Docker engine's clock is not available");
      expect(r.stdout).toMatch(/^FAIL docker: .*\n {5}fix: /m);
    }
    // DOCKER_HOST is not what serve uses: doctor says so instead of silently checking another engine.
    const r = await doctor(["--data-dir", d, "--workspace-image", IMAGE], { DOCKER_HOST: `unix://${missing}` });
    expectStatus(parse(r), "docker", "WARN", `DOCKER_HOST=unix://${missing} is set, but runcell uses --docker-host / RUNCELL_DOCKER_HOST`);
  });

  test("an admin password an Authorization header cannot carry (non-ASCII, edge spaces), from a file or the environment", async () => {
    const d = await goodDataDir();
    const file = join(dir(), "admin.pw");
    writeFileSync(file, "pässwörd-ünïcode-123\n", { mode: 0o600 });
    const fromFile = parse(await doctor(["--data-dir", d, "--admin-password-file", file]));
    expect(fromFile.get("admin password")!.status).toBe("FAIL");
    expect(fromFile.get("admin password")!.message).toContain("must be printable ASCII");
    const fromEnv = parse(await doctor(["--data-dir", d], { RUNCELL_ADMIN_PASSWORD: "  padded admin password  " }));
    expect(fromEnv.get("admin password")!.status).toBe("FAIL");
    expect(fromEnv.get("admin password")!.message).toContain("must not begin or end with whitespace");
  });

  test("several Docker hosts: each further one is checked (reached over TLS, its workspace image), one that does not answer is a warning", async () => {
    const d = await goodDataDir();
    const second = secondDockerdEnv();
    secondDockerd("start");
    const missing = join(dir(), "docker.sock");
    const hosts = ["--docker-host", "unix:///var/run/docker.sock", "--docker-host", `${second.TCP}?name=b&tls_dir=${second.TLS_DIR}`];
    let report = parse(await doctor(["--data-dir", d, "--workspace-image", IMAGE, ...hosts]));
    expectStatus(report, "docker", "OK", /^unix:\/\/\/var\/run\/docker\.sock answers/);
    expectStatus(report, "docker hosts", "OK", new RegExp(`^default above; b \\(${second.TCP}\\): Docker Engine \\d+\\.\\d+.*, has the workspace image$`));
    report = parse(await doctor(["--data-dir", d, "--workspace-image", IMAGE, ...hosts, "--docker-host", `unix://${missing}?name=gone`]));
    expectStatus(report, "docker hosts", "WARN", `gone (unix://${missing}): cannot reach it`);
    expect(report.get("docker hosts")!.fix).toContain("start the engines of gone");
    expectStatus(parse(await doctor(["--data-dir", d, "--workspace-image", IMAGE])), "docker hosts", "OK", "one Docker host (the docker check above)");
  });

  test("a data dir that cannot be written: under a file, a file itself, immutable, or holding another user's files", async () => {
    const base = dir();
    const file = join(base, "not-a-dir");
    writeFileSync(file, "x");
    const under = await doctor(["--data-dir", join(file, "data")]);
    expect(under.code).toBe(1);
    expectStatus(parse(under), "data dir", "FAIL", `${join(file, "data")} cannot be created: ${file} is a file, not a directory`);

    const itself = await doctor(["--data-dir", file]);
    expect(itself.code).toBe(1);
    expectStatus(parse(itself), "data dir", "FAIL", `${file} is not a directory`);

    // Root writes anywhere, but not into an immutable directory (ext4/xfs/btrfs; skipped where chattr is refused).
    const locked = await goodDataDir();
    if (Bun.spawnSync(["chattr", "+i", locked], { stderr: "ignore" }).exitCode === 0) {
      immutable.push(locked);
      try {
        const r = await doctor(["--data-dir", locked, "--workspace-image", IMAGE]);
        expect(r.code).toBe(1);
        const report = parse(r);
        expectStatus(report, "data dir", "FAIL", `${locked} is not writable by root (uid 0): EPERM`);
        expect(report.get("data dir")!.fix).toContain(`chattr -i ${locked}`);
      } finally {
        Bun.spawnSync(["chattr", "-i", locked]);
      }
    } else console.warn("chattr +i is not supported on this filesystem: the immutable data dir case was skipped");

    // `sudo runcell …` left root's files in a data dir the service user owns: the server cannot write them.
    const mixed = await goodDataDir();
    chownSync(mixed, 65534, 65534);
    const r = await doctor(["--data-dir", mixed, "--workspace-image", IMAGE]);
    expect(r.code).toBe(1);
    const report = parse(r);
    expectStatus(report, "data dir", "FAIL", `but ${DB_FILE} (root)`);
    expect(report.get("data dir")!.fix).toMatch(/^sudo chown -R \S+: /);
  });

  test("a damaged database, one a newer runcell wrote, one an older runcell wrote", async () => {
    const damaged = await goodDataDir();
    // Overwrite the middle of the file (table and index pages), leaving the header intact.
    const fd = openSync(join(damaged, DB_FILE), "r+");
    writeSync(fd, Buffer.alloc(4096 * 6, 0xa5), 0, 4096 * 6, 4096 * 2);
    closeSync(fd);
    const bad = await doctor(["--data-dir", damaged, "--workspace-image", IMAGE]);
    expect(bad.code).toBe(1);
    expectStatus(parse(bad), "database", "FAIL", /quick_check/);
    expect(parse(bad).get("database")!.fix).toContain("runcell restore");

    // Damaged where SQLite cannot even read its schema: the schema check does not say "no database yet".
    const unreadable = await goodDataDir();
    const fd1 = openSync(join(unreadable, DB_FILE), "r+");
    writeSync(fd1, Buffer.alloc(3996, 0xa5), 0, 3996, 100);
    closeSync(fd1);
    const u = parse(await doctor(["--data-dir", unreadable, "--workspace-image", IMAGE]));
    expectStatus(u, "database", "FAIL", "cannot open");
    expectStatus(u, "schema", "WARN", "not checked: the database cannot be read");
    expect(u.get("schema")!.message).not.toContain("no database yet");

    const newer = await goodDataDir();
    const db = new Database(join(newer, DB_FILE));
    db.run("INSERT INTO _migrations (tag, hash, applied_at) VALUES ('9999_future', 'x', 0)");
    db.run(`UPDATE settings SET value = '{"version":"9.9.9","commit":"abc","schema":"9999_future","migrated_at":"2030-01-01T00:00:00Z"}' WHERE key = 'schema.writer'`);
    db.close();
    const r = await doctor(["--data-dir", newer, "--workspace-image", IMAGE]);
    expect(r.code).toBe(1);
    const report = parse(r);
    expectStatus(report, "schema", "FAIL", `newer: 9999_future (written by runcell 9.9.9 (commit abc)); this runcell ${VERSION} knows schema up to ${BINARY_SCHEMA}`);
    expect(report.get("schema")!.fix).toContain("run runcell 9.9.9 or newer");

    const older = await goodDataDir();
    const o = new Database(join(older, DB_FILE));
    o.run("DELETE FROM _migrations WHERE tag = ?", [BINARY_SCHEMA]);
    o.close();
    const w = parse(await doctor(["--data-dir", older, "--workspace-image", IMAGE]));
    expectStatus(w, "schema", "WARN", `would apply ${BINARY_SCHEMA}`);
  });

  test("a data dir a running serve holds: the lock line names its pid (not a failure); the rest still checked", async () => {
    const d = await goodDataDir();
    const server = await spawnServer({ dataDir: d });
    servers.push(server);
    const missing = join(dir(), "docker.sock");
    const r = await doctor(["--data-dir", d, "--docker-host", `unix://${missing}`, "--workspace-image", IMAGE]);
    expect(r.code).toBe(1);
    const report = parse(r);
    expectStatus(report, "lock", "OK", `held by pid ${server.proc.pid} (`);
    expect(report.get("lock")!.message).toContain("src/main.ts serve");
    expect(report.get("lock")!.message).toContain("a runcell server (or migrate/restore) is running on this data dir");
    expectStatus(report, "docker", "FAIL", "cannot reach");
    // Read-only next to the server: the database checks pass while it serves.
    expectStatus(report, "database", "OK", "quick_check ok");
    expectStatus(report, "schema", "OK", "current");
    const json = await doctor(["--data-dir", d, "--docker-host", `unix://${missing}`, "--json"]);
    expect(json.code).toBe(1);
    const results = JSON.parse(json.stdout) as CheckResult[];
    expect(results.find((x) => x.check === "lock")).toMatchObject({ status: "OK", fix: null });
    expect(results.find((x) => x.check === "docker")).toMatchObject({ status: "FAIL" });
    expect((await fetch(server.url + "/healthz")).ok).toBe(true); // doctor changed nothing under it
    expect(await server.kill("SIGTERM")).toBe(0);
  });
});

describe("the lock's holder is named without its secrets", () => {
  test("the running server's command line: the database URL's password and every secret flag's value masked, in text and --json", async () => {
    const d = await goodDataDir();
    const port = await freePort();
    // Secrets first: the line is cut at 160 characters. PostgreSQL's test server takes any
    // password; in the SQLite pass the URL's masking is the unit test's below.
    const pgUrl = PG_SERVER ? new URL(await createDatabase()) : null;
    if (pgUrl) pgUrl.password = "PGPASSWORD_LEAK";
    const database = pgUrl ? ["--database", pgUrl.toString()] : [];
    const proc = Bun.spawn(
      ["bun", "src/main.ts", "serve", ...database, "--github-client-secret", "GH_SECRET_LEAK", "--google-client-secret=GOOGLE_SECRET_LEAK", "--github-client-id", "x", "--google-client-id", "y", "--data-dir", d, "--http", `127.0.0.1:${port}`],
      { cwd: join(import.meta.dir, "..", ".."), env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root" }, stdout: "pipe", stderr: "pipe" },
    );
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, { timeoutMs: 20_000, what: "serve" });
      for (const args of [["--data-dir", d], ["--data-dir", d, "--json"]]) {
        const r = await doctor([...args, "--workspace-image", IMAGE]);
        expect(r.stdout).toContain(`held by pid ${proc.pid}`);
        for (const secret of ["PGPASSWORD_LEAK", "GH_SECRET_LEAK", "GOOGLE_SECRET_LEAK"]) expect(r.stdout + r.stderr).not.toContain(secret);
        expect(r.stdout).toContain("--github-client-secret ***");
        expect(r.stdout).toContain("--google-client-secret=***");
        if (PG_SERVER) expect(r.stdout).toContain(":***@127.0.0.1");
      }
    } finally {
      proc.kill("SIGKILL");
      await proc.exited;
      if (pgUrl) await dropDatabase(pgUrl.toString());
    }
  });

  test("redactCommand: a secret flag's value (spaced or =), a database URL's password, any URL's password", () => {
    expect(
      redactCommand([
        "runcell", "serve",
        "--database", "postgres://runcell:PGPASSWORD_LEAK@127.0.0.1:5432/runcell",
        "--github-client-secret", "GH", "--google-client-secret=GO",
        "--database=postgresql://u:P%40SS@db/x",
        "migrate", "--to", "postgres://u:TO_PASS@h/db",
        "--github-client-id", "not-secret",
      ]),
    ).toEqual([
      "runcell", "serve",
      "--database", "postgres://runcell:***@127.0.0.1:5432/runcell",
      "--github-client-secret", "***", "--google-client-secret=***",
      "--database=postgresql://u:***@db/x",
      "migrate", "--to", "postgres://u:***@h/db",
      "--github-client-id", "not-secret",
    ]);
  });
});

test("usage errors exit 2", async () => {
  expect((await doctor(["--nope"])).code).toBe(2);
  expect((await doctor(["extra"])).code).toBe(2);
});

describe("key and password files the server's user cannot read", () => {
  test.skipIf(process.getuid?.() !== 0)("a file behind a directory that user cannot enter is said to be unreadable, never to be made anew", async () => {
    const NOBODY = 65534;
    const d = await goodDataDir();
    Bun.spawnSync(["chown", "-R", `${NOBODY}:${NOBODY}`, d]);
    // /etc/runcell as an install before 0750 left it: root's, 0700.
    const etc = dir("runcell-etc-");
    chmodSync(etc, 0o700);
    const key = join(etc, "vault.key");
    const pw = join(etc, "admin.pw");
    writeFileSync(key, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
    writeFileSync(pw, "the operator's password\n", { mode: 0o600 });
    chownSync(key, NOBODY, NOBODY);
    chownSync(pw, NOBODY, NOBODY);
    const r = parse(await runCli(["doctor", "--data-dir", d, "--vault-key-file", key, "--admin-password-file", pw], { uid: NOBODY, env: { HOME: d } }));
    for (const [check, path] of [["vault key", key], ["admin password", pw]] as const) {
      expectStatus(r, check, "FAIL", `${path}${check === "vault key" ? " (--vault-key-file)" : ""} cannot be read by uid ${NOBODY} (permission denied)`);
      expect(r.get(check)!.fix).toContain(`let the user runcell runs as read ${path}`);
      expect(r.get(check)!.fix).toContain("do not write a new file in its place");
      expect(`${r.get(check)!.message} ${r.get(check)!.fix}`).not.toMatch(/does not exist|urandom|create the file/);
    }
    // The directory entered, the files themselves root's 0600: the same, from the read.
    chmodSync(etc, 0o755);
    chownSync(key, 0, 0);
    chownSync(pw, 0, 0);
    const files = parse(await runCli(["doctor", "--data-dir", d, "--vault-key-file", key, "--admin-password-file", pw], { uid: NOBODY, env: { HOME: d } }));
    for (const check of ["vault key", "admin password"]) {
      expectStatus(files, check, "FAIL", `cannot be read by uid ${NOBODY} (permission denied)`);
      expect(`${files.get(check)!.message} ${files.get(check)!.fix}`).not.toMatch(/does not exist|urandom|create the file/);
    }
    // And serve says so too, exit 2, without the hint that would overwrite the key.
    chmodSync(etc, 0o700);
    chownSync(key, NOBODY, NOBODY);
    const serve = await runCli(["serve", "--data-dir", d, "--vault-key-file", key, "--http", "127.0.0.1:0"], { uid: NOBODY, env: { HOME: d } });
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain(`the vault key file ${key} cannot be read by uid ${NOBODY} (permission denied)`);
    expect(serve.stderr).not.toMatch(/does not exist|urandom/);
    const pwServe = await runCli(["serve", "--data-dir", d, "--admin-password-file", pw, "--http", "127.0.0.1:0"], { uid: NOBODY, env: { HOME: d } });
    expect(pwServe.code).toBe(2);
    expect(pwServe.stderr).toContain(`admin password from --admin-password-file ${pw}: the file cannot be read by uid ${NOBODY} (permission denied)`);
    const missing = await runCli(["doctor", "--data-dir", d, "--vault-key-file", join(d, "nope.key")], { uid: NOBODY, env: { HOME: d } });
    expectStatus(parse(missing), "vault key", "FAIL", "does not exist");
  });
});

test("a database URL the driver refuses (sslmode=bogus) past the CLI's check: the database check fails with the reason, password masked", async () => {
  const config = resolveConfig(new Map<string, unknown>([["data-dir", dir()], ["database", "postgres://u:pw-never-shown@127.0.0.1:1/db"]]), {});
  config.databaseUrl = "postgres://u:pw-never-shown@127.0.0.1:1/db?sslmode=bogus";
  const results = await runChecks(config, { checks: CHECKS.filter((c) => c.name === "database"), env: {} });
  expect(results).toHaveLength(1);
  expect(results[0]).toMatchObject({ check: "database", status: "FAIL" });
  expect(results[0]!.message).toContain("sslmode");
  expect(JSON.stringify(results)).not.toContain("pw-never-shown");
});
