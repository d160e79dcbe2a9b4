/**
 * Sign-in with GitHub / Google, in better-auth's paths and shapes:
 * `POST /api/auth/sign-in/social {provider, callbackURL?}` → 200 `{url, redirect:true}` plus the
 * flow cookies; `GET /api/auth/callback/:provider?code&state` → session cookie and 302 to the
 * callbackURL (same-origin paths only, else `/`); `GET /api/auth/providers` lists the configured
 * providers, and whether sign-up is open (`--signup`), so a UI offers only those buttons. Logic in src/auth/oauth.ts.
 */
import { Elysia, t } from "elysia";
import { ABSOLUTE_MS, sessionCookie } from "../../auth/sessions.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { AppError, Errors } from "../../lib/errors.ts";
import { OAuthRedirectedError } from "../../auth/oauth.ts";
import { errorResponse } from "../errors.ts";
import { OneOf } from "../../schema/common.ts";
import { errorResponses, jsonBody } from "../schema.ts";

const detail = (summary: string, description?: string) => ({ tags: ["Auth"], summary, description, security: [] });
// default: undefined — t.UnionEnum otherwise carries its first value as a default that Elysia fills in.
const Provider = OneOf(["github", "google"], { description: "github or google (only configured ones work; others are 404)" });

export const oauthRoutes = (s: Services) => {
  const cookie = s.authenticator.cookie;
  return new Elysia({ prefix: "/api/auth" })
    .get("/providers", () => ({ providers: s.oauth.providers(), signup: s.accounts.signupMode() }), {
      response: {
        200: t.Object({
          providers: t.Array(Provider),
          signup: OneOf(["closed", "open"], { description: "open: anyone may create an account with POST /api/auth/sign-up/email (--signup)" }),
        }),
      },
      detail: detail("How one may sign in here: the OAuth providers configured, and whether sign-up is open"),
    })
    .post(
      "/sign-in/social",
      ({ body, set }) => {
        if (body.idToken !== undefined) throw Errors.validation("idToken", "Signing in with a provider's ID token is not supported here: use the redirect flow (send the browser to url)", { reason: "not supported" });
        const { url, cookies } = s.oauth.start(body.provider, body);
        set.headers["set-cookie"] = cookies;
        set.headers["cache-control"] = "no-store";
        return { url, redirect: body.disableRedirect !== true };
      },
      {
        ...jsonBody(
          // better-auth's signIn.social options: every one its client sends is taken.
          t.Object({
            provider: Provider,
            callbackURL: t.Optional(t.String({ maxLength: 2048, description: "Where to land after sign-in: a path of this server (anything else becomes /)" })),
            newUserCallbackURL: t.Optional(t.String({ maxLength: 2048, description: "Where to land when the sign-in made the account (a path of this server; default callbackURL)" })),
            errorCallbackURL: t.Optional(
              t.String({ maxLength: 2048, description: "Where a refused sign-in lands, with ?error=<code>&error_description=… (a path of this server; default: the error as JSON)" }),
            ),
            disableRedirect: t.Optional(t.Boolean({ description: "Answer redirect: false (the client then does not navigate by itself)" })),
            loginHint: t.Optional(t.String({ maxLength: 320, description: "The account to suggest at the provider (Google's login_hint, GitHub's login)" })),
            scopes: t.Optional(t.Array(t.String({ maxLength: 200 }), { maxItems: 50, description: "Accepted and ignored: runcell asks only for the scopes sign-in needs" })),
            requestSignUp: t.Optional(t.Boolean({ description: "Accepted and ignored: whether a new account may be made is the server's --signup" })),
            additionalData: t.Optional(t.Record(t.String(), t.Unknown(), { description: "Accepted and ignored" })),
            idToken: t.Optional(t.Unknown({ description: "Not supported (400): use the redirect flow" })),
          }),
        ),
        response: { 200: t.Object({ url: t.String(), redirect: t.Boolean() }), ...errorResponses(400, 403, 404, 429) },
        detail: detail(
          "Start an OAuth sign-in",
          "Answers the provider's authorize URL (state + PKCE S256) and sets two 10-minute HttpOnly cookies for the callback. Send the browser to `url`.",
        ),
      },
    )
    .get(
      "/callback/:provider",
      async ({ params, query, request }) => {
        const clear = s.oauth.clearCookies();
        /** A 302 to `location` that clears the flow cookies (and sets `more`). */
        const redirect = (location: string, ...more: string[]) => {
          const headers = new Headers({ location, "cache-control": "no-store" });
          for (const c of [...clear, ...more]) headers.append("set-cookie", c);
          return new Response(null, { status: 302, headers });
        };
        try {
          const ctx = requestContext(request);
          const { signedIn, redirectTo } = await s.oauth.callback(params.provider, query, request.headers.get("cookie"), {
            ip: ctx.ip,
            userAgent: request.headers.get("user-agent"),
          });
          return redirect(redirectTo, sessionCookie(cookie, signedIn.token, Math.floor(ABSOLUTE_MS / 1000)));
        } catch (e) {
          if (e instanceof OAuthRedirectedError) return redirect(e.location);
          if (!(e instanceof AppError)) throw e;
          const res = errorResponse(e, { "cache-control": "no-store" });
          for (const c of clear) res.headers.append("set-cookie", c);
          return res;
        }
      },
      {
        query: t.Object(
          {
            code: t.Optional(t.String({ maxLength: 2048 })),
            state: t.Optional(t.String({ maxLength: 512 })),
            error: t.Optional(t.String({ maxLength: 512 })),
          },
          // Providers add their own parameters (scope, authuser, iss…).
          { additionalProperties: true },
        ),
        response: { 302: t.Void(), ...errorResponses(400, 401, 403, 404, 429, 502) },
        detail: detail(
          "OAuth redirect target",
          "Register `{public_url}/api/auth/callback/<provider>` with the provider. Checks state (once) and PKCE, signs in (cookie) and redirects to the callbackURL. A bad state is 400; an unverified email or closed sign-up 403; a provider failure 502.",
        ),
      },
    );
};
