/** GET /admin/stats (JSON counts) and GET /metrics (Prometheus text), both behind the admin password. */
import { Elysia, t } from "elysia";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from "../../admin/metrics.ts";
import type { Services } from "../../services.ts";
import { errorResponses } from "../schema.ts";

const byStatus = (statuses: string[]) => t.Object({ total: t.Integer(), ...Object.fromEntries(statuses.map((s) => [s, t.Integer()])) });

const StatsSchema = t.Object({
  version: t.String(),
  commit: t.String(),
  started_at: t.String(),
  uptime_seconds: t.Integer(),
  users: t.Object({ total: t.Integer(), admins: t.Integer(), disabled: t.Integer() }),
  login_sessions: t.Object({ active: t.Integer() }),
  api_tokens: t.Object({ total: t.Integer() }),
  profiles: t.Object({ total: t.Integer() }),
  sessions: t.Object({ total: t.Integer() }),
  tasks: byStatus(["queued", "running", "waiting_input", "completed", "failed", "cancelled"]),
  workspaces: byStatus(["starting", "running", "stopped", "failed"]),
  notifications: byStatus(["pending", "delivered", "failed"]),
});

export const adminStatsRoutes = (s: Services) =>
  new Elysia()
    .use(adminGuard(s.adminPassword))
    .get("/admin/stats", () => s.stats.collect(), {
      response: { 200: StatsSchema, ...errorResponses(401, 429) },
      detail: { tags: ["Admin"], summary: "Counts, uptime and version", security: ADMIN_SECURITY },
    })
    .get("/metrics", () => new Response(renderMetrics(s.stats.collect(), s.httpMetrics), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } }), {
      detail: {
        tags: ["Admin"],
        summary: "Prometheus metrics (text exposition format)",
        description: "Build info, uptime, HTTP responses by status class and the /admin/stats gauges. Bearer = admin password.",
        security: ADMIN_SECURITY,
      },
    });
