/**
 * Sign-up, sign-in and sign-out: the logic behind /api/auth/*, shared by the setup page and the
 * CLI. Route handlers only translate.
 */
import type { Settings } from "../lib/settings.ts";
import { Errors } from "../http/errors.ts";
import type { Config } from "../config.ts";
import { verifyPassword } from "./passwords.ts";
import type { LoginSessions, LoginSessionRow } from "./sessions.ts";
import { normalizeEmail, type UserRow, type Users } from "./users.ts";

export interface SignedIn {
  token: string;
  session: LoginSessionRow;
  user: UserRow;
}

export interface ClientMeta {
  ip?: string;
  userAgent?: string | null;
}

export class Accounts {
  constructor(
    private config: Config,
    private settings: Settings,
    private users: Users,
    private sessions: LoginSessions,
  ) {}

  /** closed (default) or open; /admin/config can change it at run time. */
  signupMode(): "closed" | "open" {
    return this.settings.get<"closed" | "open">("signup") ?? this.config.signup;
  }

  async signUp(input: { name?: unknown; email: unknown; password: unknown }, meta: ClientMeta): Promise<SignedIn> {
    if (this.signupMode() !== "open") throw Errors.forbidden("Sign-up is closed on this server: ask the operator for an account");
    const user = await this.users.create({ email: input.email, name: input.name, password: input.password, role: "user" });
    return { ...this.sessions.create(user.id, meta), user };
  }

  /** Same 401 (and the same work) for an unknown email and a wrong password. */
  async signIn(input: { email: unknown; password: unknown }, meta: ClientMeta): Promise<SignedIn> {
    const email = typeof input.email === "string" ? normalizeEmail(input.email) : "";
    const password = typeof input.password === "string" ? input.password : "";
    const user = email ? this.users.byEmail(email) : undefined;
    const ok = await verifyPassword(user?.password_hash, password);
    if (!user || !ok) throw Errors.unauthorized("Invalid email or password");
    if (user.disabled) throw Errors.forbidden("This account is disabled");
    return { ...this.sessions.create(user.id, meta), user };
  }

  signOut(loginSessionId: string | undefined) {
    if (loginSessionId) this.sessions.delete(loginSessionId);
  }
}
