import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `runcell <args>` from source in a subprocess. */
export async function runCli(args: string[], opts: { env?: Record<string, string>; stdin?: string; cwd?: string } = {}): Promise<CliResult> {
  const proc = Bun.spawn(["bun", join(ROOT, "src/main.ts"), ...args], {
    cwd: opts.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...opts.env },
    stdin: opts.stdin !== undefined ? new TextEncoder().encode(opts.stdin) : "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}
