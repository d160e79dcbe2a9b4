/**
 * Issue 4 benchmark: relay overhead. A local server speaking Anthropic's streaming format sends
 * 2,000 text tokens (1 ms apart) and records when it wrote each one. The same stream is read
 * (a) directly, with fetch and a minimal SSE parser, and (b) through runcell — provider, loop,
 * event log, hub, WebSocket — by a subscriber on /v1/stream. For each token: latency = arrival
 * − write time. Reported: the added latency (relay − direct) at p50 and p99, per token.
 * Goal: added p99 < 2 ms per token.
 */
import { startTestApp } from "../test/helpers/app.ts";
import { createUser } from "../test/helpers/users.ts";
import { median, quantile } from "./lib/util.ts";

const TOKENS = Number(process.env.BENCH_TOKENS ?? 2000);
const SPACING_MS = 1;

/** The writes of the current stream: token index → performance.now() when written. */
let sentAt: number[] = [];

const enc = new TextEncoder();
const sse = (event: string, data: unknown) => enc.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

const provider = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    if (!new URL(req.url).pathname.endsWith("/v1/messages")) return new Response("not found", { status: 404 });
    sentAt = [];
    const stream = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(sse("message_start", { type: "message_start", message: { id: "msg_bench", type: "message", role: "assistant", model: "claude-sonnet-4-6", content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 0 } } }));
        c.enqueue(sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }));
        for (let i = 0; i < TOKENS; i++) {
          await Bun.sleep(SPACING_MS);
          sentAt[i] = performance.now();
          c.enqueue(sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `t${i} ` } }));
        }
        c.enqueue(sse("content_block_stop", { type: "content_block_stop", index: 0 }));
        c.enqueue(sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: TOKENS } }));
        c.enqueue(sse("message_stop", { type: "message_stop" }));
        c.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  },
});
const base = `http://127.0.0.1:${provider.port}`;

/** (a) Directly: fetch + a minimal SSE parser; arrival time of each token. */
async function direct(): Promise<number[]> {
  const arrived: number[] = [];
  const res = await fetch(`${base}/v1/messages`, { method: "POST", body: "{}" });
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at: number;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const data = block.split("\n").find((l) => l.startsWith("data: "));
      if (!data) continue;
      const ev = JSON.parse(data.slice(6));
      if (ev.type === "content_block_delta") arrived[Number(ev.delta.text.slice(1))] = performance.now();
    }
  }
  return arrived;
}

/** (b) Through runcell, to a WebSocket subscriber. */
async function relayed(t: Awaited<ReturnType<typeof startTestApp>>, token: string, profileId: string): Promise<number[]> {
  const arrived: number[] = [];
  const ws = new WebSocket(`${t.wsUrl}/v1/stream`, [`Bearer.${token}`]);
  await new Promise((r) => ws.addEventListener("open", r, { once: true }));
  const done = new Promise<void>((resolve) => {
    ws.addEventListener("message", (m) => {
      const f = JSON.parse(m.data as string);
      if (f.type === "task:token") arrived[Number(f.text.slice(1))] = performance.now();
      if (f.type === "task:done" || f.type === "task:failed") resolve();
    });
  });
  ws.send(JSON.stringify({ type: "task.submit", profile_id: profileId, prompt: "stream" }));
  await done;
  ws.close();
  return arrived;
}

const latencies = (arrived: number[]) => arrived.map((a, i) => a - sentAt[i]!);

const t = await startTestApp({ flags: ["--log-level", "error"] });
try {
  const user = await createUser(t);
  const r = await fetch(`${t.url}/v1/profiles`, {
    method: "POST",
    headers: user.bearer,
    body: JSON.stringify({ name: "relay", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: base }, image: t.config.workspaceImage, network: "none", tools: [], limits: { max_concurrency: 50 } }),
  });
  const profile = (await r.json()) as { id: string };
  const added50: number[] = [];
  const added99: number[] = [];
  let lastDirect: number[] = [];
  let lastRelay: number[] = [];
  for (let round = 0; round < 3; round++) {
    lastDirect = latencies(await direct());
    lastRelay = latencies(await relayed(t, user.token, profile.id));
    added50.push(quantile(lastRelay, 0.5) - quantile(lastDirect, 0.5));
    added99.push(quantile(lastRelay, 0.99) - quantile(lastDirect, 0.99));
  }
  console.log(`# relay benchmark (${TOKENS} tokens, ${SPACING_MS} ms apart, 3 rounds) — ${new Date().toISOString()}`);
  console.log(`direct read      per-token latency p50 ${quantile(lastDirect, 0.5).toFixed(3)} ms  p99 ${quantile(lastDirect, 0.99).toFixed(3)} ms`);
  console.log(`through runcell  per-token latency p50 ${quantile(lastRelay, 0.5).toFixed(3)} ms  p99 ${quantile(lastRelay, 0.99).toFixed(3)} ms`);
  const a99 = median(added99);
  console.log(`added by the relay (median of rounds): p50 ${median(added50).toFixed(3)} ms, p99 ${a99.toFixed(3)} ms per token (goal p99 < 2 ms) ${a99 < 2 ? "MET" : "NOT MET"}  [rounds p99: ${added99.map((x) => x.toFixed(2)).join(", ")}]`);
} finally {
  await t.stop();
  provider.stop(true);
}
