/**
 * Issue 15 benchmark, the request pipeline: the compiled binary against a compiled raw
 * `Bun.serve` that returns the same JSON bodies (bench/fixtures/raw-json.ts), same run.
 * - GET /healthz req/s (goal ≥ 0.8×)
 * - GET /v1/profiles req/s with an API token, for a user with 3 profiles (goal ≥ 0.6×); the raw
 *   server answers the very body runcell sent
 * Load: `wrk -t1 -c32 -d4s` (BENCH_SECONDS changes the duration), runcell and raw alternating
 * A B A B … after a warm-up, the median of ROUNDS (5) each. Without wrk, bench/lib/load.ts (Bun's fetch,
 * a slower client: the ratios come out closer to 1) — the output says which one ran.
 * Besides req/s, each run's server CPU time per request is read from /proc/<pid>/stat (utime +
 * stime over the requests wrk completed): this VM's steal time swings raw req/s by 10× within a
 * minute, while CPU time per request barely moves — the printed "CPU-equivalent" ratio (raw's
 * CPU per request over ours) is the steadier figure of the same thing.
 * - idle RSS and binary size against the compiled hello-world (bench/fixtures/hello.ts), printed.
 * Run: bun bench/pipeline.ts
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compile, cpuTicks, freePort, median, report, ROOT, rssKiB, waitHttp } from "./lib/util.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = 5;
const CONNECTIONS = 32;
const wrk = Bun.which("wrk");

// The binary is built to a private path: dist/runcell may be in use by tests running meanwhile.
const runcell = join(tmpdir(), "runcell-bench-pipeline");
const build = Bun.spawnSync(["bun", "run", "scripts/build.ts", runcell], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
if (build.exitCode !== 0) throw new Error("build failed: " + build.stderr.toString() + build.stdout.toString());
const raw = join(tmpdir(), "runcell-bench-raw-json");
compile("bench/fixtures/raw-json.ts", raw);
const hello = join(tmpdir(), "runcell-bench-hello");
compile("bench/fixtures/hello.ts", hello);

const dir = mkdtempSync(join(tmpdir(), "runcell-bench-pipeline-"));
const dataDir = join(dir, "data");
const common = ["--data-dir", dataDir];

function run(args: string[], stdin?: string): string {
  const r = Bun.spawnSync([runcell, ...args, ...common], { cwd: dir, stdin: stdin === undefined ? "ignore" : Buffer.from(stdin), stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`runcell ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString().trim();
}

// A user with an API token (made by the CLI before the server holds the data dir) and 3 profiles.
run(["admin", "create-user", "--email", "bench@example.com", "--role", "user", "--password-stdin"], "bench password 1");
const token = run(["token", "create", "--email", "bench@example.com", "--name", "bench"]);
const auth = { authorization: `Bearer ${token}` };

const port = await freePort();
const server = Bun.spawn(
  [runcell, "serve", "--http", `127.0.0.1:${port}`, ...common, "--log-level", "error", "--rate-limit-per-minute", "1000000000", "--rate-limit-burst", "1000000000"],
  { cwd: dir, stdout: "ignore", stderr: "inherit" },
);
const base = `http://127.0.0.1:${port}`;
await waitHttp(`${base}/healthz`);
for (const name of ["reviewer", "writer", "tester"]) {
  const r = await fetch(`${base}/v1/profiles`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ name }) });
  if (r.status !== 201) throw new Error(`POST /v1/profiles: ${r.status} ${await r.text()}`);
}
const healthzBody = await (await fetch(`${base}/healthz`)).text();
const profilesRes = await fetch(`${base}/v1/profiles`, { headers: auth });
const profilesBody = await profilesRes.text();
if (profilesRes.status !== 200) throw new Error(`GET /v1/profiles: ${profilesRes.status} ${profilesBody}`);

const rawPort = await freePort();
const rawProc = Bun.spawn([raw], { env: { PORT: String(rawPort), HEALTHZ_BODY: healthzBody, PROFILES_BODY: profilesBody }, stdout: "ignore", stderr: "inherit" });
const rawBase = `http://127.0.0.1:${rawPort}`;
await waitHttp(`${rawBase}/healthz`);

interface Load {
  rps: number;
  non2xx: number;
  /** The server's CPU time per completed request, µs (NaN without wrk). */
  cpuUs: number;
}

async function load(url: string, headers: Record<string, string>, pid: number, seconds = SECONDS): Promise<Load> {
  if (wrk) {
    const h = Object.entries(headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]);
    const before = cpuTicks(pid);
    const p = Bun.spawn([wrk, "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, ...h, url], { stdout: "pipe", stderr: "pipe" });
    const out = await new Response(p.stdout).text();
    await p.exited;
    const ticks = cpuTicks(pid) - before;
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
    const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
    if (!Number.isFinite(rps)) throw new Error(`wrk: ${out}`);
    return { rps, non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0), cpuUs: (ticks * 10_000) / requests };
  }
  const p = Bun.spawn(["bun", join(ROOT, "bench/lib/load.ts"), url, String(CONNECTIONS), String(seconds)], { env: { ...process.env, LOAD_HEADERS: JSON.stringify(headers) }, stdout: "pipe", stderr: "inherit" });
  const out = await new Response(p.stdout).text();
  await p.exited;
  const r = JSON.parse(out.trim().split("\n").pop()!) as { rps: number; errors: number };
  return { rps: r.rps, non2xx: r.errors, cpuUs: Number.NaN };
}

console.log(`# pipeline benchmark — ${wrk ? `wrk -t1 -c${CONNECTIONS} -d${SECONDS}s` : `wrk not found: bench/lib/load.ts (Bun fetch, ${CONNECTIONS} connections, ${SECONDS}s; install wrk for the issue's figures)`}, A B alternating, median of ${ROUNDS} — bun ${Bun.version}, ${new Date().toISOString()}`);
const cases = [
  { name: "GET /healthz", path: "/healthz", headers: {}, goal: "≥0.8×" },
  { name: "GET /v1/profiles (API token, 3 profiles)", path: "/v1/profiles", headers: auth, goal: "≥0.6×" },
];
try {
  for (const c of cases) {
    await load(base + c.path, c.headers, server.pid, 1);
    await load(rawBase + c.path, c.headers, rawProc.pid, 1);
    const ours: Load[] = [];
    const theirs: Load[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      ours.push(await load(base + c.path, c.headers, server.pid));
      theirs.push(await load(rawBase + c.path, c.headers, rawProc.pid));
    }
    const refused = [...ours, ...theirs].reduce((n, l) => n + l.non2xx, 0);
    report(c.name, median(ours.map((l) => l.rps)), median(theirs.map((l) => l.rps)), "req/s", c.goal, "higher");
    console.log(`  runs: runcell ${ours.map((l) => Math.round(l.rps)).join(", ")}; raw ${theirs.map((l) => Math.round(l.rps)).join(", ")}${refused ? `; ${refused} non-2xx answers` : ""}`);
    if (wrk) {
      const us = median(ours.map((l) => l.cpuUs));
      const rawUs = median(theirs.map((l) => l.cpuUs));
      console.log(`  server CPU per request: runcell ${us.toFixed(1)} µs, raw ${rawUs.toFixed(1)} µs — CPU-equivalent ratio ${(rawUs / us).toFixed(2)}× (the same goal, steadier on this VM)`);
    }
  }

  // Idle RSS and size against the compiled hello-world: a fresh runcell (no load behind it).
  const idleDir = join(dir, "idle");
  const idlePort = await freePort();
  const idle = Bun.spawn([runcell, "serve", "--http", `127.0.0.1:${idlePort}`, "--data-dir", idleDir, "--log-level", "error"], { cwd: dir, stdout: "ignore", stderr: "ignore" });
  const helloPort = await freePort();
  const helloProc = Bun.spawn([hello], { env: { PORT: String(helloPort) }, stdout: "ignore", stderr: "ignore" });
  await waitHttp(`http://127.0.0.1:${idlePort}/healthz`);
  await waitHttp(`http://127.0.0.1:${helloPort}/`);
  await Bun.sleep(1500);
  const line = (name: string, ours: number, theirs: number, unit: string) =>
    console.log(`${name.padEnd(44)} ${ours.toFixed(1).padStart(10)} ${unit.padEnd(8)} hello-world ${theirs.toFixed(1).padStart(7)} ${unit.padEnd(4)} ratio ${(ours / theirs).toFixed(2)}× (printed, no goal)`);
  line("idle RSS", rssKiB(idle.pid) / 1024, rssKiB(helloProc.pid) / 1024, "MiB");
  line("binary size", statSync(runcell).size / 1e6, statSync(hello).size / 1e6, "MB");
  for (const p of [idle, helloProc]) {
    p.kill("SIGTERM");
    await p.exited;
  }
} finally {
  for (const p of [server, rawProc]) {
    p.kill("SIGTERM");
    await p.exited;
  }
  rmSync(dir, { recursive: true, force: true });
}
