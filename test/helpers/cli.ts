import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `runcell <args>` from source in a subprocess; `uid`: as that user (and its same-numbered
 * group, no others), as a service user would run it — the tests run as root, whom no file refuses.
 */
export async function runCli(args: string[], opts: { env?: Record<string, string>; stdin?: string; cwd?: string; uid?: number } = {}): Promise<CliResult> {
  const as = opts.uid === undefined ? [] : ["setpriv", `--reuid=${opts.uid}`, `--regid=${opts.uid}`, "--clear-groups"];
  const proc = Bun.spawn([...as, "bun", join(ROOT, "src/main.ts"), ...args], {
    cwd: opts.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...opts.env },
    stdin: opts.stdin !== undefined ? new TextEncoder().encode(opts.stdin) : "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/**
 * An account made as an operator makes the first one before `serve`: `runcell admin create-user`
 * then `runcell token create` on the data dir (`dbArgs`: its database flags, helpers/pg.ts
 * `databaseArgs`). Answers the `rc_` token.
 */
export async function cliAccount(dataDir: string, dbArgs: string[], email: string, tokenName: string): Promise<string> {
  const made = await runCli(["admin", "create-user", "--data-dir", dataDir, ...dbArgs, "--email", email, "--role", "user", "--password-stdin"], { stdin: "correct horse battery" });
  if (made.code !== 0) throw new Error(`admin create-user failed: ${made.stdout}${made.stderr}`);
  const tok = await runCli(["token", "create", "--data-dir", dataDir, ...dbArgs, "--email", email, "--name", tokenName]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0];
  if (!token) throw new Error(`token create printed no token: ${tok.stdout}${tok.stderr}`);
  return token;
}
