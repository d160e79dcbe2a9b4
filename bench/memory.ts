/**
 * Memory benchmark (issue 15; prints figures, never fails): how much a real `runcell serve`
 * process — the single executable built from the current source — grows with the text it streams.
 *
 *   1. N sessions at once (default 40), each opened by `task.submit` on its own WebSocket, each
 *      streaming a 256 KiB answer from a local Anthropic-format server (test/helpers/mock-anthropic.ts)
 *      in small deltas. Figure: server RSS growth per MiB of streamed text — the peak during the
 *      run and the settled level after it, each minus the idle level before. Goal ≤ 4×.
 *   2. One session, 24 turns (a `task.submit`, then `session.turn`s), each answer 2 MiB: every
 *      model request carries the whole conversation so far, so the last one is ~46 MiB. Figure:
 *      the peak RSS growth over the run against the largest model request (its JSON body, as the
 *      mock received it). Goal ≤ 4×.
 *   3. Part 1's streams read by a bare Bun process (bench/lib/sdk-stream-client.ts), no runcell:
 *      through the Anthropic SDK's stream iterator, the way the server's provider reads them (the
 *      SDK's raw response and providers/sse.ts), and by a plain fetch reader of the same bytes —
 *      how much of part 1's peak the reading alone holds. Printed, no goal.
 *
 * RSS is VmRSS from /proc/<pid>/status, sampled every 50 ms during a run (the peak) and, for a
 * level, as the lowest reading over an idle window (the collector runs on its own timer).
 * Run: bun bench/memory.ts [--source] [--sessions N] [--turns N] [--only concurrent|turns|sdk]
 *   --source    run `bun src/main.ts serve` instead of the compiled binary
 * (BENCH_IMAGE, default `runcell-test/busybox:latest`; BENCH_SETTLE_MS, the idle window, default 6000;
 *  BENCH_CONCURRENT_TEXT, characters per session in part 1, default 262144 — a small value shows
 *  what the sessions cost without their text)
 */
import { rmSync } from "node:fs";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { prepareRuncell, serveRuncell, userToken } from "./lib/runcell-process.ts";
import { rssKiB } from "./lib/util.ts";

const argv = process.argv.slice(2);
const opt = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const FROM_SOURCE = argv.includes("--source");
const SESSIONS = Number(opt("--sessions") ?? 40);
const TURNS = Number(opt("--turns") ?? 24);
const ONLY = opt("--only");
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 6000);
const CONCURRENT_TEXT = Number(process.env.BENCH_CONCURRENT_TEXT ?? 256 * 1024);
const TURN_TEXT = 2 * 1024 * 1024;
/** Characters per streamed delta (a real model sends a few tokens per delta). */
const DELTA = 64;

const MiB = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

/** ASCII prose of exactly n characters, different per seed. */
function text(n: number, seed: number): string {
  const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"];
  const parts: string[] = [];
  let len = 0;
  for (let i = seed; len < n; i++) {
    const w = words[(i * 7 + seed) % words.length]! + (i % 13 === 0 ? ".\n" : " ");
    parts.push(w);
    len += w.length;
  }
  return parts.join("").slice(0, n);
}

// ---- the server --------------------------------------------------------------------------------
// BENCH_PRELOAD=file.ts (with --source): a module preloaded into the server, e.g. one logging bun:jsc's heapStats().
const rc = prepareRuncell("memory", { fromSource: FROM_SOURCE, preload: process.env.BENCH_PRELOAD });
const token = await userToken(rc, "memory@example.com");

// The mock answers each request with the text its prompt asks for (the last user text: "N:seed").
let largestRequest = 0;
const mock = startMockAnthropic().script((req) => {
  const size = Number(req.headers["content-length"] ?? 0) || JSON.stringify(req.body).length;
  largestRequest = Math.max(largestRequest, size);
  const last = req.body.messages.at(-1);
  const prompt = (Array.isArray(last.content) ? last.content.find((b: { type: string }) => b.type === "text")?.text : last.content) ?? "";
  const [n, seed] = String(prompt).split(":").map(Number);
  // The mock records every request; this benchmark does not need them (they reach ~46 MiB each).
  mock.requests.length = 0;
  mock.timings.length = 0;
  const body = text(n || 16, seed || 0);
  return { text: body, chunks: Math.ceil(body.length / DELTA), usage: { input_tokens: 100, output_tokens: 100 } };
});

const { url, proc, stderr, api } = await serveRuncell(rc, {
  token,
  image: IMAGE,
  modelPort: new URL(mock.url).port,
  flags: [
    "--default-max-concurrency", String(SESSIONS + 5),
    "--max-profile-concurrency", String(SESSIONS + 5),
    "--max-running-workspaces-per-user", String(SESSIONS + 5),
    "--max-sockets-per-caller", String(SESSIONS + 5),
  ],
});

/** Samples RSS every 50 ms until stopped; the peak is the highest reading. */
function sampler() {
  let peak = 0;
  let on = true;
  const loop = (async () => {
    while (on) {
      peak = Math.max(peak, rssKiB(proc.pid) * 1024);
      await Bun.sleep(50);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return Math.max(peak, rssKiB(proc.pid) * 1024);
    },
  };
}
/** The level: the lowest reading over an idle window. */
async function level(): Promise<number> {
  let low = Infinity;
  for (let t = 0; t < SETTLE_MS; t += 100) {
    await Bun.sleep(100);
    low = Math.min(low, rssKiB(proc.pid) * 1024);
  }
  return low;
}

/** A WebSocket on /v1/stream that resolves waiters on frames. */
async function socket() {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/stream`, [`Bearer.${token}`]);
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error("socket failed"));
  });
  let received = 0;
  let streamed = 0;
  let sessionId = "";
  let waiter: ((f: { type: string; error?: string }) => void) | null = null;
  ws.onmessage = (m) => {
    const data = m.data as string;
    received += data.length;
    const f = JSON.parse(data);
    if (f.type === "task:token") streamed += f.text.length;
    else if (f.type === "session.ready" && !sessionId) sessionId = f.session_id;
    else if (f.type === "task:done" || f.type === "task:failed" || f.type === "error") waiter?.(f);
  };
  return {
    get received() {
      return received;
    },
    get streamed() {
      return streamed;
    },
    get sessionId() {
      return sessionId;
    },
    /** Sends a message and waits for the task's end. */
    run(msg: Record<string, unknown>) {
      const done = new Promise<{ type: string; error?: string }>((resolve) => (waiter = resolve));
      ws.send(JSON.stringify(msg));
      return done;
    },
    close: () => ws.close(),
  };
}

const sessionIds: string[] = [];
try {
  const profile = await api("POST", "/v1/profiles", {
    name: "memory",
    model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url },
    image: IMAGE,
    network: "none",
    limits: { max_turns: 4, max_concurrency: SESSIONS + 5 },
  });
  console.log(`memory benchmark: ${FROM_SOURCE ? "bun src/main.ts" : "compiled binary"}, image ${IMAGE}, deltas of ${DELTA} characters`);
  // Warm-up: one small task, so the first-use costs (SDK, dockerode, compiled routes) are paid.
  {
    const s = await socket();
    const f = await s.run({ type: "task.submit", profile_id: profile.id, prompt: "1024:1" });
    if (f.type !== "task:done") throw new Error(`warm-up: ${JSON.stringify(f)}`);
    sessionIds.push(s.sessionId);
    s.close();
    await api("DELETE", `/v1/sessions/${s.sessionId}`);
  }

  if (!ONLY || ONLY === "concurrent") {
    const idle = await level();
    const sockets = await Promise.all(Array.from({ length: SESSIONS }, () => socket()));
    const s = sampler();
    const t0 = performance.now();
    const ends = await Promise.all(sockets.map((ws, i) => ws.run({ type: "task.submit", profile_id: profile.id, prompt: `${CONCURRENT_TEXT}:${i + 2}` })));
    const secs = (performance.now() - t0) / 1000;
    const peak = await s.stop();
    const failed = ends.filter((f) => f.type !== "task:done");
    const streamed = sockets.reduce((n, ws) => n + ws.streamed, 0);
    for (const ws of sockets) sessionIds.push(ws.sessionId);
    const after = await level();
    const mib = streamed / 1048576;
    console.log(`\n1. ${SESSIONS} sessions at once, each streaming ${CONCURRENT_TEXT / 1024} KiB (${MiB(streamed)} of text in ${secs.toFixed(1)} s, ${(mib / secs).toFixed(1)} MiB/s; ${failed.length} not done${failed[0] ? `: ${JSON.stringify(failed[0])}` : ""})`);
    console.log(`   server RSS idle ${MiB(idle)} → peak ${MiB(peak)} → settled ${MiB(after)} (sessions still open)`);
    console.log(`   RSS growth per MiB of streamed text: peak ${((peak - idle) / streamed).toFixed(2)}×, settled ${((after - idle) / streamed).toFixed(2)}×   (goal ≤ 4×)`);
    for (const ws of sockets) ws.close();
    for (const id of sockets.map((ws) => ws.sessionId)) await api("DELETE", `/v1/sessions/${id}`);
    const deleted = await level();
    console.log(`   after deleting the sessions: ${MiB(deleted)} (${((deleted - idle) / 1048576).toFixed(1)} MiB above idle)`);
  }

  if (!ONLY || ONLY === "turns") {
    const idle = await level();
    largestRequest = 0;
    const ws = await socket();
    const s = sampler();
    const t0 = performance.now();
    let failed = "";
    for (let i = 0; i < TURNS; i++) {
      const prompt = `${TURN_TEXT}:${100 + i}`;
      const f = await ws.run(i === 0 ? { type: "task.submit", profile_id: profile.id, prompt } : { type: "session.turn", session_id: ws.sessionId, prompt });
      if (f.type !== "task:done") {
        failed = JSON.stringify(f).slice(0, 300);
        break;
      }
    }
    const secs = (performance.now() - t0) / 1000;
    const peak = await s.stop();
    sessionIds.push(ws.sessionId);
    const after = await level();
    console.log(`\n2. one session, ${TURNS} turns of ${MiB(TURN_TEXT)} (${MiB(ws.streamed)} of text in ${secs.toFixed(1)} s${failed ? `; stopped: ${failed}` : ""})`);
    console.log(`   largest model request ${MiB(largestRequest)}; server RSS idle ${MiB(idle)} → peak ${MiB(peak)} → settled ${MiB(after)}`);
    console.log(`   peak RSS growth / largest model request: ${((peak - idle) / largestRequest).toFixed(2)}×   (goal ≤ 4×); settled growth ${((after - idle) / largestRequest).toFixed(2)}×`);
    ws.close();
    await api("DELETE", `/v1/sessions/${ws.sessionId}`);
    const deleted = await level();
    console.log(`   after deleting the session: ${MiB(deleted)} (${((deleted - idle) / 1048576).toFixed(1)} MiB above idle)`);
  }
  if (!ONLY || ONLY === "sdk") {
    // Part 1's streams again, read outside runcell by a bare Bun process: through the provider
    // SDK's stream iterator vs a plain fetch reader, alternating, three rounds each.
    const runs: Record<string, number[]> = { sdk: [], runcell: [], fetch: [] };
    let streamedText = 0;
    for (let round = 0; round < 3; round++) {
      for (const mode of ["sdk", "runcell", "fetch"] as const) {
        const p = Bun.spawn(["bun", new URL("./lib/sdk-stream-client.ts", import.meta.url).pathname, mock.url, mode, String(SESSIONS), String(CONCURRENT_TEXT)], { stdout: "pipe", stderr: "inherit" });
        const r = JSON.parse((await new Response(p.stdout).text()).trim().split("\n").pop()!) as { text: number; peak: number; idle: number };
        await p.exited;
        if (mode === "sdk") streamedText = r.text;
        runs[mode]!.push((r.peak - r.idle) / (SESSIONS * CONCURRENT_TEXT));
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`\n3. part 1's ${SESSIONS} streams read by a bare Bun process, no runcell (${MiB(streamedText)} of text; median of 3, alternating)`);
    console.log(`   RSS peak growth per MiB of text: through the Anthropic SDK's stream iterator ${median(runs.sdk!).toFixed(2)}×, as runcell's provider reads them (providers/sse.ts) ${median(runs.runcell!).toFixed(2)}× = ${(median(runs.runcell!) / median(runs.sdk!)).toFixed(2)}× the SDK's, a plain fetch reader of the same bytes ${median(runs.fetch!).toFixed(2)}×`);
    const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(", ");
    console.log(`   (runs: SDK ${list(runs.sdk!)}; runcell ${list(runs.runcell!)}; fetch ${list(runs.fetch!)} — what part 1's peak holds before runcell's own work; printed, no goal)`);
  }
} finally {
  proc.kill("SIGTERM");
  await proc.exited;
  await mock.stop();
  const err = (await stderr).trim();
  if (err) console.log(`  server stderr: ${err.slice(0, 2000)}`);
  // Containers and volumes left by a failed run.
  for (const sid of sessionIds) {
    const ids = Bun.spawnSync(["docker", "ps", "-aq", "--filter", `label=runcell.session=${sid}`], { stdout: "pipe" }).stdout.toString().split(/\s+/).filter(Boolean);
    for (const c of ids) Bun.spawnSync(["docker", "rm", "-f", c]);
  }
  rmSync(rc.dir, { recursive: true, force: true });
}
