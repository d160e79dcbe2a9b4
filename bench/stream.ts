/**
 * Issue 5 benchmarks for /v1/stream, each against a raw Bun.serve WebSocket baseline in the same
 * run and process:
 * 1. Replay of a 10,000-event session to one client (resume → replay_end), against a server that
 *    selects the same rows and sends them (goal ≤ 2×; absolute time reported).
 * 2. 1,000 idle authenticated sockets on a separate server process: added RSS per socket
 *    (goal ≤ 8 KB; the raw Bun.serve figure is printed beside it).
 * 3. One session fanned out to 100 sockets: frames delivered per second, against Bun's native
 *    `publish` to 100 subscribers of a topic (goal ≥ 0.7×).
 */
import type { Server } from "bun";
import { join } from "node:path";
import { startTestApp, tempDir } from "../test/helpers/app.ts";
import { createUser } from "../test/helpers/users.ts";
import { runCli } from "../test/helpers/cli.ts";
import { freePort, median, report, ROOT, rssKiB } from "./lib/util.ts";

const EVENTS = 10_000;
const FANOUT_SOCKETS = 100;
const FANOUT_FRAMES = 2000;
const IDLE_SOCKETS = 1000;

const open = (url: string, protocols?: string[]) =>
  new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.addEventListener("open", () => resolve(ws), { once: true });
    ws.addEventListener("error", (e) => reject(e), { once: true });
  });

function until(ws: WebSocket, pred: (data: string) => boolean): Promise<number> {
  return new Promise((resolve) => {
    let n = 0;
    const on = (m: MessageEvent) => {
      n++;
      if (pred(m.data as string)) {
        ws.removeEventListener("message", on);
        resolve(n);
      }
    };
    ws.addEventListener("message", on);
  });
}

console.log(`# stream benchmarks — ${new Date().toISOString()}`);
const t = await startTestApp({ flags: ["--log-level", "error"] });
const s = t.app.services;
const user = await createUser(t);
const sid = "sess_bench_replay";
s.sqlite!.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, 'prof_bench', 0, 0)", [sid, user.id]);
for (let i = 0; i < EVENTS; i++) s.hub.publish(sid, { type: "task:token", task_id: "task_bench", text: `token number ${i} ` });
s.eventLog.flush();

// ---- 1. replay ---------------------------------------------------------------------------
const select = s.sqlite!.prepare<{ frame: string }, [string]>("SELECT frame FROM events WHERE session_id = ? AND seq > 0 ORDER BY seq");
const raw: Server<unknown> = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req, server) => (server.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade", { status: 400 })),
  websocket: {
    message(ws) {
      ws.send(JSON.stringify({ type: "session.replay_start" }));
      for (const row of select.iterate(sid)) ws.send(row.frame);
      ws.send(JSON.stringify({ type: "session.replay_end" }));
    },
  },
});

async function replayOnce(url: string, protocols: string[] | undefined, msg: string): Promise<{ ms: number; frames: number }> {
  const ws = await open(url, protocols);
  const t0 = performance.now();
  const got = until(ws, (d) => d.includes('"session.replay_end"'));
  ws.send(msg);
  const frames = await got;
  const ms = performance.now() - t0;
  ws.close();
  return { ms, frames };
}

const ours: number[] = [];
const base: number[] = [];
for (let i = 0; i < 7; i++) {
  const b = await replayOnce(`ws://127.0.0.1:${raw.port}`, undefined, "go");
  const o = await replayOnce(`${t.wsUrl}/v1/stream`, [`Bearer.${user.token}`], JSON.stringify({ type: "session.resume", session_id: sid }));
  if (o.frames !== EVENTS + 2 || b.frames !== EVENTS + 2) throw new Error(`replay sent ${o.frames}/${b.frames} frames`);
  ours.push(o.ms);
  base.push(b.ms);
}
report(`replay of ${EVENTS.toLocaleString("en")} events to one client`, median(ours), median(base), "ms", "≤2×", "lower");
raw.stop(true);

// ---- 3. fan-out --------------------------------------------------------------------------
async function fanout(kind: "runcell" | "raw"): Promise<number> {
  const frame = JSON.stringify({ type: "task:token", session_id: "sess_fan", task_id: "task_fan", seq: 1, text: "a token of typical size " });
  let server: Server<unknown> | null = null;
  let url: string;
  let protocols: string[] | undefined;
  const fanSid = `sess_fan_${kind}_${Date.now()}`;
  if (kind === "raw") {
    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req, srv) => (srv.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade", { status: 400 })),
      websocket: {
        open: (ws) => {
          ws.subscribe("fan");
        },
        message() {},
      },
    });
    url = `ws://127.0.0.1:${server.port}`;
  } else {
    s.sqlite!.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, 'prof_bench', 0, 0)", [fanSid, user.id]);
    url = `${t.wsUrl}/v1/stream`;
    protocols = [`Bearer.${user.token}`];
  }
  const clients = await Promise.all(Array.from({ length: FANOUT_SOCKETS }, () => open(url, protocols)));
  if (kind === "runcell") {
    await Promise.all(
      clients.map((c) => {
        const ready = until(c, (d) => d.includes("session.replay_end"));
        c.send(JSON.stringify({ type: "session.resume", session_id: fanSid }));
        return ready;
      }),
    );
  } else await Bun.sleep(50);
  let received = 0;
  const all = new Promise<void>((resolve) => {
    for (const c of clients) {
      c.addEventListener("message", () => {
        if (++received === FANOUT_SOCKETS * FANOUT_FRAMES) resolve();
      });
    }
  });
  const t0 = performance.now();
  for (let i = 0; i < FANOUT_FRAMES; i++) {
    if (kind === "raw") server!.publish("fan", frame);
    else s.hub.publish(fanSid, { type: "task:token", task_id: "task_fan", text: "a token of typical size " });
    if (i % 100 === 99) await Bun.sleep(0);
  }
  await all;
  const perSec = (FANOUT_SOCKETS * FANOUT_FRAMES) / ((performance.now() - t0) / 1000);
  for (const c of clients) c.close();
  server?.stop(true);
  await Bun.sleep(100);
  return perSec;
}
const fanOurs: number[] = [];
const fanBase: number[] = [];
for (let i = 0; i < 3; i++) {
  fanBase.push(await fanout("raw"));
  fanOurs.push(await fanout("runcell"));
}
report(`fan-out of one session to ${FANOUT_SOCKETS} sockets`, median(fanOurs), median(fanBase), "frames/s", "≥0.7×", "higher");
await t.stop();

// ---- 2. idle sockets (server in its own process, so its RSS is its own) -----------------------
async function idleRss(kind: "runcell" | "raw"): Promise<number> {
  const port = await freePort();
  let proc: ReturnType<typeof Bun.spawn>;
  let url = `ws://127.0.0.1:${port}`;
  let protocols: string[] | undefined;
  if (kind === "runcell") {
    const dataDir = tempDir();
    await runCli(["admin", "create-user", "--data-dir", dataDir, "--email", "idle@example.com", "--role", "user", "--password-stdin"], { stdin: "correct horse battery" });
    const tok = /rc_[0-9a-f]{64}/.exec((await runCli(["token", "create", "--data-dir", dataDir, "--email", "idle@example.com", "--name", "idle"])).stdout)![0];
    proc = Bun.spawn(["bun", join(ROOT, "src/main.ts"), "serve", "--data-dir", dataDir, "--http", `127.0.0.1:${port}`, "--log-level", "error", "--rate-limit-per-minute", "1000000", "--rate-limit-burst", "1000000", "--max-sockets-per-caller", String(IDLE_SOCKETS + 10)], { stdout: "ignore", stderr: "ignore" });
    url += "/v1/stream";
    protocols = [`Bearer.${tok}`];
  } else {
    proc = Bun.spawn(["bun", "-e", `Bun.serve({hostname:"127.0.0.1",port:${port},fetch:(r,s)=>s.upgrade(r)?undefined:new Response("x"),websocket:{message(){}}})`], { stdout: "ignore", stderr: "ignore" });
  }
  for (let i = 0; i < 200; i++) {
    try {
      (await open(url, protocols)).close();
      break;
    } catch {
      await Bun.sleep(50);
    }
  }
  await Bun.sleep(1000);
  const before = rssKiB(proc.pid);
  const sockets: WebSocket[] = [];
  for (let i = 0; i < IDLE_SOCKETS; i += 50) sockets.push(...(await Promise.all(Array.from({ length: 50 }, () => open(url, protocols)))));
  await Bun.sleep(1500);
  const after = rssKiB(proc.pid);
  for (const w of sockets) w.close();
  proc.kill("SIGTERM");
  await proc.exited;
  return ((after - before) * 1024) / IDLE_SOCKETS;
}
const idleBase = await idleRss("raw");
const idleOurs = await idleRss("runcell");
console.log(
  `${`${IDLE_SOCKETS} idle authenticated sockets: added RSS`.padEnd(44)} ${(idleOurs / 1024).toFixed(2).padStart(10)} KB/socket  raw Bun.serve ${(idleBase / 1024).toFixed(2)} KB/socket  (goal ≤ 8 KB) ${idleOurs / 1024 <= 8 ? "MET" : "NOT MET"}`,
);
