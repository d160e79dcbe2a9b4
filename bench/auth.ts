/**
 * Authentication cost on the hot path, on a real server over loopback:
 *   - GET /v1/api-tokens authenticated with an API token vs. the same route with a cookie session
 *     (the baseline, measured in the same run). Goal ≥ 0.8×: the verified-token cache keeps bcrypt
 *     off the hot path, so a token costs about what a session lookup costs.
 *   - the same route with a *fresh* token on every request (a bcrypt compare each time), to show
 *     what the cache saves;
 *   - sign-in latency (argon2id verification + session insert), p50 / p99.
 * Run: bun bench/auth.ts [--requests N] [--concurrency C]
 */
import { rmSync } from "node:fs";
import { createApp } from "../src/app.ts";
import { parseArgs, resolveConfig } from "../src/config.ts";
import { silentLogger } from "../src/log.ts";
import { tempDir } from "../test/helpers/app.ts";
import { freePort } from "../test/helpers/net.ts";

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const REQUESTS = arg("requests", 3000);
const CONCURRENCY = arg("concurrency", 8);
const SIGN_INS = arg("sign-ins", 40);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function load(url: string, headers: () => Record<string, string>, total: number, concurrency: number) {
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        const s = performance.now();
        const r = await fetch(url, { headers: headers() });
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`unexpected ${r.status}`);
        lat.push(performance.now() - s);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  return { rps: total / secs, p50: pct(lat, 50), p99: pct(lat, 99) };
}

const dataDir = tempDir("runcell-bench-");
const port = await freePort();
const config = resolveConfig(
  parseArgs(["--http", `127.0.0.1:${port}`, "--data-dir", dataDir, "--rate-limit-per-minute", "1000000000", "--rate-limit-burst", "1000000000", "--log-level", "error"]).flags,
  {},
);
const app = await createApp(config, { logger: silentLogger });
await app.start();
try {
  const s = app.services;
  const user = await s.users.create({ email: "bench@example.com", password: "bench password 1", role: "user" });
  const token = (await s.tokens.create(user.id, "bench")).token;
  for (let i = 0; i < 20; i++) await s.tokens.create(user.id, `filler-${i}`);
  const cookie = `${s.authenticator.cookie.name}=${(await s.loginSessions.create(user.id)).token}`;
  const url = `${app.url}/v1/api-tokens`;

  // Warm-up: JIT, prepared statements, the token cache.
  await load(url, () => ({ cookie }), 300, CONCURRENCY);
  await load(url, () => ({ authorization: `Bearer ${token}` }), 300, CONCURRENCY);

  // Interleave two rounds of each to spread background noise evenly.
  const cookieRuns = [];
  const tokenRuns = [];
  for (let round = 0; round < 2; round++) {
    cookieRuns.push(await load(url, () => ({ cookie }), REQUESTS / 2, CONCURRENCY));
    tokenRuns.push(await load(url, () => ({ authorization: `Bearer ${token}` }), REQUESTS / 2, CONCURRENCY));
  }
  const avg = (runs: { rps: number; p50: number; p99: number }[]) => ({
    rps: runs.reduce((a, r) => a + r.rps, 0) / runs.length,
    p50: runs.reduce((a, r) => a + r.p50, 0) / runs.length,
    p99: runs.reduce((a, r) => a + r.p99, 0) / runs.length,
  });
  const cookieRes = avg(cookieRuns);
  const tokenRes = avg(tokenRuns);

  // Uncached: a different token each request, so every request pays one bcrypt compare.
  const fresh = await Promise.all(Array.from({ length: 60 }, (_, i) => s.tokens.create(user.id, `fresh-${i}`)));
  let k = 0;
  const uncached = await load(url, () => ({ authorization: `Bearer ${fresh[k++ % fresh.length]!.token}` }), fresh.length, CONCURRENCY);

  // Sign-in latency, sequential (argon2id m=19 MiB, t=2, p=1 + a session row).
  const signIn: number[] = [];
  for (let i = 0; i < SIGN_INS; i++) {
    const t0 = performance.now();
    const r = await fetch(`${app.url}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "bench@example.com", password: "bench password 1" }),
    });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`sign-in ${r.status}`);
    signIn.push(performance.now() - t0);
  }

  const row = (name: string, r: { rps: number; p50: number; p99: number }) =>
    `${name.padEnd(38)} ${r.rps.toFixed(0).padStart(8)} req/s  p50 ${r.p50.toFixed(2).padStart(6)} ms  p99 ${r.p99.toFixed(2).padStart(7)} ms  ${(r.rps / cookieRes.rps).toFixed(2).padStart(5)}× baseline`;
  console.log(`runcell auth benchmark — GET /v1/api-tokens, ${REQUESTS} requests per credential, concurrency ${CONCURRENCY}, bun ${Bun.version}`);
  console.log(row("cookie session (baseline)", cookieRes));
  console.log(row("API token, cached verification", tokenRes));
  console.log(row("API token, uncached (bcrypt each time)", uncached));
  console.log(`token / cookie throughput ratio: ${(tokenRes.rps / cookieRes.rps).toFixed(2)}× (goal ≥ 0.80×)`);
  console.log(`sign-in (POST /api/auth/sign-in/email, ${SIGN_INS} sequential): p50 ${pct(signIn, 50).toFixed(1)} ms, p99 ${pct(signIn, 99).toFixed(1)} ms`);
} finally {
  await app.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
