/**
 * Test accounts: a user (made through the real services), their API token, their session
 * cookie, and ready-made headers for each credential.
 */
import type { Role } from "../../src/auth/users.ts";
import type { TestApp } from "./app.ts";

export interface TestUser {
  id: string;
  email: string;
  password: string;
  role: Role;
  token: string;
  tokenId: string;
  cookie: string;
  /** Authorization: Bearer <token> + JSON content type. */
  bearer: Record<string, string>;
  /** Cookie + JSON content type + same-origin Origin. */
  session: Record<string, string>;
}

let counter = 0;

export async function createUser(t: TestApp, opts: { email?: string; role?: Role; password?: string } = {}): Promise<TestUser> {
  const s = t.app.services;
  const email = opts.email ?? `user${++counter}-${Date.now()}@example.com`;
  const password = opts.password ?? "correct horse battery";
  const user = await s.users.create({ email, name: email.split("@")[0], password, role: opts.role ?? "user" });
  const tok = await s.tokens.create(user.id, "test");
  const { token: sessionToken } = await s.loginSessions.create(user.id);
  const cookie = `${s.authenticator.cookie.name}=${sessionToken}`;
  return {
    id: user.id,
    email,
    password,
    role: user.role,
    token: tok.token,
    tokenId: tok.id,
    cookie,
    bearer: { authorization: `Bearer ${tok.token}`, "content-type": "application/json" },
    session: { cookie, "content-type": "application/json", origin: t.url },
  };
}

/** JSON helper: fetch + parse, returning status, headers and body. */
export async function api(t: TestApp, method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
  const res = await t.fetch(path, {
    method,
    headers: body !== undefined ? { "content-type": "application/json", ...headers } : headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, headers: res.headers, body: json };
}
