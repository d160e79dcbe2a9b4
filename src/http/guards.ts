/**
 * Route guards. `userGuard()` resolves the request's principal (set by the pipeline) or answers
 * 401; every /v1 route module applies it once. Admin routes use the admin guard in
 * src/admin/guard.ts.
 */
import { Elysia } from "elysia";
import type { Principal } from "../auth/principal.ts";
import { requestContext } from "./context.ts";
import { Errors } from "./errors.ts";

export function requirePrincipal(request: Request): Principal {
  const ctx = requestContext(request);
  if (ctx.principal) return ctx.principal;
  throw Errors.unauthorized(
    ctx.authError === "invalid"
      ? "Invalid or expired credentials"
      : "Missing credentials: send Authorization: Bearer <API token> or the session cookie",
  );
}

/** Adds `principal` and `user` to every route of the module that uses it (401 otherwise). */
export const userGuard = () =>
  // The router has already checked the credential before the body and query were read
  // (src/http/surfaces.ts); this hands the caller to the handlers.
  new Elysia().resolve({ as: "scoped" }, ({ request }) => {
    const principal = requirePrincipal(request);
    return { principal, user: principal.user };
  });

export const USER_SECURITY: Record<string, string[]>[] = [{ bearerToken: [] }, { cookieSession: [] }];
