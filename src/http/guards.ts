/**
 * Who may call what, checked once per request before its body or query is read (so an anonymous
 * caller gets 401, never a validation error that describes the route):
 * - /v1/* (but the public OpenAPI and AsyncAPI documents) needs a user: a cookie or an API token,
 *   resolved by the pipeline (`requirePrincipal`);
 * - /admin/* and /metrics need the admin password as bearer (`requireAdmin`; user tokens and
 *   cookies never open them).
 * The router runs `authorizeOnce` from its first hook (parse or transform); the route guards
 * (`userGuard`, `adminGuard`) ask again, and the request context makes every later ask free.
 */
import { Elysia } from "elysia";
import type { AdminPassword } from "../admin/password.ts";
import type { Principal } from "../auth/principal.ts";
import { Errors } from "../lib/errors.ts";
import { requestContext } from "./context.ts";

export type Surface = "user" | "admin";

const PUBLIC_V1 = new Set(["/v1/openapi.json", "/v1/asyncapi.json"]);

export function surfaceOf(path: string): Surface | null {
  if (path.startsWith("/v1/")) return PUBLIC_V1.has(path) ? null : "user";
  if (path.startsWith("/admin/") || path === "/admin" || path === "/metrics") return "admin";
  return null;
}

export function requirePrincipal(request: Request): Principal {
  const ctx = requestContext(request);
  if (ctx.principal) return ctx.principal;
  throw Errors.unauthorized(
    ctx.authError === "invalid"
      ? "Invalid or expired credentials"
      : "Missing credentials: send Authorization: Bearer <API token> or the session cookie",
  );
}

export async function requireAdmin(adminPassword: AdminPassword | null, request: Request): Promise<void> {
  const h = request.headers.get("authorization");
  const presented = h && /^bearer\s+/i.test(h) ? h.replace(/^bearer\s+/i, "") : null;
  if (!adminPassword) throw Errors.unauthorized("No admin password is set: run `runcell admin set-password` or start with --admin-password-file");
  // The path and user agent only for a refusal's audit row.
  await adminPassword.authorize(presented, requestContext(request).ip, () => ({ path: new URL(request.url).pathname, userAgent: request.headers.get("user-agent") }));
}

/** Answers without a promise for the user surface (the usual request takes no await here). */
export function authorizeOnce(request: Request, surface: Surface, adminPassword: AdminPassword | null): void | Promise<void> {
  const ctx = requestContext(request);
  if (ctx.authorized) return;
  if (surface === "user") {
    requirePrincipal(request);
    ctx.authorized = true;
    return;
  }
  return requireAdmin(adminPassword, request).then(() => {
    ctx.authorized = true;
  });
}

/** Adds `principal` and `user` to every route of the module that uses it (401 otherwise). */
export const userGuard = () =>
  new Elysia().resolve({ as: "scoped" }, ({ request }) => {
    const principal = requirePrincipal(request);
    return { principal, user: principal.user };
  });

/** Marks a module as admin-only; the check itself happens once per request (authorizeOnce). */
export const adminGuard = (adminPassword: AdminPassword) =>
  new Elysia().onTransform({ as: "scoped" }, ({ request }) => authorizeOnce(request, "admin", adminPassword));

export const USER_SECURITY: Record<string, string[]>[] = [{ bearerToken: [] }, { cookieSession: [] }];
export const ADMIN_SECURITY: Record<string, string[]>[] = [{ adminPassword: [] }];
