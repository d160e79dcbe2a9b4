import { COMMIT, VERSION } from "../version.ts";
import type { Command } from "./command.ts";

export const versionCommand: Command = {
  name: "version",
  summary: "Print the runcell version, its git commit and the Bun runtime version.",
  usage: "runcell version [--json]",
  examples: ["runcell version", "runcell version --json"],
  async run(argv) {
    const info = { version: VERSION, commit: COMMIT, bun: Bun.version };
    if (argv.includes("--json")) console.log(JSON.stringify(info));
    else console.log(`runcell ${info.version} (commit ${info.commit}, bun ${info.bun})`);
    return 0;
  },
};
