/**
 * GET /metrics: the Prometheus text exposition format (0.0.4), written by prom-client's registry.
 *
 * One `Metrics` per app. Its recorders are called where things happen — the HTTP pipeline (every
 * response: method, route template, status, duration), the task queue (a task ends), the session
 * lifecycle (session.ready), the agent loop (a model response's tokens and cost), the webhook
 * worker (an attempt's outcome) — and the rest is read at scrape time: the row counts of
 * /admin/stats, open WebSocket connections, events appended. Process metrics (RSS, CPU, open fds,
 * event-loop lag, heap) come from prom-client's default collectors, once per process.
 *
 * Label values are bounded by construction: route templates as registered (never a raw path),
 * methods from a fixed list, statuses and enum values; never an id, an e-mail or a secret — but
 * the replica's own id on runcell_replica_info, one series per process, as Prometheus' `instance`.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, type Metric, type MetricValueWithName, Registry } from "prom-client";
import { COMMIT, VERSION } from "../version.ts";
import type { StatsRecord } from "./stats.ts";

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;

/** The route label of a request no route matched (404s, the dashboard's fallback page, refusals before routing). */
export const UNMATCHED_ROUTE = "unmatched";

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** Seconds. Most API answers take well under 5 ms; a long poll or a file download may take seconds. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds, from the demo model's instant answer to a long agent run. */
const TASK_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200];
/** Seconds to a running workspace: a warm container in well under a second, a cold image pull in tens. */
const READY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60];
/** Attempts a webhook delivery took (the default schedule allows 3). */
const ATTEMPT_BUCKETS = [1, 2, 3, 4, 5, 7, 10];

/**
 * prom-client's default collectors that report nothing true under Bun (checked on Bun 1.4):
 * active handles/requests/resources are always empty (Bun returns no list), the GC histogram never
 * gets a sample (no `gc` performance entries), the V8 heap spaces do not exist in JavaScriptCore,
 * and process_heap_bytes (VmData) counts the gigabytes of address space JavaScriptCore reserves
 * but does not use. What works: CPU, RSS, virtual memory, open and max fds, start time, event-loop
 * lag (monitorEventLoopDelay: min, max, mean, stddev, p50/p90/p99), the version; not the JS heap
 * figures (process.memoryUsage() gives none that hold under Bun).
 */
const UNSUPPORTED_UNDER_BUN = [
  "process_heap_bytes",
  "nodejs_active_handles",
  "nodejs_active_handles_total",
  "nodejs_active_requests",
  "nodejs_active_requests_total",
  "nodejs_active_resources",
  "nodejs_active_resources_total",
  "nodejs_gc_duration_seconds",
  "nodejs_heap_space_size_total_bytes",
  "nodejs_heap_space_size_used_bytes",
  "nodejs_heap_space_size_available_bytes",
  // process.memoryUsage() under Bun: heapTotal reads below heapUsed, heapUsed reads 0 in a busy
  // server, external is a few hundred bytes. The resident set (process_resident_memory_bytes) is what to watch.
  "nodejs_heap_size_total_bytes",
  "nodejs_heap_size_used_bytes",
  "nodejs_external_memory_bytes",
];

let processRegistry: Registry | null = null;

/**
 * The process's own metrics, shared by every app in the process (tests start many): CPU, RSS,
 * open and max fds, start time, event-loop lag (mean, percentiles), heap, the runtime version.
 */
function processMetrics(): Registry {
  if (processRegistry) return processRegistry;
  const r = new Registry();
  collectDefaultMetrics({ register: r });
  for (const name of UNSUPPORTED_UNDER_BUN) r.removeSingleMetric(name);
  return (processRegistry = r);
}

/** The scrape-time readings: the row counts, and what the transports and the event log hold now. */
export interface MetricsSources {
  stats(): Promise<StatsRecord>;
  /** Open /v1/stream sockets. */
  websockets(): number;
  /** Frames appended to the event log since start. */
  eventsAppended(): number;
  /** Warm-pool members across profiles, ready and being made. */
  warmPool?(): { ready: number; starting: number };
  /** Container starts waiting for a slot at the engine, and holding one. */
  startQueue?(): { waiting: number; running: number };
  /** This server among the replicas sharing its database: its id, its host name, the live replicas (itself included). */
  replica?(): { id: string; hostname: string; live: number };
}

type Observe = (seconds: number) => void;
/** Requests with one method, route and status since the last scrape (added to the counter at the scrape). */
interface StatusCount {
  labels: { method: string; route: string; status: string };
  n: number;
}
interface RouteChild {
  observe: Observe;
  byStatus: Map<number, StatusCount>;
}

/**
 * The request latency histogram. prom-client's Histogram builds and hashes the label set on every
 * observation, which costs more than the rest of a /healthz request's bookkeeping; here each
 * (method, route) series is a few numbers the pipeline adds to directly, and the registry reads
 * them through the metric object contract its own metrics follow (`get()` → name, help, type and
 * the samples: cumulative `_bucket`s with `le`, `_sum`, `_count`), so prom-client writes the text
 * as for any other metric.
 */
class RequestLatency {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private all: { labels: Record<string, string>; counts: Float64Array; sum: number; count: number }[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    private bounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  /** The observer of one label set: a bucket found in a short loop, three additions. */
  series(labels: Record<string, string>): Observe {
    const s = { labels, counts: new Float64Array(this.bounds.length), sum: 0, count: 0 };
    this.all.push(s);
    const bounds = this.bounds;
    return (seconds) => {
      let i = 0;
      while (i < bounds.length && seconds > bounds[i]!) i++;
      if (i < bounds.length) s.counts[i]!++;
      s.sum += seconds;
      s.count++;
    };
  }

  async get(): Promise<{ name: string; help: string; type: "histogram"; values: MetricValueWithName<string>[]; aggregator: "sum" }> {
    const values: MetricValueWithName<string>[] = [];
    for (const s of this.all) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: this.bounds[i]! }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: "+Inf" }, value: s.count });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset() {
    for (const s of this.all) {
      s.counts.fill(0);
      s.sum = s.count = 0;
    }
  }
}

export class Metrics {
  readonly registry = new Registry();

  private httpRequests: Counter<"method" | "route" | "status"> = new Counter({
    name: "runcell_http_requests_total",
    help: "HTTP requests answered, by method, route template and status code.",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
    // Counted in plain numbers per request (prom-client hashes the labels on every inc), added here at each scrape.
    collect: () => this.flushHttpCounts(),
  });
  private httpDuration = new RequestLatency(
    "runcell_http_request_duration_seconds",
    "Time from a request's arrival to its response, by method and route template.",
    HTTP_BUCKETS,
    this.registry,
  );
  private taskDuration = new Histogram({
    name: "runcell_task_duration_seconds",
    help: "Time a task took from its start (or, never started, its submission) to its end, by final status.",
    labelNames: ["status"] as const,
    buckets: TASK_BUCKETS,
    registers: [this.registry],
  });
  private sessionReadyDuration = new Histogram({
    name: "runcell_session_ready_seconds",
    help: "Time from a new session's request to its session.ready frame (its workspace running).",
    buckets: READY_BUCKETS,
    registers: [this.registry],
  });
  private poolTakes = new Counter({
    name: "runcell_warm_pool_takes_total",
    help: "New sessions of a profile with a warm pool, by outcome: hit (took a started member) or miss (a container was created).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private poolRefillDuration = new Histogram({
    name: "runcell_warm_pool_refill_seconds",
    help: "Time to make one warm-pool member (waiting for a start slot included).",
    buckets: READY_BUCKETS,
    registers: [this.registry],
  });
  private poolMembers = new Gauge({ name: "runcell_warm_pool_members", help: "Warm-pool containers across profiles, by state (ready, starting).", labelNames: ["state"] as const, registers: [this.registry] });
  private startWait = new Histogram({
    name: "runcell_workspace_start_wait_seconds",
    help: "Time a container start waited for a slot at the engine (--workspace-start-parallelism), by kind (session, pool).",
    labelNames: ["kind"] as const,
    buckets: [0, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private startQueued = new Counter({
    name: "runcell_workspace_starts_queued_total",
    help: "Container starts that had to wait for a slot at the engine, by kind (session, pool).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  private startQueueDepth = new Gauge({ name: "runcell_workspace_start_queue", help: "Container starts waiting for a slot at the engine (state=waiting) and holding one (state=running).", labelNames: ["state"] as const, registers: [this.registry] });
  private modelRequests = new Counter({
    name: "runcell_model_requests_total",
    help: "Model responses received, by provider.",
    labelNames: ["provider"] as const,
    registers: [this.registry],
  });
  private modelTokens = new Counter({
    name: "runcell_model_tokens_total",
    help: "Model tokens used, by provider and type (input, output).",
    labelNames: ["provider", "type"] as const,
    registers: [this.registry],
  });
  private modelCost = new Counter({
    name: "runcell_model_cost_usd_total",
    help: "Model cost in US dollars at the model's prices (built-in, or the profile's own), by provider.",
    labelNames: ["provider"] as const,
    registers: [this.registry],
  });
  private webhookDeliveries = new Counter({
    name: "runcell_webhook_deliveries_total",
    help: "Webhook notifications that reached a final outcome (delivered, failed).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private webhookRetries = new Counter({
    name: "runcell_webhook_retries_total",
    help: "Webhook attempts that failed and were scheduled again.",
    registers: [this.registry],
  });
  private webhookAttempts = new Histogram({
    name: "runcell_webhook_delivery_attempts",
    help: "Attempts a webhook notification took to reach its final outcome, by outcome.",
    labelNames: ["outcome"] as const,
    buckets: ATTEMPT_BUCKETS,
    registers: [this.registry],
  });

  // Read at scrape time.
  private websockets = new Gauge({ name: "runcell_websocket_connections", help: "Open /v1/stream WebSocket connections.", registers: [this.registry] });
  private eventsAppended = new Counter({ name: "runcell_events_appended_total", help: "Frames appended to the session event log.", registers: [this.registry] });
  private buildInfo = new Gauge({ name: "runcell_build_info", help: "Build information (always 1).", labelNames: ["version", "commit", "bun"] as const, registers: [this.registry] });
  private replicaInfo = new Gauge({
    name: "runcell_replica_info",
    help: "The replica that answered this scrape (always 1): its id (rep_…, one per process), host name and version.",
    labelNames: ["replica", "hostname", "version"] as const,
    registers: [this.registry],
  });
  private replicasLive = new Gauge({
    name: "runcell_replicas_live",
    help: "Replicas serving this database, this one included, as of its last heartbeat (the rate limits are divided by it).",
    registers: [this.registry],
  });
  private startTime = new Gauge({ name: "runcell_start_time_seconds", help: "Unix time the server started.", registers: [this.registry] });
  private uptime = new Gauge({ name: "runcell_uptime_seconds", help: "Seconds since the server started.", registers: [this.registry] });
  private users = new Gauge({ name: "runcell_users", help: "User accounts, by state (enabled, disabled).", labelNames: ["state"] as const, registers: [this.registry] });
  private admins = new Gauge({ name: "runcell_admin_users", help: "User accounts with the admin role.", registers: [this.registry] });
  private logins = new Gauge({ name: "runcell_login_sessions_active", help: "Cookie sessions not yet expired.", registers: [this.registry] });
  private apiTokens = new Gauge({ name: "runcell_api_tokens", help: "API tokens.", registers: [this.registry] });
  private profiles = new Gauge({ name: "runcell_profiles", help: "Agent profiles.", registers: [this.registry] });
  private sessions = new Gauge({ name: "runcell_sessions", help: "Agent sessions.", registers: [this.registry] });
  private tasks = new Gauge({ name: "runcell_tasks", help: "Tasks by status.", labelNames: ["status"] as const, registers: [this.registry] });
  private workspaces = new Gauge({ name: "runcell_workspaces", help: "Workspaces (containers) by status; status=\"running\" is the running workspaces.", labelNames: ["status"] as const, registers: [this.registry] });
  private notifications = new Gauge({ name: "runcell_notifications", help: "Notifications by delivery status.", labelNames: ["status"] as const, registers: [this.registry] });

  /** route → method → the latency child and the counts by status (looked up without building or hashing a label set). */
  private routes = new Map<string, Map<string, RouteChild>>();
  private appendedSeen = 0;

  constructor(private sources: MetricsSources) {
    this.buildInfo.labels(VERSION, COMMIT, Bun.version).set(1);
    const replica = sources.replica?.();
    if (replica) this.replicaInfo.labels(replica.id, replica.hostname, VERSION).set(1);
    // Known label values start at 0, so rate() and alerts see the series before the first event.
    for (const status of ["completed", "failed", "cancelled"] as const) this.taskDuration.zero({ status });
    for (const outcome of ["delivered", "failed"] as const) {
      this.webhookDeliveries.labels(outcome).inc(0);
      this.webhookAttempts.zero({ outcome });
    }
    this.webhookRetries.inc(0);
    for (const outcome of ["hit", "miss"] as const) this.poolTakes.labels(outcome).inc(0);
    for (const kind of ["session", "pool"] as const) {
      this.startQueued.labels(kind).inc(0);
      this.startWait.zero({ kind });
    }
    processMetrics();
  }

  /**
   * One HTTP response (the pipeline, for every request). `route` is the template the router
   * matched ("/v1/sessions/:id"), undefined when none did.
   */
  http(method: string, route: string | undefined, status: number, seconds: number): void {
    const r = route ?? UNMATCHED_ROUTE;
    const m = METHODS.has(method) ? method : "other";
    let byMethod = this.routes.get(r);
    if (!byMethod) this.routes.set(r, (byMethod = new Map()));
    let child = byMethod.get(m);
    if (!child) byMethod.set(m, (child = { observe: this.httpDuration.series({ method: m, route: routeLabel(r) }), byStatus: new Map() }));
    let count = child.byStatus.get(status);
    if (!count) child.byStatus.set(status, (count = { labels: { method: m, route: routeLabel(r), status: String(status) }, n: 0 }));
    count.n++;
    child.observe(seconds);
  }

  private flushHttpCounts() {
    for (const byMethod of this.routes.values()) {
      for (const child of byMethod.values()) {
        for (const c of child.byStatus.values()) {
          if (c.n === 0) continue;
          this.httpRequests.inc(c.labels, c.n);
          c.n = 0;
        }
      }
    }
  }

  /** A task reached a final status. */
  taskEnded(status: "completed" | "failed" | "cancelled", seconds: number): void {
    this.taskDuration.labels(status).observe(Math.max(0, seconds));
  }

  /** A new session's workspace is running (session.ready was published). */
  sessionReady(seconds: number): void {
    this.sessionReadyDuration.observe(Math.max(0, seconds));
  }

  /** A new session of a profile with a warm pool took a member (hit) or found none (miss). */
  poolTake(hit: boolean): void {
    this.poolTakes.labels(hit ? "hit" : "miss").inc();
  }

  /** A warm-pool member is ready, `seconds` after it was asked for. */
  poolRefill(seconds: number): void {
    this.poolRefillDuration.observe(Math.max(0, seconds));
  }

  /** A container start had to wait for a slot at the engine (its position is logged by the lifecycle). */
  queued(kind: "session" | "pool", _position: number): void {
    this.startQueued.labels(kind).inc();
  }

  /** A container start got its slot after `seconds`. */
  admitted(kind: "session" | "pool", seconds: number): void {
    this.startWait.labels(kind).observe(Math.max(0, seconds));
  }

  /** One model response. `provider` is the profile's provider (anthropic, openai, demo). */
  modelUsage(provider: string, inputTokens: number, outputTokens: number, costUsd: number): void {
    this.modelRequests.labels(provider).inc();
    if (inputTokens > 0) this.modelTokens.labels(provider, "input").inc(inputTokens);
    if (outputTokens > 0) this.modelTokens.labels(provider, "output").inc(outputTokens);
    if (costUsd > 0) this.modelCost.labels(provider).inc(costUsd);
  }

  /** A webhook attempt's outcome was written; `attempt` is its number (1-based). */
  webhookSettled(kind: "delivered" | "retry" | "failed" | "release", attempt: number): void {
    if (kind === "retry") this.webhookRetries.inc();
    else if (kind === "delivered" || kind === "failed") {
      this.webhookDeliveries.labels(kind).inc();
      this.webhookAttempts.labels(kind).observe(attempt);
    }
  }

  /** The scrape: the readings taken now, then the registry's text (this app's metrics, then the process's). */
  async render(): Promise<string> {
    await this.refresh();
    const [own, proc] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return own.trimEnd() + "\n\n" + proc;
  }

  private async refresh() {
    const s = await this.sources.stats();
    this.startTime.set(Math.floor(Date.parse(s.started_at) / 1000));
    this.uptime.set(s.uptime_seconds);
    this.users.labels("enabled").set(s.users.total - s.users.disabled);
    this.users.labels("disabled").set(s.users.disabled);
    this.admins.set(s.users.admins);
    this.logins.set(s.login_sessions.active);
    this.apiTokens.set(s.api_tokens.total);
    this.profiles.set(s.profiles.total);
    this.sessions.set(s.sessions.total);
    byStatus(this.tasks, s.tasks);
    byStatus(this.workspaces, s.workspaces);
    byStatus(this.notifications, s.notifications);
    this.websockets.set(this.sources.websockets());
    const replica = this.sources.replica?.();
    if (replica) this.replicasLive.set(replica.live);
    const pool = this.sources.warmPool?.();
    if (pool) {
      this.poolMembers.labels("ready").set(pool.ready);
      this.poolMembers.labels("starting").set(pool.starting);
    }
    const q = this.sources.startQueue?.();
    if (q) {
      this.startQueueDepth.labels("waiting").set(q.waiting);
      this.startQueueDepth.labels("running").set(q.running);
    }
    const appended = this.sources.eventsAppended();
    if (appended > this.appendedSeen) this.eventsAppended.inc(appended - this.appendedSeen);
    this.appendedSeen = appended;
  }
}

/** A group's root is registered as "/v1/tasks/" and answers "/v1/tasks": labelled as requested. */
const routeLabel = (route: string) => (route.length > 1 && route.endsWith("/") ? route.slice(0, -1) : route);

function byStatus(g: Gauge<"status">, counts: Record<string, number>) {
  for (const [status, n] of Object.entries(counts)) if (status !== "total") g.labels(status).set(n);
}
