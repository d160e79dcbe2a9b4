/**
 * First-run setup: the page at `GET /setup` is the dashboard's setup view (src/http/routes/web.ts),
 * which reads the one-time token from the URL fragment; `GET /api/auth/setup` says whether setup is
 * still open; `POST /api/auth/setup {token, email, password, name?}` creates the first account
 * with the admin role, sets the session cookie and answers 201 `{token, user}`. Logic in
 * src/auth/setup.ts.
 */
import { Elysia, t } from "elysia";
import { ABSOLUTE_MS, sessionCookie } from "../../auth/sessions.ts";
import { publicUser } from "../../auth/users.ts";
import { SetupBody, SignedIn } from "../../schema/user.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { errorResponses, jsonBody } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Auth"], summary, description, security: [] });

export const setupRoutes = (s: Services) =>
  new Elysia()
    .get("/api/auth/setup", async () => ({ setup_required: await s.setup.required() }), {
      response: { 200: t.Object({ setup_required: t.Boolean() }) },
      detail: detail("Whether the server still waits for its first account"),
    })
    .post(
      "/api/auth/setup",
      async ({ body, request, set }) => {
        const ctx = requestContext(request);
        const r = await s.setup.complete(body, { ip: ctx.ip, userAgent: request.headers.get("user-agent") });
        set.status = 201;
        set.headers["set-cookie"] = sessionCookie(s.authenticator.cookie, r.token, Math.floor(ABSOLUTE_MS / 1000));
        return { token: r.token, user: publicUser(r.user) };
      },
      {
        ...jsonBody(SetupBody),
        response: { 201: SignedIn, ...errorResponses(400, 401, 403, 429) },
        detail: detail(
          "Create the first (admin) account with the setup link",
          "Only while the server has no account. The token comes from the `/setup#<token>` link `runcell serve` prints (valid 30 minutes, single use). 401 for an unknown, used or expired token; 403 once an account exists.",
        ),
      },
    );
