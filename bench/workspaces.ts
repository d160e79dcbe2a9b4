/**
 * Workspaces benchmark: `session.ready` latency, i.e. Workspaces.createForSession end to end
 * (concurrency reservation row, labelled volume, hardened container with docker-init, start,
 * record updated), against a bare `docker run -d --network none <same image> sleep infinity`
 * measured in the same run, rounds interleaved; removal is outside both timings. Also shown for
 * context: the Engine API floor (dockerode create + start, no volume, no CLI process). Goal:
 * createForSession p50 ≤ 1.3× the bare `docker run -d` p50.
 * Run: bun bench/workspaces.ts   (BENCH_N rounds, default 15; BENCH_IMAGE, default the test image)
 */
import { rmSync } from "node:fs";
import Docker from "dockerode";
import { createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { newId } from "../src/db/ids.ts";
import { profiles, sessions } from "../src/db/schema.ts";
import { silentLogger } from "../src/log.ts";
import type { ProfileRow } from "../src/workspaces/service.ts";
import { tempDir } from "../test/helpers/app.ts";
import { freePort } from "../test/helpers/net.ts";

const N = Number(process.env.BENCH_N ?? 15);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const WARMUP = 2;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

const dir = tempDir("runcell-bench-ws-");
const config = resolveConfig(parseArgs(["--data-dir", dir, "--http", `127.0.0.1:${await freePort()}`, "--workspace-image", IMAGE, "--log-level", "error"]).flags, {});
const app = await createApp(config, { logger: silentLogger });
await app.start();
const s = app.services;
const docker = new Docker({ socketPath: "/var/run/docker.sock" });

const user = await s.users.create({ email: `bench-${Date.now()}@example.com`, name: "bench", password: "correct horse battery", role: "admin" });
const now = Date.now();
const profile: ProfileRow = {
  id: newId("profile"),
  user_id: user.id,
  name: "bench",
  system_prompt: "bench",
  model: { provider: "demo", name: "demo" },
  image: IMAGE,
  tools: ["Bash"],
  env: {},
  warm_pool: 0,
  mcp_servers: [],
  allowed_tools: [],
  host_labels: [],
  repositories: [],
  limits: { max_turns: 10, max_budget_usd: 1, max_concurrency: 5, memory_mb: 512, cpus: 1, pids: 256 },
  network: "none",
  created_at: now,
  updated_at: now,
};
s.db.insert(profiles).values(profile).run();
const newSession = () => {
  const id = newId("session");
  s.db.insert(sessions).values({ id, user_id: user.id, profile_id: profile.id, created_at: Date.now(), updated_at: Date.now() }).run();
  return id;
};

async function ours(): Promise<number> {
  const sessionId = newSession();
  const t0 = performance.now();
  await s.workspaces.createForSession({ userId: user.id, sessionId, profile });
  const ms = performance.now() - t0;
  await s.workspaces.removeForSession(sessionId);
  return ms;
}

// The frame itself, end to end: WebSocket session.start → session.ready (session row, workspace,
// event log, fan-out), on a socket opened once.
const wsProfile = await s.profiles.create(user.id, { name: "bench", model: { provider: "demo", name: "demo" }, image: IMAGE, network: "none", limits: { max_concurrency: 50 } });
const wsToken = (await s.tokens.create(user.id, "bench")).token;
const socket = new WebSocket(`${app.url.replace(/^http/, "ws")}/v1/stream`, [`Bearer.${wsToken}`]);
await new Promise((r) => socket.addEventListener("open", r, { once: true }));

async function frame(): Promise<number> {
  const t0 = performance.now();
  const ready = new Promise<string>((resolve) => {
    const on = (m: MessageEvent) => {
      const f = JSON.parse(m.data as string);
      if (f.type === "session.ready") {
        socket.removeEventListener("message", on);
        resolve(f.session_id);
      }
    };
    socket.addEventListener("message", on);
  });
  socket.send(JSON.stringify({ type: "session.start", profile_id: wsProfile.id }));
  const sid = await ready;
  const ms = performance.now() - t0;
  await s.sessionLifecycle.delete(user.id, sid);
  return ms;
}

async function bare(): Promise<number> {
  const t0 = performance.now();
  const p = Bun.spawn(["docker", "run", "-d", "--network", "none", IMAGE, "sleep", "infinity"], { stdout: "pipe", stderr: "pipe" });
  const [id, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  const ms = performance.now() - t0;
  if (code !== 0) throw new Error(`docker run failed: ${await new Response(p.stderr).text()}`);
  await docker.getContainer(id.trim()).remove({ force: true });
  return ms;
}

async function apiFloor(): Promise<number> {
  const t0 = performance.now();
  const c = await docker.createContainer({ Image: IMAGE, Cmd: ["sleep", "infinity"], HostConfig: { NetworkMode: "none" } });
  await c.start();
  const ms = performance.now() - t0;
  await c.remove({ force: true });
  return ms;
}

const results = { ours: [] as number[], bare: [] as number[], api: [] as number[], frame: [] as number[] };
try {
  for (let i = 0; i < WARMUP; i++) {
    await bare();
    await ours();
    await apiFloor();
    await frame();
  }
  for (let i = 0; i < N; i++) {
    // Rotate the order so neither side always runs right after the other's removal.
    const order = [bare, ours, apiFloor, frame];
    for (let k = 0; k < i % 3; k++) order.push(order.shift()!);
    for (const f of order) {
      const ms = await f();
      (f === ours ? results.ours : f === bare ? results.bare : f === frame ? results.frame : results.api).push(ms);
    }
  }
} finally {
  socket.close();
  await app.stop();
  rmSync(dir, { recursive: true, force: true });
}

const p50 = { ours: pct(results.ours, 0.5), bare: pct(results.bare, 0.5), api: pct(results.api, 0.5), frame: pct(results.frame, 0.5) };
console.log(`workspaces benchmark: ${N} rounds (+${WARMUP} warm-up), image ${IMAGE}, Docker ${(await docker.version()).Version}`);
console.log(`  baseline  docker run -d … sleep infinity   p50 ${fmt(p50.bare)}   p90 ${fmt(pct(results.bare, 0.9))}`);
console.log(`  session.ready (createForSession)         p50 ${fmt(p50.ours)}   p90 ${fmt(pct(results.ours, 0.9))}`);
console.log(`  session.ready frame (WS session.start)    p50 ${fmt(p50.frame)}   p90 ${fmt(pct(results.frame, 0.9))}   ratio ${(p50.frame / p50.bare).toFixed(2)}× docker run`);
console.log(`  context: Engine API create+start         p50 ${fmt(p50.api)}   p90 ${fmt(pct(results.api, 0.9))}`);
console.log(`  ratio session.ready / docker run p50: ${(p50.ours / p50.bare).toFixed(2)}×   (goal ≤ 1.3×)`);
console.log(`  ratio session.ready / API floor p50:  ${(p50.ours / p50.api).toFixed(2)}×`);
