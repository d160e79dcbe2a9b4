import { resolve } from "node:path";
import { ConfigError, OPTIONS, optionsHelp } from "../config.ts";

export interface Command {
  name: string;
  summary: string;
  usage: string;
  /** Extra text after the usage line (flags of the command itself). */
  details?: string;
  examples: string[];
  /** Whether the server's configuration flags (--data-dir, --http…) apply: all, or only these. */
  configFlags?: boolean | readonly string[];
  run(argv: string[]): Promise<number>;
}

export class UsageError extends Error {}

export function commandHelp(c: Command): string {
  const parts = [`${c.summary}\n\nUsage:\n  ${c.usage}`];
  if (c.details) parts.push(c.details.trimEnd());
  if (c.configFlags === true) parts.push(`Configuration (flags > RUNCELL_* env > <data-dir>/runcell.toml|json > defaults):\n${optionsHelp()}`);
  else if (c.configFlags) {
    parts.push(
      `Configuration (flags > RUNCELL_* env > <data-dir>/runcell.toml|json > defaults):\n${optionsHelp(c.configFlags)}\n` +
        "  Serve's other settings are refused as flags here; in the RUNCELL_* environment and the\n  runcell.toml|json this command shares with serve they may stay and are not read (serve checks them).",
    );
  }
  parts.push(`Examples:\n${c.examples.map((e) => "  " + e).join("\n")}`);
  return parts.join("\n\n") + "\n";
}

/** Prints `runcell <cmd>: <message>` and returns the exit code for usage/config errors (2). */
export function failUsage(cmd: string, e: unknown): number {
  if (e instanceof ConfigError || e instanceof UsageError) {
    process.stderr.write(`runcell ${cmd}: ${e.message}\n`);
    return 2;
  }
  throw e;
}

export const wantsHelp = (argv: string[]) => argv.includes("--help") || argv.includes("-h");

/** Reads all of stdin (for --stdin / --password-stdin), without the trailing newline. */
export async function readStdin(): Promise<string> {
  return (await new Response(Bun.stdin.stream()).text()).replace(/\r?\n$/, "");
}

/** The data dir of a command that does not load the whole config: --data-dir, else $RUNCELL_DATA_DIR, else the default. */
export function dataDirFrom(flag: string | boolean | undefined): string {
  if (typeof flag === "string") return resolve(flag);
  return resolve(process.env.RUNCELL_DATA_DIR || String(OPTIONS.find((o) => o.flag === "data-dir")!.default));
}
