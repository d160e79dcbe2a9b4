/**
 * The cookie-session surface, /api/auth/*, in better-auth's paths and shapes so its browser
 * client works against runcell.
 */
import { Elysia, t } from "elysia";
import type { SignedIn as SignedInResult } from "../../auth/accounts.ts";
import { clearSessionCookie, publicSession, readCookie, sessionCookie, ABSOLUTE_MS } from "../../auth/sessions.ts";
import { publicUser } from "../../auth/users.ts";
import { LoginSessionRecord, PublicUser, SignedIn, SignInBody, SignUpBody } from "../../schema/user.ts";
import type { Services } from "../../services.ts";
import { requestContext } from "../context.ts";
import { errorResponses, jsonBody } from "../schema.ts";

const detail = (summary: string) => ({ tags: ["Auth"], summary, security: [] });

export const authRoutes = (s: Services) => {
  const cookie = s.authenticator.cookie;
  const deviceCookie = s.devices.name;
  const meta = (request: Request) => ({ ip: requestContext(request).ip, userAgent: request.headers.get("user-agent"), device: readCookie(request.headers.get("cookie"), deviceCookie) });
  const answer = (set: { headers: Record<string, unknown> }, r: SignedInResult, remember: boolean) => {
    const session = sessionCookie(cookie, r.token, remember ? Math.floor(ABSOLUTE_MS / 1000) : null);
    set.headers["set-cookie"] = r.deviceCookie ? [session, r.deviceCookie] : session;
    return { token: r.token, user: publicUser(r.user) };
  };

  return new Elysia({ prefix: "/api/auth" })
    .post(
      "/sign-up/email",
      async ({ body, request, set }) => answer(set, await s.accounts.signUp(body, meta(request)), body.rememberMe !== false),
      {
        ...jsonBody(SignUpBody, { open: true }),
        response: { 200: SignedIn, ...errorResponses(400, 403, 429) },
        detail: detail("Create an account (403 while sign-up is closed)"),
      },
    )
    .post(
      "/sign-in/email",
      async ({ body, request, set }) => ({ redirect: false, ...answer(set, await s.accounts.signIn(body, meta(request)), body.rememberMe !== false) }),
      {
        ...jsonBody(SignInBody, { open: true }),
        response: { 200: t.Object({ redirect: t.Boolean(), ...SignedIn.properties }), ...errorResponses(400, 401, 403, 429) },
        detail: detail("Sign in with email and password; sets the session cookie"),
      },
    )
    .post(
      "/sign-out",
      async ({ request, set }) => {
        await s.accounts.signOut(requestContext(request).principal?.loginSession?.id, readCookie(request.headers.get("cookie"), cookie.name));
        set.headers["set-cookie"] = clearSessionCookie(cookie);
        return { success: true };
      },
      { response: { 200: t.Object({ success: t.Boolean() }) }, detail: detail("Sign out: deletes the server-side session and clears the cookie") },
    )
    .get(
      "/get-session",
      ({ request }) => {
        const p = requestContext(request).principal;
        if (!p?.loginSession) return new Response("null", { headers: { "content-type": "application/json" } });
        return { session: publicSession(p.loginSession), user: publicUser(p.user) };
      },
      {
        response: { 200: t.Union([t.Object({ session: LoginSessionRecord, user: PublicUser }), t.Null()]) },
        detail: { tags: ["Auth"], summary: "The current cookie session and its user, or null", security: [{ cookieSession: [] }] },
      },
    );
};
