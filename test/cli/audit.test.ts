/**
 * `runcell audit`, run as real subprocesses on a real data dir: the operator's CLI actions
 * (admin create-user, admin set-password, token create) are audited (actor admin, via cli, no
 * address), and `runcell audit` prints them newest first — one line per row (time, actor, user,
 * action, target, ip) or JSON lines — with --user-id, --action and --limit, and never a password
 * or token; bad usage exits 2.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";

const USER_PASSWORD = "carol's long passphrase";
const ADMIN_PASSWORD = "the operator's admin password";
let dir: string;
let userId: string;
let tokenId: string;
let token: string;

beforeAll(async () => {
  dir = tempDir();
  const made = await runCli(["admin", "create-user", "--email", "carol@example.com", "--password-stdin", "--data-dir", dir], { stdin: USER_PASSWORD });
  expect(made.code).toBe(0);
  userId = /created user (usr_\w+)/.exec(made.stdout)![1]!;
  expect((await runCli(["admin", "set-password", "--stdin", "--data-dir", dir], { stdin: ADMIN_PASSWORD })).code).toBe(0);
  const tok = await runCli(["token", "create", "--email", "carol@example.com", "--name", "ci", "--data-dir", dir]);
  expect(tok.code).toBe(0);
  token = tok.stdout.trim();
  tokenId = /API token (tok_\w+)/.exec(tok.stderr)![1]!;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const lines = (s: string) => s.split("\n").filter(Boolean);

describe("runcell audit", () => {
  test("one line per row, newest first: time, actor, user, action, target, ip ('-' for none)", async () => {
    const r = await runCli(["audit", "--data-dir", dir]);
    expect(r.code).toBe(0);
    const rows = lines(r.stdout).map((l) => l.split(/\s+/));
    expect(rows).toEqual([
      [expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/), "admin", userId, "token.created", tokenId, "-"],
      [expect.any(String), "admin", "-", "admin.password_changed", "-", "-"],
      [expect.any(String), "admin", userId, "user.created", userId, "-"],
    ]);
    expect(r.stdout).not.toContain(USER_PASSWORD);
    expect(r.stdout).not.toContain(ADMIN_PASSWORD);
    expect(r.stdout).not.toContain(token);
  });

  test("--json: one record per line, with details (via cli), never a password or token", async () => {
    const r = await runCli(["audit", "--json", "--data-dir", dir]);
    expect(r.code).toBe(0);
    const records = lines(r.stdout).map((l) => JSON.parse(l));
    expect(records.map((e) => e.action)).toEqual(["token.created", "admin.password_changed", "user.created"]);
    expect(records[0]).toEqual({ id: expect.stringMatching(/^aud_/), at: expect.any(String), actor: "admin", user_id: userId, action: "token.created", target_id: tokenId, ip: null, details: { name: "ci", via: "cli" } });
    expect(records[1].details).toEqual({ via: "cli" });
    expect(records[2].details).toEqual({ email: "carol@example.com", role: "admin", via: "cli" });
    for (const secret of [USER_PASSWORD, ADMIN_PASSWORD, token]) expect(r.stdout).not.toContain(secret);
  });

  test("--action, --user-id and --limit filter and cap", async () => {
    const byAction = await runCli(["audit", "--action", "user.created", "--json", "--data-dir", dir]);
    expect(lines(byAction.stdout).map((l) => JSON.parse(l).action)).toEqual(["user.created"]);
    const byUser = await runCli(["audit", "--user-id", userId, "--json", "--data-dir", dir]);
    expect(lines(byUser.stdout).map((l) => JSON.parse(l).action)).toEqual(["token.created", "user.created"]);
    const one = await runCli(["audit", "--limit", "1", "--data-dir", dir]);
    expect(lines(one.stdout)).toHaveLength(1);
    expect(one.stdout).toContain("token.created");
  });

  test("no matching row: nothing on stdout, a note on stderr, exit 0", async () => {
    const r = await runCli(["audit", "--action", "secret.deleted", "--data-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("no audit log rows match");
  });

  test.each([
    [["--limit", "0"], /--limit: expected an integer/],
    [["--limit", "lots"], /--limit: expected an integer/],
    [["--action", "bogus"], /--action: expected one of auth\.sign_in, .*playbook\.trigger_rotated, got "bogus"/],
    [["--bogus"], /unknown flag --bogus/],
    [["extra"], /unexpected argument "extra"/],
  ])("%p → exit 2 naming the problem", async (args, message) => {
    const r = await runCli(["audit", ...(args as string[]), "--data-dir", dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message as RegExp);
  });

  test("--help shows the flags and examples; the main help lists the command", async () => {
    const h = await runCli(["audit", "--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("runcell audit [--user-id U] [--action A] [--limit N] [--json]");
    expect(h.stdout).toContain("Examples:");
    expect((await runCli(["--help"])).stdout).toContain("  audit ");
  });
});
