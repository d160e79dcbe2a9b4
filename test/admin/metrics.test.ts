/**
 * GET /metrics after real traffic: a task run against a local Anthropic mock (its own container,
 * so session.ready and a running workspace), an open stream socket, a webhook delivered on its
 * second attempt, requests to templated routes and to paths no route matches. Every documented
 * metric is there with its type and labels and the values the traffic implies; the routes are
 * templates (many raw paths, one series); no label value carries an id, an e-mail, a token or the
 * admin password; the text parses as the exposition format; and only the admin password opens it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { Metrics } from "../../src/admin/metrics.ts";
import { newId } from "../../src/db/ids.ts";
import { VERSION } from "../../src/version.ts";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { ADMIN_PASSWORD, type Actors, actors } from "../helpers/scenarios.ts";
import { api } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";
import { type Receiver, startReceiver } from "../notifications/receiver.ts";

const PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Exposition {
  types: Map<string, string>;
  samples: Sample[];
}

/** The text exposition format 0.0.4, strictly: every line is HELP, TYPE, a sample or blank. */
function parse(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    let m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$/.exec(line);
    if (m) continue;
    m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m) {
      types.set(m[1]!, m[2]!);
      continue;
    }
    // Values as Prometheus reads them (Go's ParseFloat: NaN and Inf in any case; prom-client writes "Nan").
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?(?:\d+(?:\.\d+)?(?:e[-+]?\d+)?|[+-]?Inf|nan))$/i.exec(line);
    if (!m) throw new Error(`not an exposition line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/gy;
      let l: RegExpExecArray | null;
      let end = 0;
      while ((l = re.exec(m[2]))) {
        labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
        end = re.lastIndex;
      }
      if (end !== m[2].length) throw new Error(`bad labels in ${JSON.stringify(line)}`);
    }
    const v = m[3]!.toLowerCase();
    samples.push({ name: m[1]!, labels, value: v === "nan" ? NaN : v.endsWith("inf") ? (v.startsWith("-") ? -Infinity : Infinity) : Number(m[3]) });
  }
  return { types, samples };
}

const pick = (e: Exposition, name: string, labels: Record<string, string> = {}) =>
  e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
const value = (e: Exposition, name: string, labels: Record<string, string> = {}) => {
  const found = pick(e, name, labels);
  if (found.length !== 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${found.length} samples`);
  return found[0]!.value;
};

let t: TestApp;
let a: Actors;
let rcv: Receiver;
const mock = startMockAnthropic();
let socket: WsClient;
const ids: string[] = [];

async function scrape(): Promise<Exposition> {
  const r = await t.fetch("/metrics", { headers: a.headers("admin") });
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toBe(PROMETHEUS);
  return parse(await r.text());
}

beforeAll(async () => {
  t = await startTestApp({ flags: ["--webhook-backoff", "50ms", "--webhook-timeout", "2s"] });
  a = await actors(t);
  ids.push(a.owner.id, a.other.id, a.owner.token, a.other.token);

  // A webhook that fails once (500), then takes the retry.
  rcv = startReceiver({ secret: null, respond: (n) => new Response(n === 1 ? "busy" : "ok", { status: n === 1 ? 500 : 200 }) });
  const integ = await api(t, "POST", "/v1/integrations", a.headers("owner"), { type: "webhook", config: { url: rcv.url + "/hook" } });
  expect(integ.status).toBe(201);
  const note = await api(t, "POST", "/v1/notifications", a.headers("owner"), { message: "metrics" });
  expect(note.status).toBe(202);
  ids.push(integ.body.id, note.body.id);

  // A task in its own container: session.ready, a running workspace, tokens and cost.
  const profile = await createProfile(t, a.owner, { mock, pricing: { input_per_mtok: 3, output_per_mtok: 15 } });
  mock.enqueue({ text: "done", usage: { input_tokens: 1000, output_tokens: 200 } });
  const task = await submit(t, a.owner, { profile_id: profile, prompt: "say done" });
  expect((await waitTask(t, a.owner, task.task_id)).status).toBe("completed");
  ids.push(profile, task.task_id, task.session_id);
  const workspace = t.app.services.sqlite!.query<{ id: string; name: string }, [string]>("SELECT id, name FROM workspaces WHERE session_id = ?").get(task.session_id);
  if (workspace) ids.push(workspace.id, workspace.name);

  // Templated routes: many sessions' paths, one series; and paths no route matches.
  expect((await api(t, "GET", `/v1/sessions/${task.session_id}`, a.headers("owner"))).status).toBe(200);
  for (let i = 0; i < 5; i++) {
    const missing = newId("session");
    ids.push(missing);
    expect((await api(t, "GET", `/v1/sessions/${missing}`, a.headers("owner"))).status).toBe(404);
    expect((await api(t, "GET", `/v1/no-such-thing/${missing}`, a.headers("owner"))).status).toBe(404);
  }
  expect((await t.fetch("/healthz")).status).toBe(200);

  socket = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${a.owner.token}`] });
  await waitFor(() => t.app.stream.size === 1 || null, { what: "the socket to be counted" });
  await waitFor(async () => rcv.received.length >= 2 && (await t.app.services.notifications.get(a.owner.id, note.body.id)).status === "delivered", { what: "the webhook delivery", timeoutMs: 15_000 });
  // The worker writes the outcome, then reports it.
  await waitFor(async () => value(await scrape(), "runcell_webhook_deliveries_total", { outcome: "delivered" }) === 1 || null, { what: "the delivery counted" });
}, 60_000);

afterAll(async () => {
  socket?.close();
  rcv?.stop();
  await mock.stop();
  await t?.stop();
});

describe("the metrics after some traffic", () => {
  let e: Exposition;
  beforeAll(async () => {
    e = await scrape();
  });

  test.each([
    ["runcell_http_requests_total", "counter"],
    ["runcell_http_request_duration_seconds", "histogram"],
    ["runcell_tasks", "gauge"],
    ["runcell_task_duration_seconds", "histogram"],
    ["runcell_workspaces", "gauge"],
    ["runcell_session_ready_seconds", "histogram"],
    ["runcell_websocket_connections", "gauge"],
    ["runcell_events_appended_total", "counter"],
    ["runcell_webhook_deliveries_total", "counter"],
    ["runcell_webhook_retries_total", "counter"],
    ["runcell_webhook_delivery_attempts", "histogram"],
    ["runcell_model_requests_total", "counter"],
    ["runcell_model_tokens_total", "counter"],
    ["runcell_model_cost_usd_total", "counter"],
    ["runcell_build_info", "gauge"],
    ["runcell_replica_info", "gauge"],
    ["runcell_replicas_live", "gauge"],
    ["runcell_uptime_seconds", "gauge"],
    ["runcell_users", "gauge"],
    ["process_cpu_seconds_total", "counter"],
    ["process_resident_memory_bytes", "gauge"],
    ["process_open_fds", "gauge"],
    ["process_max_fds", "gauge"],
    ["process_start_time_seconds", "gauge"],
    ["nodejs_eventloop_lag_seconds", "gauge"],
    ["nodejs_eventloop_lag_p99_seconds", "gauge"],
  ])("%s is a %s", (name, type) => {
    expect(e.types.get(name)).toBe(type);
  });

  test("no process metric that reads wrong under Bun (the JS heap figures, VmData, GC, handles)", () => {
    for (const name of ["process_heap_bytes", "nodejs_heap_size_total_bytes", "nodejs_heap_size_used_bytes", "nodejs_external_memory_bytes", "nodejs_gc_duration_seconds", "nodejs_active_handles"]) {
      expect(e.types.has(name), name).toBe(false);
    }
  });

  test("HTTP requests by method, route template and status; latency by method and route", () => {
    expect(value(e, "runcell_http_requests_total", { method: "GET", route: "/v1/sessions/:id", status: "200" })).toBe(1);
    expect(value(e, "runcell_http_requests_total", { method: "GET", route: "/v1/sessions/:id", status: "404" })).toBe(5);
    expect(value(e, "runcell_http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(5);
    expect(value(e, "runcell_http_requests_total", { method: "POST", route: "/v1/tasks", status: "202" })).toBe(1);
    expect(value(e, "runcell_http_requests_total", { method: "GET", route: "/healthz", status: "200" })).toBe(1);
    expect(value(e, "runcell_http_requests_total", { method: "GET", route: "/v1/stream", status: "101" })).toBe(1);
    // Six requests to /v1/sessions/<six different ids>: one histogram series, every bucket cumulative.
    const buckets = pick(e, "runcell_http_request_duration_seconds_bucket", { method: "GET", route: "/v1/sessions/:id" });
    expect(buckets.map((b) => b.labels.le)).toEqual(["0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]);
    expect(buckets.at(-1)!.value).toBe(6);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(value(e, "runcell_http_request_duration_seconds_count", { method: "GET", route: "/v1/sessions/:id" })).toBe(6);
    expect(value(e, "runcell_http_request_duration_seconds_sum", { method: "GET", route: "/v1/sessions/:id" })).toBeGreaterThan(0);
    // Every route label is a template, a fixed word, or a path without an id.
    for (const s of pick(e, "runcell_http_requests_total")) expect(s.labels.route).toMatch(/^(unmatched|\/[a-z0-9/_.:-]*)$/);
  });

  test("tasks by status and their duration; the running workspace; session.ready latency", () => {
    expect(value(e, "runcell_tasks", { status: "completed" })).toBe(1);
    expect(value(e, "runcell_tasks", { status: "queued" })).toBe(0);
    expect(value(e, "runcell_task_duration_seconds_count", { status: "completed" })).toBe(1);
    expect(value(e, "runcell_workspaces", { status: "running" })).toBe(1);
    expect(value(e, "runcell_session_ready_seconds_count")).toBe(1);
    expect(value(e, "runcell_session_ready_seconds_sum")).toBeGreaterThan(0);
  });

  test("open sockets, events appended, webhook outcome and retries, model tokens and cost", () => {
    expect(value(e, "runcell_websocket_connections")).toBe(1);
    expect(value(e, "runcell_events_appended_total")).toBeGreaterThanOrEqual(3);
    expect(value(e, "runcell_webhook_deliveries_total", { outcome: "delivered" })).toBe(1);
    expect(value(e, "runcell_webhook_retries_total")).toBe(1);
    expect(value(e, "runcell_webhook_delivery_attempts_bucket", { outcome: "delivered", le: "1" })).toBe(0);
    expect(value(e, "runcell_webhook_delivery_attempts_bucket", { outcome: "delivered", le: "2" })).toBe(1);
    expect(value(e, "runcell_model_requests_total", { provider: "anthropic" })).toBe(1);
    expect(value(e, "runcell_model_tokens_total", { provider: "anthropic", type: "input" })).toBe(1000);
    expect(value(e, "runcell_model_tokens_total", { provider: "anthropic", type: "output" })).toBe(200);
    expect(value(e, "runcell_model_cost_usd_total", { provider: "anthropic" })).toBeCloseTo((1000 * 3 + 200 * 15) / 1e6, 9);
  });

  test("process metrics: CPU, RSS, open fds, event-loop lag", async () => {
    expect(value(e, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(value(e, "process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024);
    expect(value(e, "process_open_fds")).toBeGreaterThan(3);
    // The lag percentiles cover the time since the previous scrape (the monitor samples every 10 ms).
    await Bun.sleep(300);
    const later = await scrape();
    expect(value(later, "nodejs_eventloop_lag_p99_seconds")).toBeGreaterThan(0);
    expect(value(later, "nodejs_eventloop_lag_max_seconds")).toBeLessThan(5);
    // The collectors that report nothing under Bun are left out rather than shown empty.
    expect(e.types.has("nodejs_gc_duration_seconds")).toBe(false);
    expect(e.types.has("nodejs_active_handles_total")).toBe(false);
  });

  test("which replica answered: runcell_replica_info names this process's id, host name and version; runcell_replicas_live counts it", () => {
    const r = t.app.services.replicas;
    const info = pick(e, "runcell_replica_info");
    expect(info).toHaveLength(1);
    expect(info[0]!.labels).toEqual({ replica: r.id, hostname: hostname(), version: VERSION });
    expect(info[0]!.value).toBe(1);
    // One server on its own database (SQLite, or a fresh PostgreSQL database per test app).
    expect(value(e, "runcell_replicas_live")).toBe(1);
  });

  test("no label value carries an id, an e-mail, a token or the admin password", () => {
    const secrets = [...ids, ADMIN_PASSWORD, a.owner.email, a.other.email, rcv.url];
    const idLike = /\b(usr|tok|login|task|pb|sess|prof|ctr|int|ntf|oac|aud)_[0-9a-z]{8,}|rc_[0-9a-f]{16,}|@/;
    const values = new Set(e.samples.flatMap((s) => Object.values(s.labels)));
    expect(values.size).toBeGreaterThan(10);
    for (const v of values) {
      expect(v).not.toMatch(idLike);
      for (const s of secrets) expect(v.includes(s), `label value ${JSON.stringify(v)} contains ${s}`).toBe(false);
    }
  });

  test("counters only grow between scrapes, and a new request is counted once", async () => {
    const before = value(await scrape(), "runcell_http_requests_total", { method: "GET", route: "/healthz", status: "200" });
    await t.fetch("/healthz");
    const after = await scrape();
    expect(value(after, "runcell_http_requests_total", { method: "GET", route: "/healthz", status: "200" })).toBe(before + 1);
    // The scrapes themselves are requests too.
    expect(value(after, "runcell_http_requests_total", { method: "GET", route: "/metrics", status: "200" })).toBeGreaterThanOrEqual(2);
  });
});

test("the Grafana dashboard (docs/grafana-dashboard.json) charts only metrics /metrics has, through its data source variable", async () => {
  const dash = JSON.parse(readFileSync(join(import.meta.dir, "../../docs/grafana-dashboard.json"), "utf8"));
  expect(dash.templating.list.find((v: any) => v.name === "datasource")).toMatchObject({ type: "datasource", query: "prometheus" });
  expect(typeof dash.schemaVersion).toBe("number");
  const e = await scrape();
  const panels = dash.panels.filter((p: any) => p.type !== "row");
  expect(panels.length).toBeGreaterThan(15);
  expect(new Set(dash.panels.map((p: any) => p.id)).size).toBe(dash.panels.length);
  const used = new Set<string>();
  for (const p of panels) {
    expect(p.datasource, p.title).toEqual({ type: "prometheus", uid: "${datasource}" });
    for (const target of p.targets) {
      expect(target.datasource).toEqual(p.datasource);
      for (const m of target.expr.matchAll(/\b((?:runcell|process|nodejs)_[a-z0-9_]+)/g)) used.add(m[1]);
    }
  }
  const base = (name: string) => name.replace(/_(bucket|count|sum)$/, "");
  for (const name of used) expect(e.types.has(name) || e.types.get(base(name)) === "histogram", `${name} is charted but not exported`).toBe(true);
  // Every runcell metric is charted somewhere.
  for (const [name] of e.types) if (name.startsWith("runcell_") && !["runcell_start_time_seconds", "runcell_admin_users", "runcell_api_tokens", "runcell_profiles", "runcell_replica_info", "runcell_replicas_live"].includes(name)) {
    expect([...used].some((u) => base(u) === name), `${name} is in no panel`).toBe(true);
  }
});

describe("the HTTP recorder (src/admin/metrics.ts) on its own", () => {
  const stats = () => t.app.services.stats.collect();
  const fresh = () => new Metrics({ stats, websockets: () => 0, eventsAppended: () => 0 });

  test("le is inclusive, a slow request is only in +Inf, sum and count are exact", async () => {
    const m = fresh();
    for (const s of [0.001, 0.0011, 0.003, 20]) m.http("GET", "/x/:id", 200, s);
    const e = parse(await m.render());
    const bucket = (le: string) => value(e, "runcell_http_request_duration_seconds_bucket", { method: "GET", route: "/x/:id", le });
    expect([bucket("0.001"), bucket("0.0025"), bucket("0.005"), bucket("10"), bucket("+Inf")]).toEqual([1, 2, 3, 3, 4]);
    expect(value(e, "runcell_http_request_duration_seconds_sum", { route: "/x/:id" })).toBeCloseTo(20.0051, 9);
    expect(value(e, "runcell_http_request_duration_seconds_count", { route: "/x/:id" })).toBe(4);
  });

  test("counts are added once however often it is scraped; odd methods are `other`; a group root loses its slash", async () => {
    const m = fresh();
    m.http("GET", "/v1/tasks/", 200, 0.001);
    m.http("BREW", undefined, 404, 0.001);
    const first = parse(await m.render());
    const second = parse(await m.render());
    for (const e of [first, second]) {
      expect(value(e, "runcell_http_requests_total", { method: "GET", route: "/v1/tasks", status: "200" })).toBe(1);
      expect(value(e, "runcell_http_requests_total", { method: "other", route: "unmatched", status: "404" })).toBe(1);
    }
    m.http("GET", "/v1/tasks/", 200, 0.001);
    expect(value(parse(await m.render()), "runcell_http_requests_total", { method: "GET", route: "/v1/tasks", status: "200" })).toBe(2);
  });
});

describe("who may read /metrics", () => {
  test.each([
    ["no credential", {} as Record<string, string>],
    ["a user's API token", { authorization: "Bearer TOKEN" }],
    ["a wrong password", { authorization: "Bearer not the admin password" }],
  ])("%s → 401, no metrics", async (_n, headers) => {
    const h = headers.authorization === "Bearer TOKEN" ? a.headers("owner") : headers;
    const r = await t.fetch("/metrics", { headers: h });
    expect(r.status).toBe(401);
    const body = await r.text();
    expect(JSON.parse(body).code).toBe("UNAUTHORIZED");
    expect(body).not.toContain("runcell_");
  });

  test("the admin password → 200 in the Prometheus text format", async () => {
    const r = await t.fetch("/metrics", { headers: { authorization: `Bearer ${ADMIN_PASSWORD}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe(PROMETHEUS);
  });
});
