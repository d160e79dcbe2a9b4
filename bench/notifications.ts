/**
 * Notifications benchmark, two parts, in one run:
 *  1. Throughput: 1,000 notifications through the whole pipeline (enqueue → outbox row → leased
 *     claim → signed POST → outcome recorded) to a local receiver, against a plain `fetch` loop
 *     posting the very same bodies and headers to an identical receiver (the baseline, measured in
 *     the same run, rounds interleaved; its own receiver so the pipeline's pooled connections do
 *     not slow it down). The clock runs from the first enqueue to the last outcome written. Two
 *     producer shapes: 1,000 enqueues in one transaction (a batch producer), and one commit per
 *     notification (what POST /v1/notifications does). Goal: ≥ 0.5× the baseline's rate.
 *  2. The real retry schedule (5 s, 15 s, 45 s; attempts raised to 4 so the 45 s wait is used)
 *     against a receiver that always answers 500: measured waits vs the schedule. Goal: ±1 s.
 *     Takes ~66 s; BENCH_RETRY=0 skips it.
 * Run: bun bench/notifications.ts   (prints figures and ratios; asserts nothing)
 */
import { rmSync } from "node:fs";
import { type App, createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { transact } from "../src/db/unit.ts";
import { silentLogger } from "../src/log.ts";
import { buildPayload } from "../src/notifications/payload.ts";
import { signatureHeader } from "../src/notifications/sign.ts";
import { USER_AGENT } from "../src/version.ts";
import { tempDir } from "../test/helpers/app.ts";
import { freePort } from "../test/helpers/net.ts";

const N = Number(process.env.BENCH_N ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECRET = "whsec_bench_secret";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function startApp(flags: string[]): Promise<{ app: App; dir: string }> {
  const dir = tempDir("runcell-bench-ntf-");
  const config = resolveConfig(parseArgs(["--data-dir", dir, "--http", `127.0.0.1:${await freePort()}`, "--allow-private-webhooks", "--log-level", "error", ...flags]).flags, {});
  const app = await createApp(config, { logger: silentLogger });
  await app.start();
  return { app, dir };
}

async function userWithWebhook(app: App, url: string, n: number) {
  const s = app.services;
  const user = await s.users.create({ email: `bench${n}-${Date.now()}@example.com`, name: "bench", password: "correct horse battery" });
  await s.notifications.integrations.upsert(user.id, { type: "webhook", config: { url, secret: SECRET } });
  return user.id;
}

// ---------------------------------------------------------------------------------------------
// 1. Throughput

let received = 0;
const startReceiver = () =>
  Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      await req.arrayBuffer();
      received++;
      return new Response("ok");
    },
  });
const receiver = startReceiver();
const baselineReceiver = startReceiver();
const url = `http://127.0.0.1:${receiver.port}/hook`;
const baselineUrl = `http://127.0.0.1:${baselineReceiver.port}/hook`;
const bodies = Array.from({ length: N }, (_, i) => buildPayload({ urgency: "normal", message: `job ${i} finished`, source: "agent", sentAt: Date.now(), taskId: null, playbookId: null }));

/** The baseline: one request after another with fetch, the same bodies and headers. */
async function baseline(): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const res = await fetch(baselineUrl, {
      method: "POST",
      body: bodies[i],
      headers: { "content-type": "application/json", "user-agent": USER_AGENT, "x-service-delivery": `ntf_${i}`, "x-service-signature": signatureHeader(SECRET, bodies[i]!, Date.now()) },
    });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`baseline got ${res.status}`);
  }
  return (N / (performance.now() - t0)) * 1000;
}

/** runcell: enqueue N notifications and wait until all N are delivered and recorded. */
async function pipeline(app: App, userId: string, oneTransaction: boolean): Promise<{ perSec: number; enqueueUs: number }> {
  const s = app.services;
  let delivered = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  s.notifications.worker.onSettled = (_id, kind) => {
    if (kind === "delivered" && ++delivered === N) done();
    else if (kind !== "delivered") throw new Error(`a delivery ended ${kind}`);
  };
  const t0 = performance.now();
  if (oneTransaction) {
    // enqueue with a transaction is a unit (src/db/unit.ts): run inside the caller's transaction, then wake the worker.
    await transact(s.db, function* (tx) {
      for (let i = 0; i < N; i++) yield* s.notifications.enqueue({ userId, source: "agent", message: `job ${i} finished` }, tx);
    });
    s.notifications.wake();
  } else for (let i = 0; i < N; i++) await s.notifications.enqueue({ userId, source: "agent", message: `job ${i} finished` });
  const enqueueUs = ((performance.now() - t0) * 1000) / N;
  await finished;
  const perSec = (N / (performance.now() - t0)) * 1000;
  s.notifications.worker.onSettled = null;
  return { perSec, enqueueUs };
}

const { app, dir } = await startApp([]);
const userId = await userWithWebhook(app, url, 0);
// Warm-up of both paths (JIT, connection pool, prepared statements).
await baseline();
await pipeline(app, userId, true);

const base: number[] = [];
const batch: number[] = [];
const single: number[] = [];
const enqBatch: number[] = [];
const enqSingle: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  base.push(await baseline());
  const a = await pipeline(app, userId, true);
  batch.push(a.perSec);
  enqBatch.push(a.enqueueUs);
  const b = await pipeline(app, userId, false);
  single.push(b.perSec);
  enqSingle.push(b.enqueueUs);
}
const pending = app.services.sqlite!.query<{ n: number }, []>("SELECT count(*) AS n FROM notification_log WHERE status != 'delivered'").get()!.n;
await app.stop();
rmSync(dir, { recursive: true, force: true });
receiver.stop(true);
baselineReceiver.stop(true);

// A sequential loop is a ping-pong: on a busy machine every round trip waits for the scheduler,
// so its rate is bimodal. Ratios are given against its median and, conservatively, its best round.
const b = median(base);
const best = Math.max(...base);
const rounds = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(", ");
const vs = (x: number) => `${(x / b).toFixed(2)}× median, ${(x / best).toFixed(2)}× best`;
console.log(`\n1. Throughput, ${N} notifications to a local receiver (${ROUNDS} interleaved rounds; medians)`);
console.log(`   baseline fetch loop             : ${b.toFixed(0)} POST/s, best ${best.toFixed(0)}   (rounds: ${rounds(base)})`);
console.log(`   runcell, enqueued in one tx     : ${median(batch).toFixed(0)} deliveries/s = ${vs(median(batch))}   (rounds: ${rounds(batch)}; enqueue ${median(enqBatch).toFixed(1)} µs each)`);
console.log(`   runcell, one commit per enqueue : ${median(single).toFixed(0)} deliveries/s = ${vs(median(single))}   (rounds: ${rounds(single)}; enqueue ${median(enqSingle).toFixed(1)} µs each)`);
console.log(`   goal ≥ 0.5×; rows not delivered: ${pending}; requests received: ${received}`);

// ---------------------------------------------------------------------------------------------
// 2. The real retry schedule

if (process.env.BENCH_RETRY !== "0") {
  const arrivals: number[] = [];
  const failing = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch() {
      arrivals.push(performance.now());
      return new Response("down", { status: 500 });
    },
  });
  const { app: app4, dir: dir4 } = await startApp(["--webhook-attempts", "4"]);
  const userId = await userWithWebhook(app4, `http://127.0.0.1:${failing.port}/hook`, 99);
  const schedule = app4.config.webhook.backoffMs;
  console.log(`\n2. Real-time retry schedule: 4 attempts, waits ${schedule.map((w) => w / 1000 + " s").join(", ")} (takes ~${Math.round(schedule.reduce((a, c) => a + c, 0) / 1000) + 1} s)`);
  const { id } = (await app4.services.notifications.enqueue({ userId, source: "agent", message: "retry timing" }))!;
  const t0 = performance.now();
  for (;;) {
    await Bun.sleep(250);
    if ((await app4.services.notifications.get(userId, id)).status !== "pending") break;
  }
  const final = await app4.services.notifications.get(userId, id);
  await app4.stop();
  rmSync(dir4, { recursive: true, force: true });
  failing.stop(true);
  console.log(`   first attempt after enqueue: ${(arrivals[0]! - t0).toFixed(1)} ms`);
  for (let i = 1; i < arrivals.length; i++) {
    const gap = arrivals[i]! - arrivals[i - 1]!;
    const want = schedule[Math.min(i - 1, schedule.length - 1)]!;
    console.log(`   wait ${i}: ${(gap / 1000).toFixed(3)} s vs ${want / 1000} s → ${gap - want >= 0 ? "+" : ""}${(gap - want).toFixed(1)} ms (${(gap / want).toFixed(4)}×; goal ±1 s)`);
  }
  console.log(`   attempts: ${arrivals.length}; final: ${final.status} after ${final.attempts} attempts, last_error ${JSON.stringify(final.last_error)}`);
}
