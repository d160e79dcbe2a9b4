/** GET /admin/stats (JSON counts) and GET /metrics (Prometheus text), both behind the admin password. */
import { Elysia } from "elysia";
import { StatsRecord } from "../../schema/admin.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from "../../admin/metrics.ts";
import type { Services } from "../../services.ts";
import { errorResponses } from "../schema.ts";

export const adminStatsRoutes = (s: Services) =>
  new Elysia()
    .use(adminGuard(s.adminPassword))
    .get("/admin/stats", () => s.stats.collect(), {
      response: { 200: StatsRecord, ...errorResponses(401, 429) },
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
