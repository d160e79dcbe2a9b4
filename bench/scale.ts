/**
 * Scale benchmark (issue 15), measured from outside: the compiled runcell runs as its own process
 * (bench/lib/runcell-process.ts), the model server in another; this process holds the clients and
 * the bare Docker runs. For N = 1, 10, 40 (BENCH_SCALE_N, e.g. "1,10,40,100"):
 * - session.ready: N `session.start` frames sent at once over N WebSockets, each socket's time to
 *   its `session.ready`; with a warm pool of N (members ready before the burst) and without one,
 *   against N parallel bare `docker run -d --network none <same image> sleep infinity` in the same
 *   run. Goals: with the pool p50 ≤ 50 ms at every N and p99 ≤ 0.25× the bare runs' p99; without
 *   the pool ≤ 1.2× the bare runs.
 * - streaming (the pool's sessions): each session then streams a 256 KiB answer
 *   (BENCH_SCALE_KIB) in chunks of BENCH_SCALE_CHUNK characters, CHUNKS_PER_TICK chunks every
 *   TICK_MS per session, from a model server in its own process (bench/fixtures/stream-model.ts,
 *   so the subscribers' work here cannot delay its writes); twice: at once, while the pool refills
 *   behind the burst (N container creations competing for the CPU), and again once the pool is
 *   full. Reported per round: MiB/s of text arriving at the subscribers (all sessions), the relay
 *   latency of each chunk (its write time, carried in the chunk → the task:token frame carrying it
 *   at the subscriber, on the system clock both processes share) at p50/p99, and the CPU each
 *   process used (the server's JS thread apart). Goal: relay p99 ≤ 5 ms at N = 100. Also the
 *   server's RSS idle → after.
 * - the pooled burst's cost on the server's JS thread: CPU time and time spent runnable but
 *   waiting for a CPU (Linux schedstat).
 * BENCH_SCALE_ONLY=pool runs only the pooled half (no bare runs, no burst without a pool).
 * Removal is outside every timing. Never fails on timing. Run: bun bench/scale.ts
 */
import Docker from "dockerode";
import { LABEL_POOL } from "../src/workspaces/spec.ts";
import { OPEN_POLICY } from "../test/helpers/app.ts";
import { prepareRuncell, serveRuncell, userToken } from "./lib/runcell-process.ts";
import { join } from "node:path";
import { cpuTicks, freePort, quantile, ROOT, rssKiB, schedMs, waitListening } from "./lib/util.ts";

const SIZES = (process.env.BENCH_SCALE_N ?? "1,10,40").split(",").map(Number).filter((n) => n > 0);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const MAX = Math.max(...SIZES);
const KIB = Number(process.env.BENCH_SCALE_KIB ?? 256);
const CHUNK = Number(process.env.BENCH_SCALE_CHUNK ?? 256);
const CHUNKS_PER_TICK = Number(process.env.BENCH_SCALE_CHUNKS_PER_TICK ?? 4);
const TICK_MS = Number(process.env.BENCH_SCALE_TICK_MS ?? 10);
const CHUNKS = Math.ceil((KIB * 1024) / CHUNK);
/** BENCH_SCALE_ONLY=pool: only the pooled burst and its streaming (no bare runs, no pool-less burst). */
const POOL_ONLY = process.env.BENCH_SCALE_ONLY === "pool";

const fmt = (ms: number | undefined) => (ms === undefined || Number.isNaN(ms) ? "     - ms" : `${ms.toFixed(0).padStart(6)} ms`);
/** a / b as "0.00×", or "-" when a part was not run. */
const ratio = (a: number | undefined, b: number | undefined, digits = 2) => (a === undefined || b === undefined ? "-" : `${(a / b).toFixed(digits)}×`);
const p50 = (xs: number[]) => quantile(xs, 0.5);
const p99 = (xs: number[]) => quantile(xs, 0.99);

// The model server, in its own process (bench/fixtures/stream-model.ts): every delta carries the time of its write.
const modelPort = await freePort();
const model = Bun.spawn(["bun", join(ROOT, "bench/fixtures/stream-model.ts")], {
  env: { ...process.env, PORT: String(modelPort), MODEL_CHUNKS: String(CHUNKS), MODEL_CHUNK: String(CHUNK), MODEL_PER_TICK: String(CHUNKS_PER_TICK), MODEL_TICK_MS: String(TICK_MS) },
  stdout: "ignore",
  stderr: "inherit",
});
await waitListening(modelPort);

/** `flags` without the named flags (and their values). */
const without = (flags: string[], names: string[]) => flags.filter((f, i) => !names.includes(f) && !names.includes(flags[i - 1]!));

const docker = new Docker({ socketPath: "/var/run/docker.sock" });
const r = prepareRuncell("scale", { fromSource: process.argv.includes("--source"), preload: process.env.BENCH_PRELOAD });
const token = await userToken(r, "scale@example.com");
const srv = await serveRuncell(r, {
  token,
  image: IMAGE,
  modelPort: String(modelPort),
  flags: [...without(OPEN_POLICY, ["--allow-model-hosts", "--max-sockets-per-caller"]), "--max-sockets-per-caller", String(MAX * 2 + 10), "--max-warm-pool", String(MAX), "--max-warm-pool-total", String(MAX)],
});
const wsUrl = `${srv.url.replace(/^http/, "ws")}/v1/stream`;

async function openSockets(n: number): Promise<WebSocket[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const ws = new WebSocket(wsUrl, [`Bearer.${token}`]);
      await new Promise((res, rej) => {
        ws.addEventListener("open", res, { once: true });
        ws.addEventListener("error", rej, { once: true });
      });
      return ws;
    }),
  );
}

/** N session.start frames at once; each socket's time to its session.ready. Sockets stay open. */
async function burst(sockets: WebSocket[], profileId: string): Promise<{ ms: number[]; sessions: string[]; jsCpuMs: number; jsWaitMs: number }> {
  const sessions: string[] = new Array(sockets.length);
  const sched0 = schedMs(srv.proc.pid);
  const t0 = performance.now();
  const waits = sockets.map(
    (ws, i) =>
      new Promise<number>((resolve, reject) => {
        const on = (m: MessageEvent) => {
          const f = JSON.parse(m.data as string);
          if (f.type === "session.ready") {
            sessions[i] = f.session_id;
            ws.removeEventListener("message", on);
            resolve(performance.now() - t0);
          } else if (f.type === "error") reject(new Error(`${f.code}: ${f.message}`));
        };
        ws.addEventListener("message", on);
      }),
  );
  for (const ws of sockets) ws.send(JSON.stringify({ type: "session.start", profile_id: profileId }));
  const ms = await Promise.all(waits);
  const sched = schedMs(srv.proc.pid);
  return { ms, sessions, jsCpuMs: sched.cpu - sched0.cpu, jsWaitMs: sched.waiting - sched0.waiting };
}

/**
 * Every session streams its answer at once: text bytes, wall time, per-chunk relay latencies (the
 * marker's write time → the frame's arrival, on the system clock shared by both processes), and
 * the CPU each process used meanwhile (a share of one core: 1.0 = a core busy all the time).
 */
async function stream(sockets: WebSocket[], sessions: string[]): Promise<Streamed> {
  let bytes = 0;
  const relay: number[] = [];
  const MARK = /\[#(\d+\.\d+)#\]/g;
  const t0 = performance.now();
  const before = { server: cpuTicks(srv.proc.pid), main: schedMs(srv.proc.pid).cpu, model: cpuTicks(model.pid), bench: process.cpuUsage() };
  await Promise.all(
    sockets.map(
      (ws, k) =>
        new Promise<void>((resolve, reject) => {
          const on = (m: MessageEvent) => {
            const now = performance.timeOrigin + performance.now();
            const f = JSON.parse(m.data as string);
            if (f.type === "task:token") {
              bytes += f.text.length;
              for (const x of f.text.matchAll(MARK)) relay.push(now - Number(x[1]));
            } else if (f.type === "task:done") {
              ws.removeEventListener("message", on);
              resolve();
            } else if (f.type === "task:failed" || f.type === "error") reject(new Error(JSON.stringify(f)));
          };
          ws.addEventListener("message", on);
          ws.send(JSON.stringify({ type: "task.submit", session_id: sessions[k], prompt: `stream ${k}` }));
        }),
    ),
  );
  const ms = performance.now() - t0;
  const bench = process.cpuUsage(before.bench);
  const share = (ticks: number) => (ticks * 10) / ms;
  return {
    bytes,
    ms,
    relay,
    cpu: { server: share(cpuTicks(srv.proc.pid) - before.server), main: (schedMs(srv.proc.pid).cpu - before.main) / ms, model: share(cpuTicks(model.pid) - before.model), bench: (bench.user + bench.system) / 1000 / ms },
  };
}

async function cleanup(sessions: string[]) {
  for (let i = 0; i < sessions.length; i += 8) await Promise.all(sessions.slice(i, i + 8).filter(Boolean).map((id) => srv.api("DELETE", `/v1/sessions/${id}`)));
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
  for (let i = 0; i < runs.length; i += 8) await Promise.all(runs.slice(i, i + 8).map((x) => docker.getContainer(x.id).remove({ force: true })));
  return runs.map((x) => x.ms);
}

/** The profiles this run gave a pool (their members are removed at the end, whatever happened). */
const poolProfiles: string[] = [];

async function removeLeftovers(profileIds: string[]) {
  if (!profileIds.length) return;
  // Label filters are ANDed by the engine: list every pool member, keep this run's.
  const all = await docker.listContainers({ all: true, filters: { label: [LABEL_POOL] } }).catch(() => []);
  const left = all.filter((c) => profileIds.includes(c.Labels[LABEL_POOL] ?? ""));
  for (const c of left) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
    for (const m of c.Mounts) if (m.Type === "volume" && m.Name) await docker.getVolume(m.Name).remove().catch(() => {});
  }
  if (left.length) console.log(`  (removed ${left.length} warm-pool container(s) created after the server stopped)`);
}

/** Waits until the profile's pool has n members ready. */
async function poolFilled(profileId: string, n: number) {
  const deadline = Date.now() + 120_000 + n * 2000;
  while (((await srv.api("GET", `/v1/profiles/${profileId}`)).pool?.ready ?? 0) < n) {
    if (Date.now() > deadline) throw new Error(`the warm pool of ${n} did not fill`);
    await Bun.sleep(100);
  }
}

/** N sessions at once on a profile without a pool. */
async function coldBurst(n: number) {
  const cold = await srv.api("POST", "/v1/profiles", profileBody(`cold-${n}`, 0));
  const coldSockets = await openSockets(n);
  const c = await burst(coldSockets, cold.id);
  for (const ws of coldSockets) ws.close();
  await cleanup(c.sessions);
  await srv.api("DELETE", `/v1/profiles/${cold.id}`);
  return c;
}

const profileBody = (name: string, warm: number) => ({
  name,
  model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: `http://127.0.0.1:${modelPort}` },
  image: IMAGE,
  network: "none",
  tools: [],
  warm_pool: warm,
  limits: { max_concurrency: Math.min(1000, MAX * 2), memory_mb: 128, cpus: 0.5, pids: 128 },
});

interface Cpu { server: number; main: number; model: number; bench: number }
interface Streamed { bytes: number; ms: number; relay: number[]; cpu: Cpu }
interface Row { n: number; bare: number[]; cold: number[]; warm: number[]; warmSched: { cpu: number; waiting: number }; streams: [Streamed, Streamed]; rss: [number, number] }
const rows: Row[] = [];
try {
  // Warm-up: the image's layers, the engine's caches, the server's first requests.
  const warmup = await srv.api("POST", "/v1/profiles", profileBody("warmup", 0));
  const ws0 = await openSockets(1);
  await cleanup((await burst(ws0, warmup.id)).sessions);
  for (const ws of ws0) ws.close();
  await bare(1);
  await srv.api("DELETE", `/v1/profiles/${warmup.id}`);

  for (const n of SIZES) {
    const b = POOL_ONLY ? [] : await bare(n);
    const c = POOL_ONLY ? { ms: [] } : await coldBurst(n);

    const warm = await srv.api("POST", "/v1/profiles", profileBody(`warm-${n}`, n));
    poolProfiles.push(warm.id);
    await poolFilled(warm.id, n);
    await Bun.sleep(500);
    const idle = rssKiB(srv.proc.pid);
    const sockets = await openSockets(n);
    const w = await burst(sockets, warm.id);
    // First while the pool refills behind the burst (N container creations competing for the CPU),
    // then again once it is full and the engine is quiet.
    const s = await stream(sockets, w.sessions);
    await poolFilled(warm.id, n);
    const q = await stream(sockets, w.sessions);
    const after = rssKiB(srv.proc.pid);
    for (const ws of sockets) ws.close();
    // Delete the profile first so that its pool goes, then the sessions.
    await srv.api("DELETE", `/v1/profiles/${warm.id}`);
    await cleanup(w.sessions);
    await Bun.sleep(500);
    rows.push({ n, bare: b, cold: c.ms, warm: w.ms, warmSched: { cpu: w.jsCpuMs, waiting: w.jsWaitMs }, streams: [s, q], rss: [idle / 1024, after / 1024] });
  }
} finally {
  srv.proc.kill();
  await srv.proc.exited;
  model.kill();
  await model.exited;
  // A refill in flight when the server stopped can still create a member, which the server would
  // remove at its next start — but this data directory is never started again.
  await removeLeftovers(poolProfiles);
}

console.log(`scale benchmark (runcell as its own process): N sessions at once over N WebSockets, image ${IMAGE}, Docker ${(await docker.version()).Version}`);
console.log("   N | docker run -d p50 / p99      | no pool p50 / p99 (ratio to bare)          | pool of N p50 / p99 (p99 ratio to bare)");
for (const x of rows) {
  const bare50 = p50(x.bare);
  const bare99 = p99(x.bare);
  console.log(
    `${String(x.n).padStart(4)} | ${fmt(bare50)} / ${fmt(bare99)} | ${fmt(p50(x.cold))} / ${fmt(p99(x.cold))} (${ratio(p50(x.cold), bare50)} / ${ratio(p99(x.cold), bare99)}) | ${fmt(p50(x.warm))} / ${fmt(p99(x.warm))} (${ratio(p99(x.warm), bare99, 3)})`,
  );
}
console.log("  goals: pool p50 ≤ 50 ms and p99 ≤ 0.25× bare p99; no pool ≤ 1.2× bare");
for (const x of rows) {
  console.log(`${String(x.n).padStart(4)} pooled burst: the server's JS thread ran ${x.warmSched.cpu.toFixed(1)} ms and waited for a CPU ${x.warmSched.waiting.toFixed(1)} ms (${(x.warmSched.cpu / x.n).toFixed(2)} ms of CPU a start)`);
}
console.log(`streaming: each session ${KIB} KiB in ${CHUNKS} chunks of ${CHUNK} characters, ${CHUNKS_PER_TICK} chunks every ${TICK_MS} ms (${((CHUNKS_PER_TICK * CHUNK) / TICK_MS / 1024 * 1000 / 1024).toFixed(2)} MiB/s offered per session)`);
const line = (n: number, when: string, x: Streamed) =>
  console.log(
    `${String(n).padStart(4)} ${when} | ${(x.bytes / 1024 / 1024 / (x.ms / 1000)).toFixed(2)} MiB/s at the subscribers | relay p50 ${p50(x.relay).toFixed(2)} ms, p99 ${p99(x.relay).toFixed(2)} ms (${x.relay.length} chunks) | CPU (cores) server ${x.cpu.server.toFixed(2)} (its JS thread ${x.cpu.main.toFixed(2)}), model ${x.cpu.model.toFixed(2)}, subscribers ${x.cpu.bench.toFixed(2)}`,
  );
for (const x of rows) {
  line(x.n, "while the pool refills", x.streams[0]);
  line(x.n, "engine quiet          ", x.streams[1]);
  console.log(`${String(x.n).padStart(4)} server RSS ${x.rss[0].toFixed(0)} → ${x.rss[1].toFixed(0)} MiB (idle before the burst → after both rounds)`);
}
console.log("  goal: relay p99 ≤ 5 ms at N = 100");
