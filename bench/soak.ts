/**
 * Soak benchmark (issue 12; prints figures, never fails): a real `runcell serve` process — the
 * single executable built from the current source, as shipped — runs 200 short tasks in sequence,
 * each in a new session that is deleted afterwards:
 *   POST /v1/tasks (no session_id: a new session and its container) → the model (a local mock
 *   Anthropic server) asks for one Bash call, which runs in the workspace, then answers →
 *   GET /v1/tasks/:id until it is final → DELETE /v1/sessions/:id (transcript, container, volume).
 * The server's RSS (/proc/<pid>/status VmRSS) is read after the warm-up (10 tasks, the baseline),
 * after 50 and after 200 (and every 25 for the trend), each as the lowest reading over an idle
 * window — the collector runs on its own timer, and a single reading taken right after a task can
 * be 20–40 MiB of uncollected garbage higher. The ratio after-200 / after-50 should stay within
 * noise (~1.0×); a steady climb between the checkpoints is a leak to find. Open file descriptors
 * and leftover sessions/containers/volumes are printed beside it.
 * Run: bun bench/soak.ts [--tasks N] [--source]
 *   --tasks N   a quicker run (checkpoints scale: N/20, N/4, N); default 200
 *   --source    run `bun src/main.ts serve` instead of the compiled binary
 * (BENCH_IMAGE, default the test image `runcell-test/busybox:latest`; BENCH_SETTLE_MS, the idle window
 * of each reading, default 15000)
 */
import { readdirSync, rmSync } from "node:fs";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { prepareRuncell, serveRuncell, userToken } from "./lib/runcell-process.ts";
import { rssKiB } from "./lib/util.ts";

const argv = process.argv.slice(2);
const opt = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const TASKS = Number(opt("--tasks") ?? 200);
if (!Number.isInteger(TASKS) || TASKS < 4) throw new Error("--tasks: expected an integer ≥ 4");
const FROM_SOURCE = argv.includes("--source");
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 15_000);
// Checkpoints: 10, 50, 200 for the default run.
const WARM = Math.max(1, Math.round(TASKS / 20));
const MID = Math.max(WARM + 1, Math.round(TASKS / 4));
const TREND_EVERY = Math.max(1, Math.round(TASKS / 8));

const MiB = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const docker = (args: string[]) => Bun.spawnSync(["docker", ...args], { stdout: "pipe", stderr: "ignore" }).stdout.toString().split(/\s+/).filter(Boolean);

// ---- the server --------------------------------------------------------------------------------
const rc = prepareRuncell("soak", { fromSource: FROM_SOURCE });
const version = Bun.spawnSync([...rc.cmd, "version"], { cwd: rc.dir, stdout: "pipe", stderr: "pipe" }).stdout.toString().trim();
// An ordinary user (not an admin): the loopback model server is allowed by --allow-model-hosts.
const token = await userToken(rc, "soak@example.com");

const mock = startMockAnthropic().script((req) => {
  const last = req.body.messages.at(-1);
  const answered = Array.isArray(last?.content) && last.content.some((b: { type: string }) => b.type === "tool_result");
  return answered ? { text: "Done: the workspace answered.", usage: { input_tokens: 40, output_tokens: 6 } } : { text: "Let me check.", toolCalls: [{ name: "Bash", input: { command: "echo soak" } }], usage: { input_tokens: 30, output_tokens: 9 } };
});

const { proc, stderr, api } = await serveRuncell(rc, { token, image: IMAGE, modelPort: new URL(mock.url).port });

let instanceId = "";
try {
  const profile = await api("POST", "/v1/profiles", { name: "soak", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: IMAGE, network: "none" });

  // ---- the tasks -------------------------------------------------------------------------------
  const durations: number[] = [];
  const failed: string[] = [];
  async function one(i: number) {
    const t0 = performance.now();
    const sub = await api("POST", "/v1/tasks", { profile_id: profile.id, prompt: `soak task ${i}` });
    let task: { status: string; error: unknown };
    for (;;) {
      task = await api("GET", `/v1/tasks/${sub.task_id}`);
      if (["completed", "failed", "cancelled"].includes(task.status)) break;
      await Bun.sleep(10);
    }
    if (task.status !== "completed") failed.push(`${sub.task_id}: ${task.status} ${JSON.stringify(task.error)}`);
    if (!instanceId) {
      // This data dir's instance label, read off the first container (for the leftovers check).
      const c = docker(["ps", "-aq", "--filter", `label=runcell.session=${sub.session_id}`])[0];
      if (c) instanceId = Bun.spawnSync(["docker", "inspect", "-f", '{{index .Config.Labels "runcell.instance"}}', c], { stdout: "pipe" }).stdout.toString().trim();
    }
    await api("DELETE", `/v1/sessions/${sub.session_id}`);
    durations.push(performance.now() - t0);
  }
  // RSS moves with the collector's timing: the figure is the lowest reading over an idle window
  // (sampled every 100 ms), i.e. the level once the garbage of the last tasks has been collected.
  const sample = async () => {
    const series: number[] = [];
    for (let t = 0; t < SETTLE_MS; t += 100) {
      await Bun.sleep(100);
      series.push(rssKiB(proc.pid));
    }
    if (process.env.BENCH_DEBUG) console.log(`    ${series.map((k) => (k / 1024).toFixed(0)).join(" ")}`);
    return { rss: Math.min(...series), peak: Math.max(...series), fds: fdCount(proc.pid) };
  };

  const started = rssKiB(proc.pid);
  const points: { after: number; rss: number; peak: number; fds: number }[] = [];
  console.log(`soak benchmark: ${TASKS} tasks in sequence (new session each, then DELETE), ${FROM_SOURCE ? "bun src/main.ts" : `compiled binary (${version})`}, image ${IMAGE}`);
  console.log(`  ${"server RSS at start (idle, before any task)".padEnd(40)} ${MiB(started).padStart(10)}`);
  for (let i = 1; i <= TASKS; i++) {
    await one(i);
    if (i === WARM || i === MID || i === TASKS || i % TREND_EVERY === 0) {
      const s = await sample();
      points.push({ after: i, ...s });
      const recent = durations.slice(-Math.min(TREND_EVERY, durations.length));
      console.log(`  after ${String(i).padStart(4)} tasks   RSS ${MiB(s.rss).padStart(10)} (peak in the window ${MiB(s.peak).padStart(9)})   fds ${String(s.fds).padStart(4)}   task p50 ${(recent.sort((a, b) => a - b)[recent.length >> 1]!).toFixed(0)} ms`);
    }
  }
  const at = (n: number) => points.find((p) => p.after === n)!;
  const base = at(WARM);
  const mid = at(MID);
  const end = at(TASKS);
  const leftSessions = (await api("GET", "/v1/sessions?limit=100")).data.length;
  const leftContainers = instanceId ? docker(["ps", "-aq", "--filter", `label=runcell.instance=${instanceId}`]).length : NaN;
  const leftVolumes = instanceId ? docker(["volume", "ls", "-q", "--filter", `label=runcell.instance=${instanceId}`]).length : NaN;
  const perTask = ((end.rss - mid.rss) * 1024) / (TASKS - MID);
  console.log(`  ${`baseline: RSS after ${WARM} tasks (warm-up)`.padEnd(40)} ${MiB(base.rss).padStart(10)}`);
  console.log(`  ${`RSS after ${MID} tasks`.padEnd(40)} ${MiB(mid.rss).padStart(10)}   ratio ${(mid.rss / base.rss).toFixed(2)}× baseline`);
  console.log(`  ${`RSS after ${TASKS} tasks`.padEnd(40)} ${MiB(end.rss).padStart(10)}   ratio ${(end.rss / base.rss).toFixed(2)}× baseline`);
  console.log(`  ratio after-${TASKS} / after-${MID}: ${(end.rss / mid.rss).toFixed(3)}×   growth ${((end.rss - mid.rss) / 1024).toFixed(1)} MiB = ${(perTask / 1024).toFixed(1)} KiB/task   (goal: ~1.0×, within noise)`);
  console.log(`  open fds ${base.fds} → ${mid.fds} → ${end.fds}; left over: ${leftSessions} sessions, ${leftContainers} containers, ${leftVolumes} volumes; ${failed.length} tasks not completed`);
  for (const f of failed.slice(0, 5)) console.log(`    ${f}`);
} finally {
  proc.kill("SIGTERM");
  await proc.exited;
  await mock.stop();
  const err = (await stderr).trim();
  if (err) console.log(`  server stderr: ${err.slice(0, 2000)}`);
  if (instanceId) {
    for (const c of docker(["ps", "-aq", "--filter", `label=runcell.instance=${instanceId}`])) docker(["rm", "-f", c]);
    for (const v of docker(["volume", "ls", "-q", "--filter", `label=runcell.instance=${instanceId}`])) docker(["volume", "rm", "-f", v]);
  }
  rmSync(rc.dir, { recursive: true, force: true });
}
