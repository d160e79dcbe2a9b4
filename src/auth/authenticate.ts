/**
 * Resolves the caller of a request, once, from `Authorization: Bearer rc_…` or the session cookie
 * (a bearer wins when both are sent). /admin/* is different: its bearer is the admin password,
 * checked by the admin guard, so no user principal is resolved there.
 */
import type { Authenticated, AuthUser, Principal } from "./principal.ts";
import { type CookieOptions, type LoginSessions, readCookie } from "./sessions.ts";
import type { ApiTokens, VerifiedToken, VerifyOptions } from "./tokens.ts";
import type { UserRow } from "./users.ts";
import { type TableChanges, TableMemo } from "../db/changes.ts";

export interface Credentials {
  bearer: string | null;
  cookie: string | null;
}

const NOBODY: Authenticated = Object.freeze({ principal: null, error: "missing" });

/** "Bearer" in any case, then whitespace (RFC 7235 schemes are case-insensitive). */
const BEARER = /^bearer\s+/i;

/** Visible ASCII: no whitespace of any kind to strip (NaN, past the end, is not). */
const printable = (c: number) => c > 32 && c < 127;

const authenticatedAs = (p: Principal | null): Authenticated => (p ? { principal: p, error: "missing" } : { principal: null, error: "invalid" });

const toAuthUser = (u: UserRow): AuthUser => ({ id: u.id, email: u.email, name: u.name, role: u.role, created_at: u.created_at });

const viaToken = (user: AuthUser | undefined, tokenId: string): Principal | null => (user ? { user, via: "token", tokenId } : null);

export class Authenticator {
  /**
   * A token's user, by token, kept while the users and api_tokens tables are unchanged (by this
   * server or any other process): the usual authenticated request reads nothing (and takes no
   * await), and a user disabled or a token deleted anywhere — by another replica too, whose
   * message may not have arrived yet — is refused on the very next request. Without `changes`
   * (PostgreSQL), read every time: one indexed join.
   */
  private callers: TableMemo<AuthUser> | null;

  constructor(
    private tokens: ApiTokens,
    private sessions: LoginSessions,
    readonly cookie: CookieOptions,
    changes?: TableChanges,
  ) {
    this.callers = changes ? new TableMemo(changes, ["users", "api_tokens"]) : null;
  }

  /**
   * The enabled user of token `tokenId` as a caller (undefined: the token is deleted, or its user
   * gone or disabled). Without a promise when memoized; a read is awaited. A token found deleted
   * is dropped from the verification cache (its sockets close).
   */
  private caller(tokenId: string): AuthUser | undefined | Promise<AuthUser | undefined> {
    const load = async () => {
      const user = await this.tokens.owner(tokenId);
      if (!user) this.tokens.evict(tokenId);
      return user && !user.disabled ? toAuthUser(user) : undefined;
    };
    return this.callers ? this.callers.get(tokenId, load) : load();
  }

  credentials(req: Request): Credentials {
    const h = req.headers.get("authorization");
    const bearer = h && BEARER.test(h) ? h.replace(BEARER, "").trim() : null;
    return { bearer, cookie: readCookie(req.headers.get("cookie"), this.cookie.name) };
  }

  /**
   * The principal for an API token, or null (unknown, deleted, disabled user). `opts.beforeCompare`
   * runs (and may throw) before a bcrypt compare is spent on it.
   */
  fromToken(token: string, opts?: VerifyOptions): Principal | null | Promise<Principal | null> {
    const verified = this.tokens.verify(token, opts);
    return verified instanceof Promise ? verified.then((v) => this.principalOf(v)) : this.principalOf(verified);
  }

  private principalOf(verified: VerifiedToken | null): Principal | null | Promise<Principal | null> {
    if (!verified) return null;
    const user = this.caller(verified.tokenId);
    return user instanceof Promise ? user.then((u) => viaToken(u, verified.tokenId)) : viaToken(user, verified.tokenId);
  }

  /** The principal for a session cookie, or null (unknown, expired, disabled user). */
  async fromCookie(token: string): Promise<Principal | null> {
    const valid = await this.sessions.validate(token);
    if (!valid || valid.user.disabled) return null;
    const { id, user_id, expires_at, created_at } = valid.session;
    return { user: toAuthUser(valid.user), via: "cookie", loginSession: { id, user_id, expires_at, created_at } };
  }

  resolve(creds: Credentials, opts?: VerifyOptions): Authenticated | Promise<Authenticated> {
    if (creds.bearer !== null) {
      const p = this.fromToken(creds.bearer, opts);
      return p instanceof Promise ? p.then(authenticatedAs) : authenticatedAs(p);
    }
    if (creds.cookie !== null) return this.fromCookie(creds.cookie).then(authenticatedAs);
    return NOBODY;
  }

  authenticate(req: Request, path: string, opts?: VerifyOptions): Authenticated | Promise<Authenticated> {
    if (path.startsWith("/admin/") || path === "/admin" || path === "/metrics") return NOBODY;
    const headers = req.headers;
    const h = headers.get("authorization");
    // The hot path: a bearer in the usual spelling, then no credential at all (no objects made).
    if (h !== null && h.startsWith("Bearer ") && printable(h.charCodeAt(7))) {
      const bearer = h.slice(7);
      return this.resolve({ bearer: printable(bearer.charCodeAt(bearer.length - 1)) ? bearer : bearer.trim(), cookie: null }, opts);
    }
    if (h === null && !headers.has("cookie")) return NOBODY;
    return this.resolve(this.credentials(req), opts);
  }
}
