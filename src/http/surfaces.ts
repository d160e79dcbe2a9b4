/**
 * Which credential each surface needs, checked once per request before its body or query is read
 * (so an anonymous caller gets 401, never a validation error that describes the route): /v1/*
 * (but the public OpenAPI document) needs a user, /admin/* and /metrics the admin password. The
 * router runs it from its first hook (parse or transform); route guards ask again, and the
 * request context makes every later ask free.
 */
import { requireAdmin } from "../admin/guard.ts";
import type { AdminPassword } from "../admin/password.ts";
import { requestContext } from "./context.ts";
import { requirePrincipal } from "./guards.ts";

export type Surface = "user" | "admin";

export function surfaceOf(path: string): Surface | null {
  if (path.startsWith("/v1/")) return path === "/v1/openapi.json" ? null : "user";
  if (path.startsWith("/admin/") || path === "/admin" || path === "/metrics") return "admin";
  return null;
}

export async function authorizeOnce(request: Request, surface: Surface, adminPassword: AdminPassword | null): Promise<void> {
  const ctx = requestContext(request);
  if (ctx.authorized) return;
  if (surface === "user") requirePrincipal(request);
  else await requireAdmin(adminPassword, request);
  ctx.authorized = true;
}
