/**
 * Issue 2 benchmark: the compiled binary against a compiled hello-world Bun.serve, same run.
 * - cold start on a fresh data dir (migrations included) to the first 200 from /healthz (goal ≤ 3×)
 * - idle RSS (goal ≤ 2×), binary sizes printed
 * - GET /healthz requests/s, same load generator in its own process (goal ≥ 0.8×)
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBinary, compile, freePort, median, report, ROOT, rssKiB, waitHttp } from "./lib/util.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const LOAD_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

const runcell = buildBinary();
const hello = join(tmpdir(), "runcell-bench-hello");
compile("bench/fixtures/hello.ts", hello);

interface Started {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
  coldMs: number;
  cleanup(): Promise<void>;
}

async function start(kind: "runcell" | "hello"): Promise<Started> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "runcell-bench-"));
  const t0 = performance.now();
  const proc =
    kind === "runcell"
      ? Bun.spawn([runcell, "serve", "--http", `127.0.0.1:${port}`, "--data-dir", join(dir, "data"), "--log-level", "error"], { cwd: dir, stdout: "ignore", stderr: "ignore" })
      : Bun.spawn([hello], { env: { PORT: String(port) }, stdout: "ignore", stderr: "ignore" });
  const url = `http://127.0.0.1:${port}/healthz`;
  await waitHttp(url);
  const coldMs = performance.now() - t0;
  return {
    proc,
    url,
    coldMs,
    async cleanup() {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function load(url: string): Promise<{ rps: number; p50_ms: number; p99_ms: number; errors: number }> {
  const p = Bun.spawn(["bun", join(ROOT, "bench/lib/load.ts"), url, "32", String(LOAD_SECONDS)], { stdout: "pipe", stderr: "inherit" });
  const out = await new Response(p.stdout).text();
  await p.exited;
  return JSON.parse(out.trim().split("\n").pop()!);
}

console.log(`# foundation benchmark (${RUNS} cold starts each, ${LOAD_SECONDS}s load) — ${new Date().toISOString()}`);
const cold: Record<string, number[]> = { runcell: [], hello: [] };
for (let i = 0; i < RUNS; i++) {
  for (const kind of ["hello", "runcell"] as const) {
    const s = await start(kind);
    cold[kind]!.push(s.coldMs);
    await s.cleanup();
  }
}
report("cold start to first /healthz 200 (median)", median(cold.runcell!), median(cold.hello!), "ms", "≤3×", "lower");

const a = await start("runcell");
const b = await start("hello");
await Bun.sleep(1500);
report("idle RSS", rssKiB(a.proc.pid) / 1024, rssKiB(b.proc.pid) / 1024, "MiB", "≤2×", "lower");
const ours = await load(a.url);
const base = await load(b.url);
report("GET /healthz throughput", ours.rps, base.rps, "req/s", "≥0.8×", "higher");
console.log(`  latency p50/p99: runcell ${ours.p50_ms}/${ours.p99_ms} ms, hello ${base.p50_ms}/${base.p99_ms} ms; errors ${ours.errors}/${base.errors}`);
console.log(`  binary size: runcell ${(statSync(runcell).size / 1e6).toFixed(1)} MB, hello ${(statSync(hello).size / 1e6).toFixed(1)} MB`);
await a.cleanup();
await b.cleanup();
