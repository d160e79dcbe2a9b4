/**
 * What a provider adds per streamed token: a local wire-format server streams 2,000 tokens; we time
 * from the server's first SSE frame to the last text event reaching onEvent, through our provider
 * (official SDK + our event handling + retry wrapper), against reading the very same stream with
 * fetch and a minimal SSE parser, in the same run (runs interleaved, paired).
 * Run: bun bench/providers.ts   (prints per-token µs p50/p99, ratios and the added µs; asserts nothing)
 */
import { anthropicParams } from "../src/agents/providers/anthropic.ts";
import { openaiParams } from "../src/agents/providers/openai.ts";
import { getProvider, type ModelRequest, type Provider } from "../src/agents/providers/index.ts";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../test/helpers/mock-openai.ts";
import type { MockProviderServer } from "../test/helpers/mock-provider.ts";

const TOKENS = 2000;
const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const WARMUP = 5;
const pieces = Array.from({ length: TOKENS }, (_, i) => (i % 12 === 11 ? `tok${i}.\n` : ` tok${i}`));

/** Minimal SSE reader: split frames, JSON.parse each data line, call onText for each text delta. */
async function readDirect(res: Response, textOf: (obj: any) => string | undefined, onText: (t: string) => void): Promise<void> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const line = frame.split("\n").find((l) => l.startsWith("data: "));
      if (!line || line === "data: [DONE]") continue;
      const t = textOf(JSON.parse(line.slice(6)));
      if (t) onText(t);
    }
  }
}

interface Case {
  name: string;
  mock: MockProviderServer;
  provider: Provider;
  endpoint: string;
  body: (req: ModelRequest) => unknown;
  textOf: (obj: any) => string | undefined;
}

/** µs per token from the server's first frame to the last text event, for one run. */
async function once(c: Case, direct: boolean): Promise<number> {
  c.mock.reset();
  c.mock.enqueue({ text: pieces, usage: { input_tokens: 20, output_tokens: TOKENS } });
  const req: ModelRequest = { model: "bench-model", system: "s", messages: [{ role: "user", content: [{ type: "text", text: "go" }] }], tools: [], maxTokens: 4096, baseUrl: c.mock.url, apiKey: "k" };
  let last = 0;
  let n = 0;
  const onText = () => {
    n++;
    last = performance.now();
  };
  if (direct) {
    const res = await fetch(c.endpoint, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer k" }, body: JSON.stringify(c.body(req)) });
    await readDirect(res, c.textOf, onText);
  } else {
    await c.provider.complete(req, (e) => e.type === "text" && onText());
  }
  if (n !== TOKENS) throw new Error(`${c.name}: expected ${TOKENS} text events, got ${n}`);
  const first = c.mock.timings[0]!.firstFrameAt!;
  return ((last - first) * 1000) / TOKENS;
}

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))]!;
};

const anthropic = startMockAnthropic();
const openai = startMockOpenAI();
const cases: Case[] = [
  {
    name: "anthropic (Messages SSE)",
    mock: anthropic,
    provider: getProvider("anthropic"),
    endpoint: `${anthropic.url}/v1/messages`,
    body: anthropicParams,
    textOf: (o) => (o.type === "content_block_delta" && o.delta.type === "text_delta" ? o.delta.text : undefined),
  },
  {
    name: "openai (Chat Completions SSE)",
    mock: openai,
    provider: getProvider("openai"),
    endpoint: `${openai.url}/chat/completions`,
    body: openaiParams,
    textOf: (o) => o.choices?.[0]?.delta?.content || undefined,
  },
];

try {
  console.log(`providers: ${TOKENS} tokens per response, ${RUNS} paired runs each (server's first frame → last text event)\n`);
  for (const c of cases) {
    for (let i = 0; i < WARMUP; i++) {
      await once(c, true);
      await once(c, false);
    }
    const direct: number[] = [];
    const ours: number[] = [];
    const added: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // Alternate which goes first so neither always runs on a warmer process.
      let d: number;
      let p: number;
      if (i % 2) {
        d = await once(c, true);
        p = await once(c, false);
      } else {
        p = await once(c, false);
        d = await once(c, true);
      }
      direct.push(d);
      ours.push(p);
      added.push(p - d);
    }
    console.log(c.name);
    console.log(`  direct fetch + minimal parser  p50 ${pct(direct, 0.5).toFixed(2)} µs/token   p99 ${pct(direct, 0.99).toFixed(2)} µs/token`);
    console.log(`  through the provider           p50 ${pct(ours, 0.5).toFixed(2)} µs/token   p99 ${pct(ours, 0.99).toFixed(2)} µs/token`);
    console.log(`  ratio (provider / direct)      p50 ${(pct(ours, 0.5) / pct(direct, 0.5)).toFixed(2)}×   p99 ${(pct(ours, 0.99) / pct(direct, 0.99)).toFixed(2)}×`);
    console.log(`  added per token                p50 ${pct(added, 0.5).toFixed(2)} µs   p99 ${pct(added, 0.99).toFixed(2)} µs   (goal for the full relay: p99 < 2000 µs)\n`);
  }
} finally {
  await anthropic.stop();
  await openai.stop();
}
