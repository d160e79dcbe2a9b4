/**
 * /admin/config: the run-time settings (rate limit, default per-profile concurrency, sign-up).
 * PATCH applies at once and is persisted (src/admin/runtime-config.ts explains the precedence
 * against flags and the environment at start).
 */
import { Elysia, t } from "elysia";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import type { Services } from "../../services.ts";
import { errorResponses, jsonBody } from "../schema.ts";

// default: undefined — t.UnionEnum otherwise carries its first value as a default that Elysia fills in.
const Signup = t.UnionEnum(["closed", "open"], { default: undefined, description: "closed: only the operator creates accounts; open: anyone may sign up as user" });
const ConfigSchema = t.Object({
  rate_limit: t.Object({ per_minute: t.Integer(), burst: t.Integer() }),
  default_max_concurrency: t.Integer(),
  signup: Signup,
});
const detail = (summary: string, description?: string) => ({ tags: ["Admin"], summary, description, security: ADMIN_SECURITY });

export const adminConfigRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/config" })
    .use(adminGuard(s.adminPassword))
    .get("", () => s.runtimeConfig.get(), {
      response: { 200: ConfigSchema, ...errorResponses(401, 429) },
      detail: detail("The run-time settings in effect"),
    })
    .patch("", ({ body }) => s.runtimeConfig.patch(body), {
      ...jsonBody(
        t.Object({
          rate_limit: t.Optional(
            t.Object({
              per_minute: t.Optional(t.Integer({ minimum: 1, maximum: 1_000_000_000, description: "Token-bucket refill per caller per minute" })),
              burst: t.Optional(t.Integer({ minimum: 1, maximum: 1_000_000_000, description: "Token-bucket size per caller" })),
            }),
          ),
          default_max_concurrency: t.Optional(t.Integer({ minimum: 1, maximum: 1000, description: "Running workspaces per profile unless the profile says otherwise" })),
          signup: t.Optional(Signup),
        }),
      ),
      response: { 200: ConfigSchema, ...errorResponses(400, 401, 415, 429) },
      detail: detail(
        "Change run-time settings",
        "Any subset of the fields. Applied at once (the rate limiter is reconfigured live) and persisted. At start an option set explicitly by flag, RUNCELL_* env or the data-dir file wins over the saved value (a warning is logged).",
      ),
    });
