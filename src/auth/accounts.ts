/**
 * Sign-up, sign-in and sign-out: the logic behind /api/auth/*, shared by the setup page and the
 * CLI. Route handlers only translate.
 */
import { AppError, Errors } from "../lib/errors.ts";
import type { Config } from "../config.ts";
import type { AuditSink } from "../schema/audit.ts";
import type { DeviceCookies } from "./device.ts";
import { verifyPassword } from "./passwords.ts";
import type { LoginSessions, LoginSessionRow } from "./sessions.ts";
import { type LoginThrottle, signInKeys } from "./throttle.ts";
import { normalizeEmail, type UserRow, type Users } from "./users.ts";

export interface SignedIn {
  token: string;
  session: LoginSessionRow;
  user: UserRow;
  /** A password sign-in or sign-up: the Set-Cookie marking the browser as a known device of the account (src/auth/device.ts). */
  deviceCookie?: string;
}

export interface ClientMeta {
  ip?: string;
  userAgent?: string | null;
  /** The device cookie the request carried, if any. */
  device?: string | null;
}

/** The client's user agent for an audit row's details (bounded; absent when unknown). */
export const userAgentDetail = (meta: ClientMeta) => (meta.userAgent ? { user_agent: meta.userAgent.slice(0, 200) } : {});

export class Accounts {
  constructor(
    private config: Config,
    private users: Users,
    private sessions: LoginSessions,
    private throttle?: LoginThrottle,
    private audit?: AuditSink,
    private devices?: DeviceCookies,
  ) {}

  /**
   * closed (default) or open. `config.signup` is the live value: RuntimeConfig
   * (src/admin/runtime-config.ts) resolves it at start and PATCH /admin/config changes it.
   */
  signupMode(): "closed" | "open" {
    return this.config.signup;
  }

  async signUp(input: { name?: unknown; email: unknown; password: unknown; rememberMe?: boolean }, meta: ClientMeta): Promise<SignedIn> {
    if (this.signupMode() !== "open") throw Errors.forbidden("Sign-up is closed on this server: ask the operator for an account");
    const user = await this.users.create({ email: input.email, name: input.name, password: input.password, role: "user" });
    const signedIn = { ...(await this.sessions.create(user.id, { ...meta, remember: input.rememberMe !== false })), user, deviceCookie: this.devices?.issue(user.id) };
    await this.audit?.record({ action: "auth.sign_up", actor: "user", user_id: user.id, target_id: user.id, ip: meta.ip, details: { method: "password", email: user.email, ...userAgentDetail(meta) } });
    return signedIn;
  }

  /**
   * Same 401 (and the same work) for an unknown email and a wrong password. Throttled per account
   * (per device from a browser known to the account: src/auth/device.ts) and per client IP
   * (src/auth/throttle.ts): 429 with Retry-After after 5 failures. Audited:
   * auth.sign_in, or auth.sign_in_failed naming the email tried (never the password) and why.
   */
  async signIn(input: { email: unknown; password: unknown; rememberMe?: boolean }, meta: ClientMeta): Promise<SignedIn> {
    const email = typeof input.email === "string" ? normalizeEmail(input.email) : "";
    const password = typeof input.password === "string" ? input.password : "";
    const user = email ? await this.users.byEmail(email) : undefined;
    const check = async () => {
      const ok = await verifyPassword(user?.password_hash, password);
      return { ok: !!user && ok, value: ok };
    };
    const failed = (reason: "unknown_account" | "wrong_password" | "disabled" | "throttled") =>
      this.audit?.record({
        action: "auth.sign_in_failed",
        actor: "anonymous",
        user_id: user?.id ?? null,
        ip: meta.ip,
        details: { method: "password", email: email.slice(0, 320), reason, ...userAgentDetail(meta) },
      });
    let ok: boolean;
    try {
      const { keys, refundOnly } = signInKeys(email, meta.ip, this.devices?.deviceOf(meta.device, user?.id));
      ok = this.throttle ? await this.throttle.attempt(keys, check, "sign-in", refundOnly) : (await check()).value;
    } catch (e) {
      if (e instanceof AppError && e.code === "RATE_LIMITED") await failed("throttled");
      throw e;
    }
    if (!user || !ok) {
      await failed(user ? "wrong_password" : "unknown_account");
      throw Errors.unauthorized("Invalid email or password");
    }
    if (user.disabled) {
      await failed("disabled");
      throw Errors.forbidden("This account is disabled");
    }
    const signedIn = { ...(await this.sessions.create(user.id, { ...meta, remember: input.rememberMe !== false })), user, deviceCookie: this.devices?.issue(user.id) };
    await this.audit?.record({ action: "auth.sign_in", actor: "user", user_id: user.id, target_id: signedIn.session.id, ip: meta.ip, details: { method: "password", ...userAgentDetail(meta) } });
    return signedIn;
  }

  /** A new login session for a user found another way (setup link, OAuth). */
  async sessionFor(user: UserRow, meta: ClientMeta): Promise<SignedIn> {
    if (user.disabled) throw Errors.forbidden("This account is disabled");
    return { ...(await this.sessions.create(user.id, meta)), user };
  }

  /**
   * Ends the request's sign-in session, and the one its session cookie names — which is not the
   * request's credential when a bearer token came with it (the token wins): the cookie is cleared
   * in the answer, so its session must not outlive it.
   */
  async signOut(loginSessionId: string | undefined, cookieToken: string | null = null): Promise<void> {
    if (loginSessionId) await this.sessions.delete(loginSessionId);
    const byCookie = cookieToken ? await this.sessions.validate(cookieToken) : null;
    if (byCookie && byCookie.session.id !== loginSessionId) await this.sessions.delete(byCookie.session.id);
  }
}
