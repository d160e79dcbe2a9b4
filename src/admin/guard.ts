/**
 * Guard for /admin/* and /metrics: `Authorization: Bearer <admin password>`. User tokens and
 * cookies never open it. With no admin password set every call is 401, saying how to set one.
 */
import { Elysia } from "elysia";
import { Errors } from "../http/errors.ts";
import type { AdminPassword } from "./password.ts";

export const ADMIN_SECURITY: Record<string, string[]>[] = [{ adminPassword: [] }];

export async function requireAdmin(adminPassword: AdminPassword, request: Request): Promise<void> {
  const h = request.headers.get("authorization");
  const presented = h && /^bearer\s+/i.test(h) ? h.replace(/^bearer\s+/i, "") : null;
  if (!adminPassword.isSet()) {
    throw Errors.unauthorized("No admin password is set: run `runcell admin set-password` or start with --admin-password-file");
  }
  if (!presented) throw Errors.unauthorized("Missing credentials: send Authorization: Bearer <admin password>");
  if (!(await adminPassword.verify(presented))) throw Errors.unauthorized("Invalid admin password");
}

export const adminGuard = (adminPassword: AdminPassword) =>
  new Elysia().onBeforeHandle({ as: "scoped" }, async ({ request }) => {
    await requireAdmin(adminPassword, request);
  });
