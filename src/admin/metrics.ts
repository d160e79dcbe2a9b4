/**
 * GET /metrics in the Prometheus text exposition format (version 0.0.4): build info, uptime,
 * HTTP responses by status class (counted by the pipeline through `HttpMetrics.observe`), and
 * the same gauges as /admin/stats.
 */
import { VERSION, COMMIT } from "../version.ts";
import type { StatsRecord } from "./stats.ts";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"] as const;

/** Responses by status class since start. */
export class HttpMetrics {
  readonly byClass: Record<(typeof CLASSES)[number], number> = { "1xx": 0, "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0 };

  observe(status: number) {
    const c = CLASSES[Math.floor(status / 100) - 1];
    if (c) this.byClass[c]++;
  }
}

const label = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

export function renderMetrics(stats: StatsRecord, http: HttpMetrics): string {
  const out: string[] = [];
  const metric = (name: string, type: "gauge" | "counter", help: string, samples: [Record<string, string> | null, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const l = labels ? `{${Object.entries(labels).map(([k, v]) => `${k}="${label(v)}"`).join(",")}}` : "";
      out.push(`${name}${l} ${value}`);
    }
  };
  const byStatus = (counts: Record<string, number>) =>
    Object.entries(counts)
      .filter(([k]) => k !== "total")
      .map(([status, n]) => [{ status }, n] as [Record<string, string>, number]);

  metric("runcell_build_info", "gauge", "Build information (always 1).", [[{ version: VERSION, commit: COMMIT, bun: Bun.version }, 1]]);
  metric("runcell_start_time_seconds", "gauge", "Unix time the server started.", [[null, Math.floor(Date.parse(stats.started_at) / 1000)]]);
  metric("runcell_uptime_seconds", "gauge", "Seconds since the server started.", [[null, stats.uptime_seconds]]);
  metric("runcell_http_responses_total", "counter", "HTTP responses sent, by status class.", Object.entries(http.byClass).map(([code, n]) => [{ code }, n]));
  metric("runcell_users", "gauge", "User accounts.", [[{ state: "enabled" }, stats.users.total - stats.users.disabled], [{ state: "disabled" }, stats.users.disabled]]);
  metric("runcell_admin_users", "gauge", "User accounts with the admin role.", [[null, stats.users.admins]]);
  metric("runcell_login_sessions_active", "gauge", "Cookie sessions not yet expired.", [[null, stats.login_sessions.active]]);
  metric("runcell_api_tokens", "gauge", "API tokens.", [[null, stats.api_tokens.total]]);
  metric("runcell_profiles", "gauge", "Agent profiles.", [[null, stats.profiles.total]]);
  metric("runcell_sessions", "gauge", "Agent sessions.", [[null, stats.sessions.total]]);
  metric("runcell_tasks", "gauge", "Tasks by status.", byStatus(stats.tasks));
  metric("runcell_workspaces", "gauge", "Workspaces by status.", byStatus(stats.workspaces));
  metric("runcell_notifications", "gauge", "Notifications by delivery status.", byStatus(stats.notifications));
  return out.join("\n") + "\n";
}
