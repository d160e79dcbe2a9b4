/**
 * The second Docker engine of scripts/second-dockerd.sh (its own data root and socket, a TLS
 * listener on loopback), for the tests of several hosts, of doctor and of a stuck engine.
 */
import { join } from "node:path";

const SCRIPT = join(import.meta.dir, "..", "..", "scripts", "second-dockerd.sh");

/** Where the second engine is (`second-dockerd.sh env`). */
export interface SecondDockerd {
  SOCKET: string;
  TCP: string;
  TLS_DIR: string;
  PIDFILE: string;
}

export function secondDockerdEnv(): SecondDockerd {
  const lines = Bun.spawnSync(["bash", SCRIPT, "env"]).stdout.toString().trim().split("\n");
  return Object.fromEntries(lines.map((l) => l.split("=", 2) as [string, string])) as unknown as SecondDockerd;
}

/** Starts (idempotent, the test image loaded) or stops the second engine; throws with the script's stderr. */
export function secondDockerd(cmd: "start" | "stop"): void {
  const r = Bun.spawnSync(["bash", SCRIPT, cmd], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`second-dockerd.sh ${cmd}: ${r.stderr.toString()}`);
}
