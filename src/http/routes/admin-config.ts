/**
 * /admin/config: the run-time settings (rate limit, default per-profile concurrency, sign-up).
 * PATCH applies at once and is persisted (src/admin/runtime-config.ts explains the precedence
 * against flags and the environment at start).
 */
import { Elysia } from "elysia";
import { RuntimePatch, RuntimeSettings } from "../../schema/admin.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { ADMIN_SECURITY, adminGuard } from "../guards.ts";
import { errorResponses, jsonBody } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Admin"], summary, description, security: ADMIN_SECURITY });

export const adminConfigRoutes = (s: Services) =>
  new Elysia({ prefix: "/admin/config" })
    .use(adminGuard(s.adminPassword))
    .get("", () => s.runtimeConfig.get(), {
      response: { 200: RuntimeSettings, ...errorResponses(401, 429) },
      detail: detail("The run-time settings in effect"),
    })
    .patch("", ({ body, request }) => s.runtimeConfig.patch(body, { actor: "admin", ip: requestContext(request).ip }), {
      ...jsonBody(RuntimePatch),
      response: { 200: RuntimeSettings, ...errorResponses(400, 401, 429) },
      detail: detail(
        "Change run-time settings",
        "Any subset of the fields. Applied at once (the rate limiter is reconfigured live) and persisted. At start an option set explicitly by flag, RUNCELL_* env or the data-dir file wins over the saved value (a warning is logged).",
      ),
    });
