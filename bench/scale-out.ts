/**
 * Scale-out benchmark (issue 17), measured from outside against the compiled runcell.
 *
 * - session.ready with two Docker hosts against one: N (BENCH_SCALE_OUT_N, default 20)
 *   `session.start` frames sent at once over N WebSockets to a profile without a warm pool, each
 *   socket's time to its `session.ready` (the container created and started). Server "one" has the
 *   usual engine; server "two" has it plus a second dockerd on this machine
 *   (scripts/second-dockerd.sh, its unix socket), so placement spreads the burst over both and
 *   each host's start gate (--workspace-start-parallelism, per host) runs its own creations.
 *   Rounds alternate one, two, one, two… (BENCH_SCALE_OUT_ROUNDS, default 3 each); reported: the
 *   median of the rounds' p50 and p99, and two/one. Goal: p50 ≤ 0.6×.
 *   Measured twice: first with both engines sharing this machine's CPUs (what parallel engines
 *   give when runc and containerd do not already saturate them — here they do); then with each
 *   engine pinned to a CPU of its own (taskset on dockerd and its containerd, whose shims and runc
 *   inherit it: engine a on CPU 0 — server "one"'s only engine — and b on CPU 1), which is what two
 *   machines each bringing their own CPU look like. The runcell servers run on either CPU in both.
 * - The REST scenario suite (`bun test test/http`: every route's 401/404/400/success table and
 *   the API behaviour tests, 761 tests) on PostgreSQL (RUNCELL_TEST_POSTGRES: a fresh database per
 *   test app on scripts/test-postgres.sh's server) against SQLite, wall time, alternating
 *   SQLite, PostgreSQL × BENCH_SUITE_ROUNDS (default 2); printed, no goal.
 * - Events/s with the subscriber on another replica against the same replica (bench/lib/replica-events.ts):
 *   two replicas on one PostgreSQL database; goal ≥ 0.7×.
 *
 * `--suite-only` runs the suite comparison alone, `--events-only` the events/s comparison alone,
 * `--hosts-only` the session.ready comparison alone. Removal is outside every timing. Never fails
 * on timing. Run: bun bench/scale-out.ts
 */
import { readFileSync } from "node:fs";
import Docker from "dockerode";
import { OPEN_POLICY } from "../test/helpers/app.ts";
import { replicaEvents } from "./lib/replica-events.ts";
import { prepareRuncell, type Served, serveRuncell, userToken } from "./lib/runcell-process.ts";
import { freePort, median, quantile, ROOT } from "./lib/util.ts";

const N = Number(process.env.BENCH_SCALE_OUT_N ?? 20);
const ROUNDS = Number(process.env.BENCH_SCALE_OUT_ROUNDS ?? 3);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const SECOND_SOCKET = "/var/run/runcell-docker2.sock";
const MAIN_PIDFILE = "/var/run/docker.pid";
const SECOND_PIDFILE = "/var/run/runcell-docker2.pid";
const ENGINES = { a: new Docker({ socketPath: "/var/run/docker.sock" }), b: new Docker({ socketPath: SECOND_SOCKET }) };

const SUITE_ROUNDS = Number(process.env.BENCH_SUITE_ROUNDS ?? 2);
const PG_SERVER = "postgres://postgres@127.0.0.1:55432/postgres";

/** Wall time of `bun test test/http`, on SQLite or (pg) PostgreSQL; throws when a test fails. */
function suiteSeconds(pg: boolean): number {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  if (pg) env.RUNCELL_TEST_POSTGRES = PG_SERVER;
  else delete env.RUNCELL_TEST_POSTGRES;
  const t0 = performance.now();
  const r = Bun.spawnSync(["bun", "test", "--timeout", "60000", "test/http"], { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" });
  const seconds = (performance.now() - t0) / 1000;
  const summary = r.stderr.toString().match(/(\d+) pass\s+(\d+) fail/);
  if (r.exitCode !== 0) {
    const failed = [...new Set(r.stderr.toString().split("\n").filter((l) => l.startsWith("(fail)")))].join("\n    ");
    throw new Error(`the ${pg ? "PostgreSQL" : "SQLite"} pass failed (${summary?.[0].replace(/\s+/g, " ") ?? "?"}):\n    ${failed || r.stderr.toString().slice(-500)}`);
  }
  console.log(`  ${pg ? "PostgreSQL" : "SQLite    "} ${seconds.toFixed(1).padStart(6)} s  (${summary?.[1] ?? "?"} pass)`);
  return seconds;
}

function restSuite() {
  const pgUp = Bun.spawnSync(["bash", `${ROOT}/scripts/test-postgres.sh`, "start"], { stdout: "inherit", stderr: "inherit" });
  if (pgUp.exitCode !== 0) throw new Error("scripts/test-postgres.sh start failed");
  console.log(`\nREST scenario suite (bun test test/http), SQLite and PostgreSQL alternating, ${SUITE_ROUNDS} rounds:`);
  const times = { sqlite: [] as number[], pg: [] as number[] };
  for (let r = 0; r < SUITE_ROUNDS; r++) {
    times.sqlite.push(suiteSeconds(false));
    times.pg.push(suiteSeconds(true));
  }
  const ratio = median(times.pg) / median(times.sqlite);
  console.log(`  median: SQLite ${median(times.sqlite).toFixed(1)} s, PostgreSQL ${median(times.pg).toFixed(1)} s = ${ratio.toFixed(2)}× (printed, no goal)`);
}

if (process.argv.includes("--events-only")) {
  await replicaEvents(PG_SERVER);
  process.exit(0);
}

if (process.argv.includes("--suite-only")) {
  restSuite();
  process.exit(0);
}

const up = Bun.spawnSync(["bash", `${ROOT}/scripts/second-dockerd.sh`, "start"], { stdout: "inherit", stderr: "inherit" });
if (up.exitCode !== 0) throw new Error("scripts/second-dockerd.sh start failed");

const modelPort = String(await freePort()); // nothing answers there: session.start makes no model call
const flags = [...OPEN_POLICY.filter((f, i, a) => f !== "--allow-model-hosts" && a[i - 1] !== "--allow-model-hosts"), "--max-sockets-per-caller", String(N * 2 + 10)];

async function server(name: string, hosts: string[]): Promise<{ srv: Served; token: string; profile: string; close(): void }> {
  const r = prepareRuncell(`scale-out-${name}`, { fromSource: process.argv.includes("--source") });
  const token = await userToken(r, `${name}@example.com`);
  const srv = await serveRuncell(r, { token, image: IMAGE, modelPort, flags: [...flags, ...hosts.flatMap((h) => ["--docker-host", h])] });
  const profile = await srv.api("POST", "/v1/profiles", {
    name: "burst",
    model: { provider: "demo" },
    image: IMAGE,
    network: "none",
    tools: [],
    limits: { max_concurrency: Math.min(1000, N * 2), memory_mb: 128, cpus: 0.5, pids: 128 },
  });
  return { srv, token, profile: profile.id, close: () => srv.proc.kill() };
}

/** N session.start frames at once; each socket's time to its session.ready; then the sessions are deleted. */
async function burst(s: { srv: Served; token: string; profile: string }): Promise<{ ms: number[]; hosts: Record<string, number> }> {
  const wsUrl = `${s.srv.url.replace(/^http/, "ws")}/v1/stream`;
  const sockets = await Promise.all(
    Array.from({ length: N }, async () => {
      const ws = new WebSocket(wsUrl, [`Bearer.${s.token}`]);
      await new Promise((res, rej) => {
        ws.addEventListener("open", res, { once: true });
        ws.addEventListener("error", rej, { once: true });
      });
      return ws;
    }),
  );
  const sessions: string[] = new Array(N);
  const t0 = performance.now();
  const waits = sockets.map(
    (ws, i) =>
      new Promise<number>((resolve, reject) => {
        ws.addEventListener("message", (m) => {
          const f = JSON.parse(m.data as string);
          if (f.type === "session.ready") {
            sessions[i] = f.session_id;
            resolve(performance.now() - t0);
          } else if (f.type === "error") reject(new Error(`${f.code}: ${f.message}`));
        });
      }),
  );
  for (const ws of sockets) ws.send(JSON.stringify({ type: "session.start", profile_id: s.profile }));
  const ms = await Promise.all(waits);
  for (const ws of sockets) ws.close();
  // Where the workspaces went: this server's containers (by name) on each engine.
  const mine = new Set((await s.srv.api("GET", `/v1/workspaces?limit=100`)).data.map((w: { name: string }) => `/${w.name}`));
  const hosts: Record<string, number> = {};
  for (const [name, engine] of Object.entries(ENGINES)) {
    hosts[name] = (await engine.listContainers({ filters: { name: ["runcell-ctr_"] } })).filter((c) => mine.has(c.Names[0]!)).length;
  }
  for (let i = 0; i < sessions.length; i += 8) await Promise.all(sessions.slice(i, i + 8).map((id) => s.srv.api("DELETE", `/v1/sessions/${id}`)));
  return { ms, hosts };
}

/** The engine's processes (dockerd and its containerd: the shims and runc it starts inherit their CPUs). */
function enginePids(pidfile: string): number[] {
  const dockerd = Number(readFileSync(pidfile, "utf8").trim());
  const children = Bun.spawnSync(["pgrep", "-P", String(dockerd), "containerd"], { stdout: "pipe" }).stdout.toString().split(/\s+/).filter(Boolean).map(Number);
  return [dockerd, ...children];
}

/** Runs an engine (every thread of its processes) on these CPUs (taskset's list syntax). */
function pinEngine(pidfile: string, cpus: string) {
  for (const pid of enginePids(pidfile)) {
    const r = Bun.spawnSync(["taskset", "-a", "-cp", cpus, String(pid)], { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`taskset ${cpus} ${pid}: ${r.stderr.toString()}`);
  }
}

async function measure(title: string, one: Awaited<ReturnType<typeof server>>, two: Awaited<ReturnType<typeof server>>) {
  console.log(`\n${title}`);
  // One unmeasured burst each: images, page cache and the engines' first-use costs.
  await burst(one);
  await burst(two);
  const res = { one: { p50: [] as number[], p99: [] as number[] }, two: { p50: [] as number[], p99: [] as number[] } };
  let spread: Record<string, number> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const [key, s] of [["one", one], ["two", two]] as const) {
      const b = await burst(s);
      res[key].p50.push(quantile(b.ms, 0.5));
      res[key].p99.push(quantile(b.ms, 0.99));
      if (key === "two") spread = b.hosts;
      console.log(`  round ${r + 1} ${key.padEnd(3)} session.ready p50 ${quantile(b.ms, 0.5).toFixed(0).padStart(5)} ms, p99 ${quantile(b.ms, 0.99).toFixed(0).padStart(5)} ms  (containers: ${Object.entries(b.hosts).map(([h, n]) => `${h} ${n}`).join(", ")})`);
    }
  }
  const p50 = { one: median(res.one.p50), two: median(res.two.p50) };
  const p99 = { one: median(res.one.p99), two: median(res.two.p99) };
  console.log(`  session.ready at N = ${N} parallel starts, median of ${ROUNDS} rounds (two hosts placed ${Object.entries(spread).map(([h, n]) => `${h}: ${n}`).join(", ")} in the last):`);
  console.log(`  one Docker host  p50 ${p50.one.toFixed(0).padStart(5)} ms  p99 ${p99.one.toFixed(0).padStart(5)} ms`);
  console.log(`  two Docker hosts p50 ${p50.two.toFixed(0).padStart(5)} ms  p99 ${p99.two.toFixed(0).padStart(5)} ms`);
  const ratio = p50.two / p50.one;
  console.log(`  two / one: p50 ${ratio.toFixed(2)}× (goal ≤ 0.6×: ${ratio <= 0.6 ? "MET" : "NOT MET"}), p99 ${(p99.two / p99.one).toFixed(2)}×`);
}

const one = await server("one", ["unix:///var/run/docker.sock?name=a"]);
const two = await server("two", ["unix:///var/run/docker.sock?name=a", `unix://${SECOND_SOCKET}?name=b`]);
const cpus = navigator.hardwareConcurrency;
try {
  await measure("Engines sharing every CPU of this machine:", one, two);
  if (cpus >= 2 && Bun.which("taskset")) {
    // Each engine on a CPU of its own, as two machines would each bring theirs: engine a on CPU 0
    // (the only engine of server "one", the first of server "two"), engine b on CPU 1. The runcell
    // servers stay free to run on either.
    pinEngine(MAIN_PIDFILE, "0");
    pinEngine(SECOND_PIDFILE, "1");
    try {
      await measure("Each engine on a CPU of its own (taskset: a on CPU 0, b on CPU 1; one host = a alone):", one, two);
    } finally {
      pinEngine(MAIN_PIDFILE, `0-${cpus - 1}`);
      pinEngine(SECOND_PIDFILE, `0-${cpus - 1}`);
    }
  } else console.log("\n(each engine on its own CPU: not measured — needs 2 CPUs and taskset)");
} finally {
  one.close();
  two.close();
}
if (!process.argv.includes("--hosts-only")) {
  await replicaEvents(PG_SERVER);
  restSuite();
}
