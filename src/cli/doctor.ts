import { CHECKS, type CheckResult, runChecks } from "../admin/doctor.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

/** `OK   name: message`, and for WARN/FAIL an indented `fix:` line. */
export function formatResult(r: CheckResult): string {
  return `${r.status.padEnd(4)} ${r.check}: ${r.message}${r.fix && r.status !== "OK" ? `\n     fix: ${r.fix}` : ""}`;
}

export const doctorCommand: Command = {
  name: "doctor",
  summary: "Check the installation (data dir, database, Docker, clock, proxy settings…): OK, WARN or FAIL with the fix.",
  usage: "runcell doctor [--json] [flags]",
  details: `  --json   print the results as a JSON array of {check, status, message, fix}

  One line per check: OK, WARN (works, but look at it) or FAIL (broken), each WARN and FAIL with
  the fix. The checks: ${CHECKS.map((c) => c.name).join(", ").replace(/(.{60,}?), /, "$1,\n  ")}.
  Give doctor the server's flags and environment (--data-dir, --database, --public-url,
  --trust-proxy, --docker-host…; provider keys): it checks the configuration it is given. It
  changes nothing (the database is opened read-only, the lock only probed) and works next to a
  running server. With --database postgres://… (RUNCELL_DATABASE_URL) the database and schema
  checks read that PostgreSQL database (never migrating it; the URL is shown without its password).
  Exit status: 0 no FAIL (WARNs allowed), 1 at least one FAIL, 2 usage.`,
  examples: [
    "runcell doctor",
    "sudo -u runcell runcell doctor --data-dir /var/lib/runcell --public-url https://agents.example.com --trust-proxy",
    "runcell doctor --database postgres://runcell@db.internal/runcell",
    "runcell doctor --json | jq -r '.[] | select(.status != \"OK\") | \"\\(.check): \\(.fix)\"'",
  ],
  configFlags: true,
  async run(argv) {
    let config;
    let json = false;
    try {
      const args = parseArgs(argv, { json: false });
      if (args.positionals.length) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
      json = args.extra.get("json") === true;
      config = resolveConfig(args.flags);
    } catch (e) {
      return failUsage("doctor", e);
    }
    const results = await runChecks(config);
    if (json) process.stdout.write(JSON.stringify(results, null, 2) + "\n");
    else {
      const count = (s: string) => results.filter((r) => r.status === s).length;
      process.stdout.write(results.map(formatResult).join("\n") + "\n");
      process.stdout.write(`\n${results.length} checks: ${count("OK")} OK, ${count("WARN")} WARN, ${count("FAIL")} FAIL\n`);
    }
    return results.some((r) => r.status === "FAIL") ? 1 : 0;
  },
};
