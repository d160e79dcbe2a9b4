/** Shared helpers for the benchmarks: processes, RSS, stats and the ratio line format. */
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "..", "..");

export async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

/** Resident set size of a process in KiB (Linux /proc). */
export function rssKiB(pid: number): number {
  const status = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string;
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
}

/** utime + stime of a process, in clock ticks (USER_HZ: 100 a second on Linux). */
export function cpuTicks(pid: number): number {
  const stat = require("node:fs").readFileSync(`/proc/${pid}/stat`, "utf8") as string;
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]);
}

/**
 * A thread's scheduler figures (Linux schedstat), in ms: time on a CPU, and time runnable but
 * waiting for one (the machine's other work, or steal time on a VM, holding it back).
 */
export function schedMs(pid: number, thread = pid): { cpu: number; waiting: number } {
  const [cpu, waiting] = (require("node:fs").readFileSync(`/proc/${pid}/task/${thread}/schedstat`, "utf8") as string).split(" ").map(Number);
  return { cpu: cpu! / 1e6, waiting: waiting! / 1e6 };
}

/** Resolves once something accepts TCP connections on 127.0.0.1:port. */
export async function waitListening(port: number, timeoutMs = 20_000): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    try {
      const s = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      s.end();
      return;
    } catch {
      if (performance.now() - t0 > timeoutMs) throw new Error(`nothing listens on port ${port}`);
      await Bun.sleep(10);
    }
  }
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** One result line: the figure, the baseline, their ratio and the goal. */
export function report(name: string, value: number, baseline: number, unit: string, goal: string, better: "lower" | "higher") {
  const ratio = value / baseline;
  const ok = goal.startsWith("≤") ? ratio <= Number(goal.slice(1).replace("×", "")) : ratio >= Number(goal.slice(1).replace("×", ""));
  const fmt = (n: number) => (n >= 100 ? Math.round(n).toLocaleString("en") : n.toFixed(n >= 10 ? 1 : 3));
  console.log(`${name.padEnd(44)} ${fmt(value).padStart(10)} ${unit.padEnd(8)} baseline ${fmt(baseline).padStart(10)} ${unit.padEnd(8)} ratio ${ratio.toFixed(2)}× (goal ${goal}, ${better} is better) ${ok ? "MET" : "NOT MET"}`);
  return ratio;
}

export async function waitHttp(url: string, timeoutMs = 20_000): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.status === 200) return performance.now() - t0;
    } catch {
      // not listening yet
    }
    if (performance.now() - t0 > timeoutMs) throw new Error(`${url} did not answer`);
    await Bun.sleep(1);
  }
}

export function buildBinary(): string {
  const out = join(ROOT, "dist/runcell");
  const r = Bun.spawnSync(["bun", "run", "scripts/build.ts"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error("build failed: " + r.stderr.toString());
  return out;
}

export function compile(entry: string, outfile: string) {
  const r = Bun.spawnSync(["bun", "build", "--compile", "--bytecode", "--minify-syntax", "--minify-whitespace", entry, "--outfile", outfile], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error("compile failed: " + r.stderr.toString());
}
