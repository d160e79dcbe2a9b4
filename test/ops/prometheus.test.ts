/**
 * A real Prometheus (Debian's `prometheus` package; `./install.sh test` installs it) scrapes the
 * app's /metrics every second with the admin password as its bearer credential: its
 * /api/v1/targets shows the target up, a query returns the request counter with its route
 * template labels, its histograms are usable (histogram_quantile over the latency buckets), and
 * a second job with a wrong credential is down with the 401 as its error. Our own Prometheus
 * on a free port with a temporary config and storage — never the system service — stopped at the end.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { ADMIN_PASSWORD, type Actors, actors } from "../helpers/scenarios.ts";
import { api } from "../helpers/users.ts";

const PROMETHEUS = Bun.which("prometheus");

let t: TestApp;
let a: Actors;
let prom: ReturnType<typeof Bun.spawn> | null = null;
let promUrl = "";
let dir = "";
let promLog = "";

interface Target {
  labels: { job: string; instance: string };
  scrapeUrl: string;
  health: "up" | "down" | "unknown";
  lastError: string;
}

async function promApi<T>(path: string): Promise<T> {
  const r = await fetch(promUrl + path);
  const body = (await r.json()) as { status: string; data: T; error?: string };
  if (body.status !== "success") throw new Error(`${path}: ${body.error ?? r.status}`);
  return body.data;
}

const targets = async () => (await promApi<{ activeTargets: Target[] }>("/api/v1/targets")).activeTargets;
const query = (q: string) => promApi<{ resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent(q)}`);

beforeAll(async () => {
  if (!PROMETHEUS) {
    throw new Error("prometheus is not installed: this test runs a real Prometheus (Debian: apt-get install prometheus; ./install.sh test installs it)");
  }
  t = await startTestApp();
  a = await actors(t);
  const appHost = new URL(t.url).host;
  dir = tempDir("runcell-prometheus-");
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  // JSON strings are YAML strings: the password's spaces and quotes need no further escaping.
  const config = `
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: runcell
    metrics_path: /metrics
    authorization:
      credentials: ${JSON.stringify(ADMIN_PASSWORD)}
    static_configs:
      - targets: [${JSON.stringify(appHost)}]
  - job_name: runcell-wrong-password
    metrics_path: /metrics
    authorization:
      credentials: "not the admin password"
    static_configs:
      - targets: [${JSON.stringify(appHost)}]
`;
  writeFileSync(join(dir, "prometheus.yml"), config);
  prom = Bun.spawn(
    [PROMETHEUS, `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`, "--log.level=warn"],
    { stdout: "pipe", stderr: "pipe" },
  );
  // Keep its log for a failure message.
  const reader = (prom.stderr as ReadableStream<Uint8Array>).getReader();
  void (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      promLog = (promLog + new TextDecoder().decode(value)).slice(-4000);
    }
  })();
  await waitFor(
    async () => {
      if (prom!.exitCode !== null) throw new Error(`prometheus exited with ${prom!.exitCode}: ${promLog}`);
      return (await fetch(`${promUrl}/-/ready`)).ok;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: "Prometheus to be ready" },
  );
  // Traffic to count: a templated route and a refused call.
  for (let i = 0; i < 3; i++) expect((await api(t, "GET", "/v1/api-tokens", a.headers("owner"))).status).toBe(200);
  expect((await api(t, "GET", "/v1/api-tokens")).status).toBe(401);
}, 60_000);

afterAll(async () => {
  if (prom) {
    prom.kill("SIGTERM");
    const exited = await Promise.race([prom.exited.then(() => true), Bun.sleep(10_000).then(() => false)]);
    if (!exited) {
      prom.kill("SIGKILL");
      await prom.exited;
    }
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
  await t?.stop();
});

test("Prometheus scrapes /metrics with the admin password: the target is up", async () => {
  const up = await waitFor(
    async () => {
      const ours = (await targets()).find((x) => x.labels.job === "runcell");
      return ours?.health === "up" ? ours : null;
    },
    { timeoutMs: 20_000, intervalMs: 250, what: `the runcell target to be up (Prometheus log: ${promLog})` },
  );
  expect(up.scrapeUrl).toBe(`${t.url}/metrics`);
  expect(up.lastError).toBe("");
  const upQuery = await query('up{job="runcell"}');
  expect(upQuery.result.map((r) => r.value[1])).toEqual(["1"]);
}, 30_000);

test("a query returns the request counter, by route template and status", async () => {
  const result = await waitFor(
    async () => {
      const r = await query('runcell_http_requests_total{job="runcell",route="/v1/api-tokens"}');
      return r.result.length >= 2 ? r.result : null;
    },
    { timeoutMs: 20_000, intervalMs: 250, what: "runcell_http_requests_total in Prometheus" },
  );
  const byStatus = Object.fromEntries(result.map((r) => [r.metric.status, Number(r.value[1])]));
  expect(byStatus["200"]).toBe(3);
  expect(byStatus["401"]).toBe(1);
  for (const r of result) expect(r.metric).toMatchObject({ __name__: "runcell_http_requests_total", job: "runcell", method: "GET", route: "/v1/api-tokens" });
  // Its own scrapes are counted too (Prometheus sees the /metrics route).
  const scrapes = await waitFor(async () => (await query('runcell_http_requests_total{job="runcell",route="/metrics",status="200"}')).result[0], { what: "the scrapes counted" });
  expect(Number(scrapes.value[1])).toBeGreaterThanOrEqual(1);
}, 30_000);

test("the histograms and process metrics are usable in PromQL", async () => {
  // Two scrapes at least, so rate() has two points.
  const p99 = await waitFor(
    async () => {
      const r = await query('histogram_quantile(0.99, sum by (le) (rate(runcell_http_request_duration_seconds_bucket{job="runcell"}[30s])))');
      const v = Number(r.result[0]?.value[1]);
      return Number.isFinite(v) && v > 0 ? v : null;
    },
    { timeoutMs: 20_000, intervalMs: 250, what: "a p99 latency from the histogram" },
  );
  expect(p99).toBeLessThan(10);
  for (const name of ["process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "nodejs_eventloop_lag_seconds", "runcell_websocket_connections", "runcell_tasks"]) {
    const r = await query(`${name}{job="runcell"}`);
    expect(r.result.length, name).toBeGreaterThan(0);
  }
}, 30_000);

test("a scrape with a wrong credential is refused: that target is down with a 401", async () => {
  const down = await waitFor(
    async () => {
      const x = (await targets()).find((x) => x.labels.job === "runcell-wrong-password");
      return x?.health === "down" ? x : null;
    },
    { timeoutMs: 20_000, intervalMs: 250, what: "the wrong-password target to be down" },
  );
  expect(down.lastError).toContain("401");
}, 30_000);
