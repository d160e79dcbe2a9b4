/**
 * Playbooks benchmark (ratios against baselines measured in the same run; never fails):
 *
 * 1. Schedule precision: 1,000 playbooks due in the same second. runcell's scheduler (the real
 *    PlaybookScheduler and Playbooks.fireDue on a real SQLite file: the due-row query, each slot's
 *    claim in its own transaction) against 1,000 bare croner timers on the same second; the figure is
 *    fire time − due time, p50 and p99. The runs' task queue is replaced by a recorder of the claim
 *    time: starting 1,000 containers is the workspace benchmark's business, not the scheduler's.
 *    Goal: p99 ≤ the bare timers' p99 + 100 ms.
 * 2. Scheduler cost at rest: a real `runcell serve` process with 10,000 enabled playbooks due in an
 *    hour against one on an empty database, both idle for the same window: CPU time and context
 *    switches (wake-ups) per minute from /proc. Goal: ≤ 1.1×.
 * 3. POST /hooks/playbooks/<id>/<secret> → 202 against POST /v1/tasks → 202 on the same server and
 *    profile (both create a session and start its container), rounds interleaved, p50 and p99.
 *    Goal: ≤ 1.2×.
 * Run: bun bench/playbooks.ts   (BENCH_IDLE_S, default 20; BENCH_N, default 20)
 */
import { Cron } from "croner";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { SubmitHooks } from "../src/agents/orchestrator.ts";
import { createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/client.ts";
import { migrate } from "../src/db/migrate.ts";
import { newId } from "../src/db/ids.ts";
import { transact } from "../src/db/unit.ts";
import { playbooks } from "../src/db/schema.ts";
import { Sealer } from "../src/lib/sealer.ts";
import { silentLogger } from "../src/log.ts";
import { PlaybookRuns } from "../src/playbooks/runs.ts";
import { PlaybookScheduler } from "../src/playbooks/scheduler.ts";
import { Playbooks } from "../src/playbooks/service.ts";
import { tempDir } from "../test/helpers/app.ts";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { freePort, quantile, report, ROOT } from "./lib/util.ts";

const N = Number(process.env.BENCH_N ?? 20);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 20);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

// ---------------------------------------------------------------------------------------------
// 1. Precision

async function precision(count = 1000) {
  const dir = tempDir("runcell-bench-pb-");
  const h = openDatabase(join(dir, "runcell.db"));
  migrate(h.sqlite);
  const sealer = Sealer.fromDataDir(dir);
  const now = Date.now();
  h.sqlite.run("INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_bench', 'b@example.com', 'b', 'user', 0, 1, ?, ?)", [now, now]);
  // The bare timers first (their own second), then ours: one event loop, so never at once.
  const bareDue = Math.ceil(now / 1000) * 1000 + 2000;
  const due = bareDue + 3000;
  const fired = new Map<string, number>();
  const runs = new PlaybookRuns(h.db, h.sqlite);
  const service = new Playbooks({
    db: h.db,
    sealer,
    log: silentLogger,
    now: Date.now,
    publicUrl: "http://127.0.0.1",
    runs,
    profiles: { get: () => ({}) as never },
    // The task queue's transaction, without the session's container: the claim runs in it, and its time is the fire time.
    orchestrator: {
      async submit(_user, input, hooks?: SubmitHooks) {
        await transact(h.db, function* (tx) {
          if (hooks?.inTransaction) yield* hooks.inTransaction(tx, {} as never);
        });
        hooks?.onSession?.("sess_x");
        if (!fired.has(input.run!.playbookId)) fired.set(input.run!.playbookId, Date.now());
        return { task: { id: "task_x" } as never, session: { id: "sess_x" } as never };
      },
    },
    notifications: {
      *playbookRunEnded() {
        return null;
      },
      wake() {},
    },
  });
  h.db.transaction((tx) => {
    for (let i = 0; i < count; i++) {
      tx.insert(playbooks)
        .values({ id: newId("playbook"), user_id: "usr_bench", profile_id: "prof_bench", name: `p${i}`, prompt: "p", schedule: "* * * * * *", timezone: "UTC", enabled: true, trigger_ciphertext: sealer.seal("s", "x"), next_run_at: due, created_at: now, updated_at: now })
        .run();
    }
  });
  const scheduler = new PlaybookScheduler(service, silentLogger);
  await scheduler.start();

  // The baseline: as many bare croner timers, firing once on one second.
  const bare: number[] = [];
  const timers = Array.from({ length: count }, () => new Cron(new Date(bareDue), () => void bare.push(Date.now() - bareDue)));
  await Bun.sleep(due - Date.now() + 1500);
  scheduler.stop();
  for (const t of timers) t.stop();
  h.close();
  rmSync(dir, { recursive: true, force: true });
  const ours = [...fired.values()].map((t) => t - due);
  return { ours, bare, count, firedAll: fired.size === count };
}

// ---------------------------------------------------------------------------------------------
// 2. Cost at rest

function procStat(pid: number) {
  const stat = require("node:fs").readFileSync(`/proc/${pid}/stat`, "utf8") as string;
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(f[11]) + Number(f[12]);
  const status = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string;
  const switches = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1]) + Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1]);
  return { cpuMs: (ticks * 1000) / 100, switches };
}

async function idleCost(withPlaybooks: number) {
  const dir = tempDir("runcell-bench-pb-idle-");
  const h = openDatabase(join(dir, "runcell.db"));
  migrate(h.sqlite);
  const sealer = Sealer.fromDataDir(dir);
  const now = Date.now();
  if (withPlaybooks) {
    h.sqlite.run("INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_bench', 'b@example.com', 'b', 'user', 0, 1, ?, ?)", [now, now]);
    h.db.transaction((tx) => {
      for (let i = 0; i < withPlaybooks; i++) {
        // Due at some minute of the next hour.
        const at = now + 3_600_000 + (i % 60) * 60_000;
        tx.insert(playbooks)
          .values({ id: newId("playbook"), user_id: "usr_bench", profile_id: "prof_bench", name: `p${i}`, prompt: "p", schedule: `${i % 60} * * * *`, timezone: "UTC", enabled: true, trigger_ciphertext: sealer.seal("s", "x"), next_run_at: at, created_at: now, updated_at: now })
          .run();
      }
    });
  }
  h.close();
  const port = await freePort();
  const proc = Bun.spawn(["bun", join(ROOT, "src/main.ts"), "serve", "--data-dir", dir, "--http", `127.0.0.1:${port}`, "--log-level", "error", "--workspace-image", IMAGE], { cwd: ROOT, stdout: "ignore", stderr: "ignore" });
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
    } catch {
      // starting
    }
    await Bun.sleep(50);
  }
  await Bun.sleep(3000); // past start-up work (reconciliation, first probes)
  const a = procStat(proc.pid);
  await Bun.sleep(IDLE_S * 1000);
  const b = procStat(proc.pid);
  proc.kill("SIGTERM");
  await proc.exited;
  rmSync(dir, { recursive: true, force: true });
  const perMin = 60 / IDLE_S;
  return { cpuMsPerMin: (b.cpuMs - a.cpuMs) * perMin, wakesPerMin: (b.switches - a.switches) * perMin };
}

// ---------------------------------------------------------------------------------------------
// 3. Trigger latency

async function triggerLatency() {
  const mock = startMockAnthropic().script(() => ({ text: "ok" }));
  const dir = tempDir("runcell-bench-pb-hook-");
  const config = resolveConfig(parseArgs(["--data-dir", dir, "--http", `127.0.0.1:${await freePort()}`, "--workspace-image", IMAGE, "--log-level", "error", "--rate-limit-per-minute", "1000000", "--rate-limit-burst", "1000000"]).flags, {});
  const app = await createApp(config, { logger: silentLogger });
  await app.start();
  const s = app.services;
  const user = await s.users.create({ email: `bench-${Date.now()}@example.com`, name: "bench", password: "correct horse battery", role: "admin" });
  const token = (await s.tokens.create(user.id, "bench")).token;
  const profile = await s.profiles.create(user.id, { name: "bench", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: IMAGE, network: "none", limits: { max_concurrency: 1000 } });
  const pb = await s.playbooks.create(user.id, { name: "bench", profile_id: profile.id, prompt: "hi" });
  const hookUrl = pb.trigger_url.replace(config.publicUrl, app.url);
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const sessions: string[] = [];
  const time = async (f: () => Promise<Response>) => {
    const t0 = performance.now();
    const r = await f();
    const ms = performance.now() - t0;
    if (r.status !== 202) throw new Error(`expected 202, got ${r.status}: ${await r.text()}`);
    const body = (await r.json()) as { task_id: string };
    sessions.push((await s.tasks.byId(body.task_id))!.session_id);
    return ms;
  };
  const hook = () => time(() => fetch(hookUrl, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }));
  const task = () => time(() => fetch(`${app.url}/v1/tasks`, { method: "POST", headers, body: JSON.stringify({ profile_id: profile.id, prompt: "hi" }) }));
  const out = { hook: [] as number[], task: [] as number[] };
  try {
    await hook();
    await task();
    for (let i = 0; i < N; i++) {
      if (i % 2) {
        out.hook.push(await hook());
        out.task.push(await task());
      } else {
        out.task.push(await task());
        out.hook.push(await hook());
      }
      // Keep the engine's load the same for both: remove the sessions made so far.
      for (const sid of sessions.splice(0)) await s.sessionLifecycle.delete(user.id, sid).catch(() => {});
    }
  } finally {
    await app.stop();
    await mock.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

const p = await precision();
console.log(`playbooks benchmark`);
console.log(`1. schedule precision, ${p.count} playbooks due in the same second (fire − due)${p.firedAll ? "" : " — NOT ALL FIRED"}`);
console.log(`   bare croner timers   p50 ${fmt(quantile(p.bare, 0.5))}   p99 ${fmt(quantile(p.bare, 0.99))}`);
console.log(`   runcell scheduler    p50 ${fmt(quantile(p.ours, 0.5))}   p99 ${fmt(quantile(p.ours, 0.99))}`);
const over = quantile(p.ours, 0.99) - quantile(p.bare, 0.99);
console.log(`   p99 over the bare timers: ${fmt(over)} (goal ≤ 100 ms) ${over <= 100 ? "MET" : "NOT MET"}`);

const empty = await idleCost(0);
const loaded = await idleCost(10_000);
console.log(`2. scheduler cost at rest over ${IDLE_S} s, 10,000 playbooks due in an hour vs an empty database`);
report("   CPU time per minute", loaded.cpuMsPerMin, Math.max(1, empty.cpuMsPerMin), "ms", "≤1.1×", "lower");
report("   wake-ups (context switches) per minute", loaded.wakesPerMin, Math.max(1, empty.wakesPerMin), "", "≤1.1×", "lower");

const l = await triggerLatency();
console.log(`3. POST /hooks/playbooks/… vs POST /v1/tasks (both → 202 with a started container), ${N} rounds interleaved`);
console.log(`   POST /v1/tasks       p50 ${fmt(quantile(l.task, 0.5))}   p99 ${fmt(quantile(l.task, 0.99))}`);
console.log(`   POST trigger URL     p50 ${fmt(quantile(l.hook, 0.5))}   p99 ${fmt(quantile(l.hook, 0.99))}`);
report("   trigger p50", quantile(l.hook, 0.5), quantile(l.task, 0.5), "ms", "≤1.2×", "lower");
report("   trigger p99", quantile(l.hook, 0.99), quantile(l.task, 0.99), "ms", "≤1.2×", "lower");
