/**
 * bench/memory.ts part 3, run in a bare Bun process of its own: N concurrent Anthropic-format
 * streams from the benchmark's mock, read through the Anthropic SDK's stream iterator
 * (`messages.create({ stream: true })`: `sdk`), the way runcell's provider reads them (the SDK's
 * raw response, `.asResponse()`, and src/agents/providers/sse.ts: `runcell`), or by a plain
 * `fetch` reader and a TextDecoder (the bytes alone: `fetch`). Prints one JSON line: the text
 * read, this process's RSS when idle and its peak while reading (sampled every 50 ms).
 * Run: bun bench/lib/sdk-stream-client.ts <mock url> sdk|runcell|fetch <streams> <characters per stream>
 */
import Anthropic from "@anthropic-ai/sdk";
import { readServerSentEvents } from "../../src/agents/providers/sse.ts";

const [url, mode, n, size] = [process.argv[2]!, process.argv[3]!, Number(process.argv[4] ?? 40), Number(process.argv[5] ?? 262144)];
const rss = () => process.memoryUsage().rss;
Bun.gc(true);
await Bun.sleep(300);
const idle = rss();
let peak = idle;
const timer = setInterval(() => (peak = Math.max(peak, rss())), 50);
const client = new Anthropic({ apiKey: "bench", baseURL: url, maxRetries: 0 });
let text = 0;
let bytes = 0;

async function one(i: number) {
  const params = { model: "bench", max_tokens: 100, stream: true as const, messages: [{ role: "user" as const, content: `${size}:${i}` }] };
  if (mode === "sdk") {
    for await (const ev of await client.messages.create(params)) if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text.length;
    return;
  }
  if (mode === "runcell") {
    const response = await client.messages.create(params).asResponse();
    await readServerSentEvents(response.body!, (event, data) => {
      if (event === null || event === "ping" || !data) return;
      const ev = JSON.parse(data);
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text.length;
    });
    return;
  }
  const r = await fetch(`${url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": "bench", "anthropic-version": "2023-06-01" }, body: JSON.stringify(params) });
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.length;
    decoder.decode(value, { stream: true });
  }
}

await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
clearInterval(timer);
peak = Math.max(peak, rss());
console.log(JSON.stringify({ mode, text, bytes, idle, peak }));
