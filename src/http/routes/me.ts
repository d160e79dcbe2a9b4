/** GET /v1/me: the caller, the limits the operator's policy sets for them, and their current use. */
import { Elysia } from "elysia";
import { publicUser } from "../../auth/users.ts";
import { Me } from "../../schema/me.ts";
import type { Services } from "../../services.ts";
import { USER_SECURITY, userGuard } from "../guards.ts";
import { errorResponses } from "../schema.ts";

export const meRoutes = (s: Services) =>
  new Elysia({ prefix: "/v1/me" }).use(userGuard()).get("", async ({ user }) => ({ ...publicUser(user), ...(await s.policy.me(user.id)) }), {
    response: { 200: Me, ...errorResponses(401, 429) },
    detail: {
      tags: ["Account"],
      summary: "You: your account, your limits on this server and your use of them",
      description:
        "limits: the operator's policy with any overrides for you (exempt: true for admins, to whom only workspace_disk_mb applies). usage: your profiles, running workspaces and this month's spend on the server's own model keys.",
      security: USER_SECURITY,
    },
  });
