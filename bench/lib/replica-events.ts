/**
 * Events/s end to end with the subscriber on another replica (issue 17), against the same with
 * the subscriber on the replica that runs the task, in the same run.
 *
 * Two replicas from source on one fresh PostgreSQL database (test/helpers/replicas.ts) and a
 * local Anthropic-format server streaming M text chunks (BENCH_REPLICA_CHUNKS, default 200,000) as
 * fast as it can. Each round submits a task through replica A into a session already watched by
 * a WebSocket on A ("same") or on B ("other"), and times submission → that socket's task:done;
 * events/s = the provider's chunks / that time, and the frames the socket got are counted too.
 * Rounds alternate same, other, same, other… (BENCH_REPLICA_ROUNDS, default 5 each); reported:
 * medians and other/same. Goal ≥ 0.7×. Never fails on timing.
 */
import { startMockAnthropic } from "../../test/helpers/mock-anthropic.ts";
import { startReplicas } from "../../test/helpers/replicas.ts";
import { median } from "./util.ts";

const CHUNKS = Number(process.env.BENCH_REPLICA_CHUNKS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_REPLICA_ROUNDS ?? 5);
const IMAGE = process.env.BENCH_IMAGE ?? "runcell-test/busybox:latest";

export async function replicaEvents(pgServer: string): Promise<void> {
  const mock = startMockAnthropic();
  const r = await startReplicas(2, { server: pgServer });
  try {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    const api = async (url: string, method: string, path: string, body?: unknown) => {
      const res = await fetch(url + path, { method, headers: r.headers, body: body === undefined ? undefined : JSON.stringify(body) });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.status === 204 ? null : res.json();
    };
    const profile = await api(a.url, "POST", "/v1/profiles", {
      name: "events",
      model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url },
      image: IMAGE,
      network: "none",
      tools: [],
    });
    console.log(`\nevents/s with the subscriber on the other replica (2 replicas on one PostgreSQL, ${CHUNKS} chunks a task, ${ROUNDS} rounds each):`);
    const rates = { same: [] as number[], other: [] as number[] };

    /** One measured task: submitted through A into a session a socket on `watch` already follows. */
    const round = async (key: "same" | "other", measured: boolean) => {
      const watch = key === "same" ? a : b;
      mock.enqueue({ text: "ready" });
      const opened = await api(a.url, "POST", "/v1/tasks", { profile_id: profile.id, prompt: "open" });
      const ws = new WebSocket(`${watch.url.replace(/^http/, "ws")}/v1/stream`, [`Bearer.${r.token}`]);
      await new Promise((res, rej) => {
        ws.addEventListener("open", res, { once: true });
        ws.addEventListener("error", rej, { once: true });
      });
      let frames = 0;
      let firstDone: (() => void) | null = null;
      let measuredDone: ((t: number) => void) | null = null;
      let measuredTask = "";
      ws.addEventListener("message", (m) => {
        const f = JSON.parse(m.data as string);
        if (f.type === "task:token" && f.task_id === measuredTask) frames++;
        if (f.type !== "task:done" && f.type !== "task:failed") return;
        if (f.task_id === opened.task_id) firstDone?.();
        else if (f.task_id === measuredTask) measuredDone?.(performance.now());
      });
      const opening = new Promise<void>((res) => (firstDone = res));
      ws.send(JSON.stringify({ type: "session.resume", session_id: opened.session_id, after: 0 }));
      await opening;
      mock.enqueue({ text: Array.from({ length: CHUNKS }, (_, i) => `c${i} `) });
      const done = new Promise<number>((res) => (measuredDone = res));
      const t0 = performance.now();
      measuredTask = (await api(a.url, "POST", "/v1/tasks", { session_id: opened.session_id, prompt: "stream" })).task_id;
      const t1 = await done;
      ws.close();
      await api(a.url, "DELETE", `/v1/sessions/${opened.session_id}`);
      const rate = CHUNKS / ((t1 - t0) / 1000);
      if (!measured) return;
      rates[key].push(rate);
      console.log(`  ${key === "same" ? "same replica " : "other replica"} ${rate.toFixed(0).padStart(7)} chunks/s (${((t1 - t0) / 1000).toFixed(2)} s, ${frames} task:token frames)`);
    };
    // One unmeasured round each: the first task's workspace, JIT and page cache.
    await round("same", false);
    await round("other", false);
    for (let i = 0; i < ROUNDS; i++) {
      await round("same", true);
      await round("other", true);
    }
    const ratio = median(rates.other) / median(rates.same);
    console.log(`  median: same ${median(rates.same).toFixed(0)}/s, other ${median(rates.other).toFixed(0)}/s = ${ratio.toFixed(2)}× (goal ≥ 0.7×: ${ratio >= 0.7 ? "MET" : "NOT MET"})`);
  } finally {
    await r.stop();
    mock.stop();
  }
}
