/**
 * Issue 13 benchmark: opening a long session in the dashboard. A session of 10,000 stored events
 * (500 turns of streamed text, a tool call with its result, turn.done and task:done) is opened in
 * Debian's headless Chromium: from navigation to /sessions/<id> until the last turn's answer is
 * rendered (goal ≤ 1 s). The baseline, in the same browser and run: a page of the same origin
 * that opens /v1/stream, resumes the session from 0 and only counts frames until replay_end —
 * the transport with no rendering. The ratio is the dashboard's cost over the bare replay.
 * Also prints the dashboard's gzipped JavaScript against its 80 KB budget.
 */
import bundle from "../web/dist/bundle.json" with { type: "json" };
import { startTestApp } from "../test/helpers/app.ts";
import { launchBrowser } from "../test/helpers/browser.ts";
import { createUser } from "../test/helpers/users.ts";
import { median } from "./lib/util.ts";

const TURNS = 500;
const ROUNDS = 5;

console.log(`# dashboard benchmarks — ${new Date().toISOString()}`);
const t = await startTestApp({ flags: ["--log-level", "error"] });
const s = t.app.services;
const user = await createUser(t);
const sid = "sess_bench_dashboard";
s.sqlite!.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, 'prof_bench', 0, 0)", [sid, user.id]);
let events = 0;
const publish = (f: Record<string, unknown>) => {
  s.hub.publish(sid, f as never);
  events++;
};
for (let turn = 0; turn < TURNS; turn++) {
  const task_id = `task_bench_${String(turn).padStart(4, "0")}`; // ids sort in time order, as real ones do
  for (let i = 0; i < 16; i++) publish({ type: "task:token", session_id: sid, task_id, text: `Word ${i} of turn ${turn}, with **some** markdown. ` });
  publish({ type: "task:tool_use", session_id: sid, task_id, tool: "Bash", tool_use_id: `tu_${turn}`, input: { command: `echo ${turn}` } });
  publish({ type: "task:tool_result", session_id: sid, task_id, tool: "Bash", tool_use_id: `tu_${turn}`, output: `${turn}\n`, is_error: false });
  publish({ type: "turn.done", session_id: sid, task_id, result_text: `## Turn ${turn}\n\nThe final answer of turn ${turn}.`, input_tokens: 100, output_tokens: 50, cost_usd: 0.001 });
  publish({ type: "task:done", session_id: sid, task_id, status: "completed" });
}
s.eventLog.flush();

const browser = await launchBrowser();
const context = await browser.newContext();
const [name, value] = user.cookie.split("=") as [string, string];
await context.addCookies([{ name, value, url: t.url }]);
const page = await context.newPage();

const lastAnswer = `The final answer of turn ${TURNS - 1}.`;
async function openDashboard(): Promise<number> {
  await page.goto(`${t.url}/docs`); // leave the session page, same origin
  const started = performance.now();
  await page.goto(`${t.url}/sessions/${sid}`);
  await page.waitForFunction((text) => document.body.textContent!.includes(text), lastAnswer, { polling: "raf", timeout: 20_000 }).catch(async (e) => {
    console.log((await page.innerText("body")).slice(-1500));
    throw e;
  });
  return performance.now() - started;
}
async function bareReplay(): Promise<number> {
  await page.goto(`${t.url}/docs`);
  const started = performance.now();
  const frames = await page.evaluate(
    (sessionId) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${location.origin.replace(/^http/, "ws")}/v1/stream`);
        let n = 0;
        ws.onopen = () => ws.send(JSON.stringify({ type: "session.resume", session_id: sessionId, after: 0 }));
        ws.onmessage = (m) => {
          n++;
          if (JSON.parse(m.data as string).type === "session.replay_end") {
            ws.close();
            resolve(n);
          }
        };
        ws.onerror = () => reject(new Error("socket error"));
      }),
    sid,
  );
  if (frames < events) throw new Error(`replay returned ${frames} frames, expected ${events}+`);
  return performance.now() - started;
}

// Warm both paths (the browser's caches, the server's statements), then alternate.
await openDashboard();
await bareReplay();
const dash: number[] = [];
const bare: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  bare.push(await bareReplay());
  dash.push(await openDashboard());
}
console.log(`session of ${events} events, ${ROUNDS} rounds each`);
const d = median(dash);
const b = median(bare);
console.log(
  `open a ${events}-event session: dashboard ${d.toFixed(0)} ms, bare replay ${b.toFixed(0)} ms, ratio ${(d / b).toFixed(2)}× ` +
    `(the rendering's cost over the transport; goal: dashboard ≤ 1000 ms, ${d <= 1000 ? "MET" : "NOT MET"})`,
);
console.log(`  rounds: dashboard ${dash.map((x) => x.toFixed(0)).join(", ")} ms; bare ${bare.map((x) => x.toFixed(0)).join(", ")} ms`);

const built = bundle as { assets: Record<string, { body: string }> };
const js = Object.entries(built.assets).filter(([n]) => n.endsWith(".js"));
const gz = js.reduce((n, [, a]) => n + Bun.gzipSync(new TextEncoder().encode(a.body)).length, 0);
console.log(`dashboard JavaScript: ${(gz / 1024).toFixed(1)} KB gzipped of the 80 KB budget (${((gz / 81920) * 100).toFixed(0)}%)`);

await browser.close();
await t.stop();
process.exit(0);
