/**
 * Guard for /admin/* and /metrics: `Authorization: Bearer <admin password>`. User tokens and
 * cookies never open it. With no admin password set every call is 401, saying how to set one.
 * Wrong passwords are throttled per client IP like sign-in (429 with Retry-After after 5). The
 * check runs before the body is validated, so an anonymous caller only ever learns "401".
 */
import { Elysia } from "elysia";
import { adminKeys } from "../auth/throttle.ts";
import { requestContext } from "../http/context.ts";
import { Errors } from "../http/errors.ts";
import { authorizeOnce } from "../http/surfaces.ts";
import type { AdminPassword } from "./password.ts";

export const ADMIN_SECURITY: Record<string, string[]>[] = [{ adminPassword: [] }];

export async function requireAdmin(adminPassword: AdminPassword | null, request: Request): Promise<void> {
  const h = request.headers.get("authorization");
  const presented = h && /^bearer\s+/i.test(h) ? h.replace(/^bearer\s+/i, "") : null;
  if (!adminPassword?.isSet()) {
    throw Errors.unauthorized("No admin password is set: run `runcell admin set-password` or start with --admin-password-file");
  }
  if (!presented) throw Errors.unauthorized("Missing credentials: send Authorization: Bearer <admin password>");
  const check = async () => {
    const ok = await adminPassword.verify(presented);
    return { ok, value: ok };
  };
  const throttle = adminPassword.throttle;
  const ok = throttle ? await throttle.attempt(adminKeys(requestContext(request).ip), check, "admin password") : (await check()).value;
  if (!ok) throw Errors.unauthorized("Invalid admin password");
}

/** Marks a module as admin-only; the check itself happens once per request (src/http/surfaces.ts). */
export const adminGuard = (adminPassword: AdminPassword) =>
  new Elysia().onTransform({ as: "scoped" }, ({ request }) => authorizeOnce(request, "admin", adminPassword));
