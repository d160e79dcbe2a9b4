#!/usr/bin/env bun
/**
 * runcell's command line: serve · migrate · doctor · version · admin · token · audit · image · backup · restore · service.
 * Exit codes: 0 success, 1 failure at run time, 2 bad usage or configuration.
 */
import { type Command, commandHelp, wantsHelp } from "./cli/command.ts";
import { adminCommand } from "./cli/admin.ts";
import { auditCommand } from "./cli/audit.ts";
import { doctorCommand } from "./cli/doctor.ts";
import { imageCommand } from "./cli/image.ts";
import { migrateCommand } from "./cli/migrate.ts";
import { backupCommand } from "./cli/backup.ts";
import { restoreCommand } from "./cli/restore.ts";
import { serveCommand } from "./cli/serve.ts";
import { serviceCommand } from "./cli/service.ts";
import { tokenCommand } from "./cli/token.ts";
import { versionCommand } from "./cli/version.ts";
import { VERSION } from "./version.ts";

export const COMMANDS: Command[] = [serveCommand, migrateCommand, doctorCommand, versionCommand, adminCommand, tokenCommand, auditCommand, imageCommand, backupCommand, restoreCommand, serviceCommand];

function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `runcell ${VERSION} — a self-hosted platform that runs AI agents in Docker workspaces.

Usage:
  runcell <command> [flags]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n")}

Run "runcell <command> --help" for a command's flags and examples.

Examples:
  runcell serve                       # http://127.0.0.1:7420, data in ./runcell_data
  runcell doctor                      # check Docker, the database and the configuration
  runcell admin create-user --email you@example.com --role admin --password-stdin
`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // Bare `runcell` prints the help and succeeds, as docker and kubectl do: nothing was misused.
  if (!name || name === "help" || name === "--help" || name === "-h") {
    const target = name === "help" ? COMMANDS.find((c) => c.name === rest[0]) : undefined;
    process.stdout.write(target ? commandHelp(target) : mainHelp());
    return 0;
  }
  if (name === "--version" || name === "-v") return versionCommand.run([]);
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`runcell: unknown command "${name}" (run runcell --help)\n`);
    return 2;
  }
  if (wantsHelp(rest)) {
    process.stdout.write(commandHelp(command));
    return 0;
  }
  return command.run(rest);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      console.error(`runcell: ${(e as Error)?.stack ?? e}`);
      process.exit(1);
    },
  );
}
