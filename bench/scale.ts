/**
 * Scale benchmark (issue 15), measured from outside: the compiled runcell runs as its own process
 * (bench/lib/runcell-process.ts); this process holds the clients, the bare Docker runs and a local
 * Anthropic-format model server. For N = 1, 10, 40 (BENCH_SCALE_N, e.g. "1,10,40,100"):
 * - session.ready: N `session.start` frames sent at once over N WebSockets, each socket's time to
 *   its `session.ready`; with a warm pool of N (members ready before the burst) and without one,
 *   against N parallel bare `docker run -d --network none <same image> sleep infinity` in the same
 *   run. Goals: with the pool p50 ≤ 50 ms at every N and p99 ≤ 0.25× the bare runs' p99; without
 *   the pool ≤ 1.2× the bare runs.
 * - streaming (the pool's sessions): each session then streams a 256 KiB answer
 *   (BENCH_SCALE_KIB) in chunks of BENCH_SCALE_CHUNK characters, CHUNKS_PER_TICK chunks every
 *   TICK_MS per session; reported: MiB/s of text arriving at the subscribers (all sessions), and
 *   the relay latency of each chunk (the model server's write → the task:token frame carrying it
 *   at the subscriber, one clock) at p50/p99. Goal: relay p99 ≤ 5 ms at N = 100. Also the
 *   server's RSS idle → after.
 * Removal is outside every timing. Never fails on timing. Run: bun bench/scale.ts
 */
import Docker from "dockerode";
import { OPEN_POLICY } from "../test/helpers/app.ts";
import { prepareRuncell, serveRuncell, userToken } from "./lib/runcell-process.ts";
import { quantile, rssKiB } from "./lib/util.ts";

const SIZES = (process.env.BENCH_SCALE_N ?? "1,10,40").split(",").map(Number).filter((n) => n > 0);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const MAX = Math.max(...SIZES);
const KIB = Number(process.env.BENCH_SCALE_KIB ?? 256);
const CHUNK = Number(process.env.BENCH_SCALE_CHUNK ?? 256);
const CHUNKS_PER_TICK = Number(process.env.BENCH_SCALE_CHUNKS_PER_TICK ?? 4);
const TICK_MS = Number(process.env.BENCH_SCALE_TICK_MS ?? 10);
const CHUNKS = Math.ceil((KIB * 1024) / CHUNK);

const fmt = (ms: number) => `${ms.toFixed(0).padStart(6)} ms`;
const p50 = (xs: number[]) => quantile(xs, 0.5);
const p99 = (xs: number[]) => quantile(xs, 0.99);

// The model server: "stream <k>" → CHUNKS text deltas, each starting with its marker [#k.i#].
const sentAt = new Map<string, number>();
const enc = new TextEncoder();
const sse = (event: string, data: unknown) => enc.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
const model = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 0,
  async fetch(req) {
    const body = (await req.json()) as { messages: { role: string; content: unknown }[] };
    const last = body.messages[body.messages.length - 1]!;
    const text = typeof last.content === "string" ? last.content : JSON.stringify(last.content);
    const k = /stream (\d+)/.exec(text)?.[1] ?? "0";
    const stream = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(sse("message_start", { type: "message_start", message: { id: `msg_${k}`, type: "message", role: "assistant", model: "claude-sonnet-4-6", content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 0 } } }));
        c.enqueue(sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }));
        for (let i = 0; i < CHUNKS; i++) {
          if (i % CHUNKS_PER_TICK === 0) await Bun.sleep(TICK_MS);
          const marker = `[#${k}.${i}#]`;
          sentAt.set(`${k}.${i}`, performance.now());
          c.enqueue(sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: marker + "x".repeat(Math.max(0, CHUNK - marker.length)) } }));
        }
        c.enqueue(sse("content_block_stop", { type: "content_block_stop", index: 0 }));
        c.enqueue(sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: CHUNKS } }));
        c.enqueue(sse("message_stop", { type: "message_stop" }));
        c.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  },
});

/** `flags` without the named flags (and their values). */
const without = (flags: string[], names: string[]) => flags.filter((f, i) => !names.includes(f) && !names.includes(flags[i - 1]!));

const docker = new Docker({ socketPath: "/var/run/docker.sock" });
const r = prepareRuncell("scale", { fromSource: process.argv.includes("--source") });
const token = await userToken(r, "scale@example.com");
const srv = await serveRuncell(r, {
  token,
  image: IMAGE,
  modelPort: String(model.port),
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
async function burst(sockets: WebSocket[], profileId: string): Promise<{ ms: number[]; sessions: string[] }> {
  const sessions: string[] = new Array(sockets.length);
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
  return { ms: await Promise.all(waits), sessions };
}

/** Every session streams its answer at once; text bytes, wall time and per-chunk relay latencies. */
async function stream(sockets: WebSocket[], sessions: string[]): Promise<{ bytes: number; ms: number; relay: number[] }> {
  let bytes = 0;
  const relay: number[] = [];
  const MARK = /\[#(\d+\.\d+)#\]/g;
  const t0 = performance.now();
  await Promise.all(
    sockets.map(
      (ws, k) =>
        new Promise<void>((resolve, reject) => {
          ws.addEventListener("message", (m) => {
            const now = performance.now();
            const f = JSON.parse(m.data as string);
            if (f.type === "task:token") {
              bytes += f.text.length;
              for (const x of f.text.matchAll(MARK)) {
                const at = sentAt.get(x[1]!);
                if (at !== undefined) relay.push(now - at);
              }
            } else if (f.type === "task:done") resolve();
            else if (f.type === "task:failed" || f.type === "error") reject(new Error(JSON.stringify(f)));
          });
          ws.send(JSON.stringify({ type: "task.submit", session_id: sessions[k], prompt: `stream ${k}` }));
        }),
    ),
  );
  return { bytes, ms: performance.now() - t0, relay };
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

const profileBody = (name: string, warm: number) => ({
  name,
  model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: `http://127.0.0.1:${model.port}` },
  image: IMAGE,
  network: "none",
  tools: [],
  warm_pool: warm,
  limits: { max_concurrency: Math.min(1000, MAX * 2), memory_mb: 128, cpus: 0.5, pids: 128 },
});

interface Row { n: number; bare: number[]; cold: number[]; warm: number[]; mibps: number; relay: number[]; rss: [number, number] }
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
    const b = await bare(n);

    const cold = await srv.api("POST", "/v1/profiles", profileBody(`cold-${n}`, 0));
    const coldSockets = await openSockets(n);
    const c = await burst(coldSockets, cold.id);
    for (const ws of coldSockets) ws.close();
    await cleanup(c.sessions);
    await srv.api("DELETE", `/v1/profiles/${cold.id}`);

    const warm = await srv.api("POST", "/v1/profiles", profileBody(`warm-${n}`, n));
    const deadline = Date.now() + 120_000 + n * 2000;
    while (((await srv.api("GET", `/v1/profiles/${warm.id}`)).pool?.ready ?? 0) < n) {
      if (Date.now() > deadline) throw new Error(`the warm pool of ${n} did not fill`);
      await Bun.sleep(100);
    }
    await Bun.sleep(500);
    const idle = rssKiB(srv.proc.pid);
    const sockets = await openSockets(n);
    const w = await burst(sockets, warm.id);
    sentAt.clear();
    const s = await stream(sockets, w.sessions);
    const after = rssKiB(srv.proc.pid);
    for (const ws of sockets) ws.close();
    // The pool refills behind the burst; delete the profile first so it stops, then the sessions.
    await srv.api("DELETE", `/v1/profiles/${warm.id}`);
    await cleanup(w.sessions);
    await Bun.sleep(500);
    rows.push({ n, bare: b, cold: c.ms, warm: w.ms, mibps: s.bytes / 1024 / 1024 / (s.ms / 1000), relay: s.relay, rss: [idle / 1024, after / 1024] });
  }
} finally {
  srv.proc.kill();
  await srv.proc.exited;
  model.stop(true);
}

console.log(`scale benchmark (runcell as its own process): N sessions at once over N WebSockets, image ${IMAGE}, Docker ${(await docker.version()).Version}`);
console.log("   N | docker run -d p50 / p99      | no pool p50 / p99 (ratio to bare)          | pool of N p50 / p99 (p99 ratio to bare)");
for (const x of rows) {
  const bare50 = p50(x.bare);
  const bare99 = p99(x.bare);
  console.log(
    `${String(x.n).padStart(4)} | ${fmt(bare50)} / ${fmt(bare99)} | ${fmt(p50(x.cold))} / ${fmt(p99(x.cold))} (${(p50(x.cold) / bare50).toFixed(2)}× / ${(p99(x.cold) / bare99).toFixed(2)}×) | ${fmt(p50(x.warm))} / ${fmt(p99(x.warm))} (${(p99(x.warm) / bare99).toFixed(3)}×)`,
  );
}
console.log("  goals: pool p50 ≤ 50 ms and p99 ≤ 0.25× bare p99; no pool ≤ 1.2× bare");
console.log(`streaming: each session ${KIB} KiB in ${CHUNKS} chunks of ${CHUNK} characters, ${CHUNKS_PER_TICK} chunks every ${TICK_MS} ms (${((CHUNKS_PER_TICK * CHUNK) / TICK_MS / 1024 * 1000 / 1024).toFixed(2)} MiB/s offered per session)`);
for (const x of rows) {
  console.log(`${String(x.n).padStart(4)} | ${x.mibps.toFixed(2)} MiB/s at the subscribers | relay p50 ${p50(x.relay).toFixed(2)} ms, p99 ${p99(x.relay).toFixed(2)} ms (${x.relay.length} chunks) | server RSS ${x.rss[0].toFixed(0)} → ${x.rss[1].toFixed(0)} MiB`);
}
console.log("  goal: relay p99 ≤ 5 ms at N = 100");
