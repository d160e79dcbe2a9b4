/** GET /admin/stats (JSON counts) and GET /metrics (Prometheus text, src/admin/metrics.ts), both behind the admin password. */
import { Elysia } from "elysia";
import { StatsRecord } from "../../schema/admin.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../../admin/metrics.ts";
import type { Services } from "../../services.ts";
import { errorResponses } from "../schema.ts";

export const adminStatsRoutes = (s: Services) =>
  new Elysia()
    .use(adminGuard(s.adminPassword))
    .get("/admin/stats", () => s.stats.collect(), {
      response: { 200: StatsRecord, ...errorResponses(401, 429) },
      detail: { tags: ["Admin"], summary: "Counts, uptime and version", security: ADMIN_SECURITY },
    })
    .get("/metrics", async () => new Response(await s.metrics.render(), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } }), {
      detail: {
        tags: ["Admin"],
        summary: "Prometheus metrics (text exposition format 0.0.4)",
        description:
          "HTTP requests by method, route template and status, with a latency histogram; tasks by status and their duration; workspaces by status; " +
          "session.ready latency; open WebSocket connections; events appended; webhook deliveries, retries and attempts; model tokens and cost by provider; " +
          "the /admin/stats gauges; process metrics (CPU, RSS, open fds, event-loop lag; no JS heap figures). Bearer = admin password.",
        security: ADMIN_SECURITY,
        // Documented here, not as a `response` schema: the body is a Response the route makes itself.
        responses: {
          200: { description: "The metrics", content: { [PROMETHEUS_CONTENT_TYPE]: { schema: { type: "string" } } } },
          401: { description: "No admin password, or a wrong one", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
        },
      },
    });
