/**
 * Scale benchmark: N sessions started at once, each on its own WebSocket (`session.start` →
 * `session.ready`, timed per socket from the moment all N frames are sent), for N = 1, 10, 40
 * (BENCH_SCALE_N, e.g. "1,10,40,100"): with a warm pool of N (the profile's `warm_pool`, members
 * ready before the burst) and without one (containers created then, through the start gate),
 * against N parallel bare `docker run -d --network none <same image> sleep infinity` in the same
 * run. Removal is outside every timing. Goals (issue 15): with the pool p50 ≤ 50 ms at every N and
 * p99 ≤ 0.25× the bare runs' p99; without the pool p50/p99 ≤ 1.2× the bare runs'.
 * Run: bun bench/scale.ts   (BENCH_IMAGE, default the test image)
 */
import { rmSync } from "node:fs";
import Docker from "dockerode";
import { createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { silentLogger } from "../src/log.ts";
import { tempDir } from "../test/helpers/app.ts";
import { freePort, quantile } from "./lib/util.ts";

const SIZES = (process.env.BENCH_SCALE_N ?? "1,10,40").split(",").map(Number).filter((n) => n > 0);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const MAX = Math.max(...SIZES);

const fmt = (ms: number) => `${ms.toFixed(0).padStart(6)} ms`;
const p50 = (xs: number[]) => quantile(xs, 0.5);
const p99 = (xs: number[]) => quantile(xs, 0.99);

const dir = tempDir("runcell-bench-scale-");
const flags = [
  "--data-dir", dir,
  "--http", `127.0.0.1:${await freePort()}`,
  "--workspace-image", IMAGE,
  "--log-level", "error",
  "--rate-limit-burst", "100000",
  "--rate-limit-per-minute", "1000000",
  "--max-sockets-per-caller", String(MAX * 2 + 10),
  "--max-warm-pool", String(MAX),
  "--max-warm-pool-total", String(MAX),
];
const app = await createApp(resolveConfig(parseArgs(flags).flags, {}), { logger: silentLogger });
await app.start();
const s = app.services;
const docker = new Docker({ socketPath: "/var/run/docker.sock" });
const user = await s.users.create({ email: `bench-${Date.now()}@example.com`, name: "bench", password: "correct horse battery", role: "admin" });
const token = (await s.tokens.create(user.id, "bench")).token;
const wsUrl = `${app.url.replace(/^http/, "ws")}/v1/stream`;

async function openSockets(n: number): Promise<WebSocket[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const ws = new WebSocket(wsUrl, [`Bearer.${token}`]);
      await new Promise((r, rej) => {
        ws.addEventListener("open", r, { once: true });
        ws.addEventListener("error", rej, { once: true });
      });
      return ws;
    }),
  );
}

/** N session.start frames sent at once, one per socket; each socket's time to its session.ready. */
async function burst(profileId: string, n: number): Promise<{ ms: number[]; sessions: string[] }> {
  const sockets = await openSockets(n);
  const sessions: string[] = [];
  try {
    const t0 = performance.now();
    const waits = sockets.map(
      (ws) =>
        new Promise<number>((resolve, reject) => {
          ws.addEventListener("message", (m) => {
            const f = JSON.parse(m.data as string);
            if (f.type === "session.ready") {
              sessions.push(f.session_id);
              resolve(performance.now() - t0);
            } else if (f.type === "error") reject(new Error(`${f.code}: ${f.message}`));
          });
        }),
    );
    for (const ws of sockets) ws.send(JSON.stringify({ type: "session.start", profile_id: profileId }));
    return { ms: await Promise.all(waits), sessions };
  } finally {
    for (const ws of sockets) ws.close();
  }
}

async function cleanup(sessions: string[]) {
  for (let i = 0; i < sessions.length; i += 8) await Promise.all(sessions.slice(i, i + 8).map((id) => s.sessionLifecycle.delete(user.id, id)));
}

async function bare(n: number): Promise<number[]> {
  const t0 = performance.now();
  const runs = await Promise.all(
    Array.from({ length: n }, async () => {
      const p = Bun.spawn(["docker", "run", "-d", "--network", "none", IMAGE, "sleep", "infinity"], { stdout: "pipe", stderr: "pipe" });
      const [id, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
      const ms = performance.now() - t0;
      if (code !== 0) throw new Error(`docker run failed: ${await new Response(p.stderr).text()}`);
      return { id: id.trim(), ms };
    }),
  );
  for (let i = 0; i < runs.length; i += 8) await Promise.all(runs.slice(i, i + 8).map((r) => docker.getContainer(r.id).remove({ force: true })));
  return runs.map((r) => r.ms);
}

const limits = { max_concurrency: Math.min(1000, MAX * 2), memory_mb: 128, cpus: 0.5, pids: 128 };
const rows: { n: number; bare: number[]; cold: number[]; warm: number[] }[] = [];
try {
  // Warm-up: the image's layers and the engine's caches, one of each.
  const warmup = await s.profiles.create(user.id, { name: "warmup", model: { provider: "demo" }, image: IMAGE, limits });
  await cleanup((await burst(warmup.id, 1)).sessions);
  await bare(1);
  s.profiles.delete(user.id, warmup.id);

  for (const n of SIZES) {
    const b = await bare(n);

    const cold = await s.profiles.create(user.id, { name: `cold-${n}`, model: { provider: "demo" }, image: IMAGE, limits });
    const c = await burst(cold.id, n);
    await cleanup(c.sessions);
    s.profiles.delete(user.id, cold.id);

    const warm = await s.profiles.create(user.id, { name: `warm-${n}`, model: { provider: "demo" }, image: IMAGE, limits, warm_pool: n });
    const deadline = Date.now() + 120_000 + n * 2000;
    while ((s.workspaces.pool.state(warm.id)?.ready ?? 0) < n) {
      if (Date.now() > deadline) throw new Error(`the warm pool of ${n} did not fill`);
      await Bun.sleep(50);
    }
    const w = await burst(warm.id, n);
    // The pool refills behind the burst; delete the profile first so it stops, then the sessions.
    s.profiles.delete(user.id, warm.id);
    await cleanup(w.sessions);
    await Bun.sleep(500);

    rows.push({ n, bare: b, cold: c.ms, warm: w.ms });
  }
} finally {
  await app.stop();
  rmSync(dir, { recursive: true, force: true });
}

console.log(`scale benchmark: N sessions at once over N WebSockets, image ${IMAGE}, Docker ${(await docker.version()).Version}, start parallelism ${app.config.workspaceStartParallelism}`);
console.log("   N | docker run -d p50 / p99      | no pool p50 / p99 (ratio to bare)          | pool of N p50 / p99 (p99 ratio to bare)");
for (const r of rows) {
  const bare50 = p50(r.bare);
  const bare99 = p99(r.bare);
  console.log(
    `${String(r.n).padStart(4)} | ${fmt(bare50)} / ${fmt(bare99)} | ${fmt(p50(r.cold))} / ${fmt(p99(r.cold))} (${(p50(r.cold) / bare50).toFixed(2)}× / ${(p99(r.cold) / bare99).toFixed(2)}×) | ${fmt(p50(r.warm))} / ${fmt(p99(r.warm))} (${(p99(r.warm) / bare99).toFixed(3)}×)`,
  );
}
console.log("  goals: pool p50 ≤ 50 ms and p99 ≤ 0.25× bare p99; no pool ≤ 1.2× bare");
