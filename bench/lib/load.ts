/**
 * HTTP load generator, run as its own process so it never shares an event loop with the server
 * under test: `bun bench/lib/load.ts <url> <concurrency> <seconds>` prints one JSON line
 * {requests, errors, rps, p50_ms, p99_ms}. Keep-alive connections (Bun's fetch pool).
 */
export {};

const [url, conc = "32", secs = "5"] = process.argv.slice(2);
if (!url) throw new Error("usage: load.ts <url> [concurrency] [seconds]");
const headers = process.env.LOAD_HEADERS ? (JSON.parse(process.env.LOAD_HEADERS) as Record<string, string>) : {};
const deadline = performance.now() + Number(secs) * 1000;
const lat: number[] = [];
let errors = 0;

async function worker() {
  while (performance.now() < deadline) {
    const t0 = performance.now();
    try {
      const r = await fetch(url!, { headers });
      await r.arrayBuffer();
      if (r.status >= 400) errors++;
    } catch {
      errors++;
    }
    lat.push(performance.now() - t0);
  }
}

// Warm up the connections, then measure.
await Promise.all(Array.from({ length: Number(conc) }, () => fetch(url!, { headers }).then((r) => r.arrayBuffer()).catch(() => {})));
const started = performance.now();
await Promise.all(Array.from({ length: Number(conc) }, worker));
const elapsed = (performance.now() - started) / 1000;
lat.sort((a, b) => a - b);
const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? 0;
console.log(JSON.stringify({ requests: lat.length, errors, rps: Math.round(lat.length / elapsed), p50_ms: +q(0.5).toFixed(3), p99_ms: +q(0.99).toFixed(3) }));
