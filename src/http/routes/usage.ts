/** GET /v1/usage: the caller's tokens and cost per UTC day or per profile (logic: src/agents/usage.ts). */
import { Elysia, t } from "elysia";
import type { Services } from "../../services.ts";
import { OneOf } from "../../schema/common.ts";
import { USAGE_GROUPS, USAGE_MAX_DAYS, UsageReport } from "../../schema/usage.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses } from "../schema.ts";

export const usageRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/usage" }).use(userGuard()).get("", ({ user, query }) => s.usage.report(user.id, query), {
    query: t.Object({
      from: t.Optional(t.String({ maxLength: 40, "x-field": "from", description: "Start (inclusive): a UTC day (2026-11-01) or a date-time with Z or an offset (2026-11-01T09:00:00Z, 2026-11-01T10:00:00+01:00); a date-time without one is refused. Default: 30 days before `to`" })),
      to: t.Optional(t.String({ maxLength: 40, "x-field": "to", description: "End (exclusive), in the same forms as `from`. Default: now" })),
      group_by: t.Optional(OneOf(USAGE_GROUPS, { "x-field": "group_by", description: "day (default) or profile" } as object)),
    }),
    response: { 200: UsageReport, ...errorResponses(400, 401, 429) },
    detail: {
      tags: ["Account"],
      summary: "Your tokens and cost per day or per profile",
      description: `Sums of your tasks created in [from, to), those of deleted sessions included: tasks, input and output tokens, cost in USD. group_by=day lists every UTC day of the range (zeros included); group_by=profile lists the profiles with tasks, most expensive first. At most ${USAGE_MAX_DAYS} days per request.`,
      security: USER_SECURITY,
    },
  });
