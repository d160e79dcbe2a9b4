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
