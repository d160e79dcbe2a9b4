/**
 * Runs every benchmark in turn (`bun run bench`), or the ones named: `bun bench/run.ts stream relay`.
 * Benchmarks print ratios against baselines measured in the same run; they never fail on timing.
 */
import { join } from "node:path";

const ALL = ["foundation", "pipeline", "auth", "vault", "providers", "events", "relay", "workspaces", "scale", "stream", "notifications", "playbooks", "soak", "memory", "dashboard", "mcp", "git"];
const chosen = process.argv.slice(2).length ? process.argv.slice(2) : ALL;
for (const name of chosen) {
  if (!ALL.includes(name)) {
    console.error(`unknown benchmark "${name}" (one of ${ALL.join(", ")})`);
    process.exit(2);
  }
  console.log(`\n=== bench/${name}.ts`);
  const p = Bun.spawn(["bun", join(import.meta.dir, `${name}.ts`)], { stdout: "inherit", stderr: "inherit" });
  const code = await p.exited;
  if (code !== 0) console.log(`(bench/${name}.ts exited with ${code})`);
}
