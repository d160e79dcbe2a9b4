import { runChecks } from "../admin/doctor.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { type Command, failUsage } from "./command.ts";

export const doctorCommand: Command = {
  name: "doctor",
  summary: "Check the installation: data dir, database, Docker, workspace image, public URL, admin password.",
  usage: "runcell doctor [flags]",
  examples: ["runcell doctor", "runcell doctor --data-dir /var/lib/runcell --docker-host unix:///run/docker.sock"],
  configFlags: true,
  async run(argv) {
    let config;
    try {
      config = resolveConfig(parseArgs(argv).flags);
    } catch (e) {
      return failUsage("doctor", e);
    }
    const results = await runChecks(config);
    for (const r of results) {
      console.log(`${r.ok ? "OK  " : "FAIL"} ${r.name}: ${r.detail}${r.ok || !r.fix ? "" : `\n     fix: ${r.fix}`}`);
    }
    return results.every((r) => r.ok) ? 0 : 1;
  },
};
