import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/app.ts";

describe("runcell CLI", () => {
  test("--help lists every command with examples", async () => {
    const r = await runCli(["--help"]);
    expect(r.code).toBe(0);
    for (const c of ["serve", "migrate", "doctor", "version"]) expect(r.stdout).toContain(`  ${c}`);
    expect(r.stdout).toContain("Examples:");
  });

  test("<cmd> --help shows usage, configuration flags and examples", async () => {
    const r = await runCli(["serve", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage:\n  runcell serve");
    expect(r.stdout).toContain("--data-dir");
    expect(r.stdout).toContain("[RUNCELL_SIGNUP]");
    expect(r.stdout).toContain("Examples:");
    // The pre-migration backup and the one transaction are SQLite's; PostgreSQL's exception is said beside them.
    expect(r.stdout).toContain("With --database postgres://… there is no automatic\n  backup (take a pg_dump first) and each migration runs in its own transaction");
    const h = await runCli(["help", "migrate"]);
    expect(h.stdout).toContain("runcell migrate");
  });

  test("help texts show only setups the README stands behind", async () => {
    for (const cmd of ["serve", "service", "migrate"]) {
      const h = await runCli([cmd, "--help"]);
      expect(h.code).toBe(0);
      // --trust-proxy believes whoever connects: never next to a listener on every address.
      for (const line of h.stdout.split("\n").filter((l) => l.includes("0.0.0.0"))) expect(line, `${cmd}: ${line}`).not.toContain("--trust-proxy");
      expect(h.stdout, cmd).not.toContain("--http 0.0.0.0");
      expect(h.stdout, cmd).not.toMatch(/Preview|does not run on\s+PostgreSQL/);
    }
  });

  test("version prints version, commit and Bun version", async () => {
    const r = await runCli(["version", "--json"]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    expect(v).toMatchObject({ version: expect.stringMatching(/^\d+\.\d+\.\d+/), commit: expect.any(String), bun: Bun.version });
  });

  test.each([
    [["serve", "--bogus"], /unknown flag --bogus/],
    [["serve", "--http", "localhost"], /--http: expected host:port/],
    [["serve", "--signup", "sometimes"], /--signup: expected one of closed, open/],
    [["frobnicate"], /unknown command "frobnicate"/],
  ])("bad usage %p exits 2 naming the problem", async (args, message) => {
    const r = await runCli(args as string[], { env: { RUNCELL_DATA_DIR: tempDir() } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  test("a bad RUNCELL_* value exits 2 naming the variable", async () => {
    const r = await runCli(["serve"], { env: { RUNCELL_DATA_DIR: tempDir(), RUNCELL_RATE_LIMIT_BURST: "-3" } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("RUNCELL_RATE_LIMIT_BURST");
  });

  test("migrate creates and migrates the database, then reports it up to date", async () => {
    const dir = tempDir();
    const first = await runCli(["migrate", "--data-dir", dir]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("applied");
    const again = await runCli(["migrate", "--data-dir", dir]);
    expect(again.stdout).toContain("up to date");
    const status = await runCli(["migrate", "--status", "--data-dir", dir]);
    expect(status.stdout).toContain("pending: none");
  });

  test("migrate --status is read-only: a data dir without a database stays without one; one that cannot be read is named, exit 1", async () => {
    const dir = join(tempDir(), "not-yet");
    const none = await runCli(["migrate", "--status", "--data-dir", dir]);
    expect(none.code).toBe(0);
    expect(none.stdout).toContain("applied: none (no database yet at");
    expect(none.stdout).toMatch(/pending: 0000_init, /);
    expect(existsSync(dir)).toBe(false);

    const damaged = tempDir();
    writeFileSync(join(damaged, "runcell.db"), Buffer.alloc(8192, 7));
    const bad = await runCli(["migrate", "--status", "--data-dir", damaged]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("runcell migrate: cannot read the database");
    expect(bad.stderr).not.toContain("    at ");
  });

  // admin, token, audit, migrate and backup work on the database: they take the flags that locate it, not serve's.
  test.each(["admin set-password", "admin create-user", "token create", "audit", "migrate", "backup"])("runcell %s: --help lists only --data-dir, --database and --vault-key-file; a serve flag is a usage error", async (cmd) => {
    const words = cmd.split(" ");
    const help = await runCli([words[0]!, "--help"]);
    expect(help.code).toBe(0);
    for (const f of ["--data-dir", "--database", "--vault-key-file"]) expect(help.stdout).toContain(`  ${f} `);
    for (const f of ["--webhook-timeout", "--http", "--signup", "--docker-host", "--log-level"]) expect(help.stdout).not.toContain(f);

    const dir = tempDir();
    for (const serveFlag of [["--webhook-timeout", "11m"], ["--webhook-timeout", "5s"], ["--trust-proxy"], ["--no-trust-proxy"], ["--http=0.0.0.0:1"]]) {
      const r = await runCli([...words, ...serveFlag, "--data-dir", dir], { stdin: "" });
      expect(r.code).toBe(2);
      const flag = serveFlag[0]!.replace(/=.*/, "").replace("--no-", "--");
      expect(r.stderr).toBe(`runcell ${words.join(" ")}: ${flag} is a serve flag; \`runcell ${words.join(" ")}\` takes --data-dir, --database and --vault-key-file of the configuration (see --help)\n`);
    }
    expect(existsSync(join(dir, "runcell.db"))).toBe(false);
  });

  test("admin, token, audit, migrate and backup ignore serve's settings in the environment and runcell.toml they share with serve, even broken ones", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "runcell.toml"), 'webhook_timeout = "soon"\nsignup = "maybe"\ngithub_client_id = "only-the-id"\n');
    const env = { RUNCELL_DATA_DIR: dir, RUNCELL_TRUST_PROXY: "sometimes", RUNCELL_HTTP: "garbage", RUNCELL_DOCKER_HOST: "ftp://nowhere" };
    const migrated = await runCli(["migrate"], { env });
    expect(migrated.stderr).toBe("");
    expect(migrated.code).toBe(0);
    const created = await runCli(["admin", "create-user", "--email", "ops@example.com", "--password-stdin"], { env, stdin: "a long passphrase" });
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const token = await runCli(["token", "create", "--email", "ops@example.com", "--name", "ci"], { env });
    expect(token.code).toBe(0);
    const audit = await runCli(["audit", "--limit", "1"], { env });
    expect(audit.code).toBe(0);
    expect(audit.stdout).toContain("token.created");
    const backup = await runCli(["backup", join(tempDir(), "b.tar.gz")], { env });
    expect(backup.code).toBe(0);
    // image build reads only the Docker host: it gets as far as the (missing) engine.
    const image = await runCli(["image", "build"], { env: { ...env, RUNCELL_DOCKER_HOST: "unix:///nonexistent.sock" } });
    expect(image.stderr).toContain("cannot reach the Docker engine");
    // serve and doctor, which use them, stay strict.
    for (const cmd of ["serve", "doctor"]) {
      const r = await runCli([cmd], { env });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^runcell ${cmd}: RUNCELL_HTTP: expected host:port`));
    }
  });

  test("a broken value these commands use still fails clearly (the database URL, the data dir's runcell.toml)", async () => {
    const dir = tempDir();
    for (const cmd of [["audit"], ["migrate"], ["token", "create", "--email", "x@example.com", "--name", "ci"]]) {
      const r = await runCli(cmd, { env: { RUNCELL_DATA_DIR: dir, RUNCELL_DATABASE_URL: "mysql://db/x" } });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`runcell ${cmd.slice(0, cmd[0] === "token" ? 2 : 1).join(" ")}: RUNCELL_DATABASE_URL: expected postgres://`);
    }
    // A URL the driver rejects (an option it does not know the value of): the same usage error, exit 2, one line, no password.
    const bogus = "postgres://u:pw-never-shown@127.0.0.1:1/db?sslmode=bogus";
    for (const cmd of [["doctor"], ["serve"], ["audit"], ["admin", "set-password", "--stdin"]]) {
      const r = await runCli([...cmd, "--database", bogus, "--data-dir", dir], { stdin: "a long admin passphrase\n" });
      expect([r.code, r.stdout]).toEqual([2, ""]);
      expect(r.stderr).toStartWith(`runcell ${cmd.slice(0, cmd[0] === "admin" ? 2 : 1).join(" ")}: --database: `);
      expect(r.stderr).toContain("sslmode");
      expect(r.stderr.trim().split("\n").length).toBe(1);
      expect(r.stderr).not.toContain("pw-never-shown");
    }
    writeFileSync(join(dir, "runcell.toml"), "database = 5\n");
    const file = await runCli(["audit"], { env: { RUNCELL_DATA_DIR: dir } });
    expect([file.code, file.stderr]).toEqual([2, `runcell audit: ${join(dir, "runcell.toml")}: database: expected postgres://user:password@host:5432/database, got (not a URL)\n`]);
    writeFileSync(join(dir, "runcell.toml"), "signup = \n");
    const unparsable = await runCli(["audit"], { env: { RUNCELL_DATA_DIR: dir } });
    expect(unparsable.code).toBe(2);
    expect(unparsable.stderr).toContain("cannot parse");
    expect(existsSync(join(dir, "runcell.db"))).toBe(false);
  });

  test("doctor prints one OK/FAIL line per check, with the fix", async () => {
    const dir = tempDir();
    const r = await runCli(["doctor", "--data-dir", dir, "--docker-host", "unix:///nonexistent.sock", "--public-url", "http://agents.example.com"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^OK {3}data dir: /m);
    expect(r.stdout).toMatch(/^FAIL docker: cannot reach unix:\/\/\/nonexistent.sock/m);
    expect(r.stdout).toMatch(/^FAIL public url: .*plain http/m);
    expect(r.stdout).toContain("fix: ");
  });
});
