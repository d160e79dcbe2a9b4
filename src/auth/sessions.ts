/**
 * Cookie sessions. The cookie carries 256 random bits; only their SHA-256 is stored, so a leaked
 * database cannot be replayed as cookies. Every sign-in creates a new session row (and id).
 * Idle expiry 7 days, pushed forward at most once a day while used; absolute expiry 30 days (one day
 * for a sign-in that asked not to be remembered).
 */
import { eq, lt, or } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { loginSessions, users } from "../db/tables.ts";
import { randomToken, sha256Hex } from "../lib/crypto.ts";
import { iso } from "../lib/time.ts";
import type { UserRow } from "./users.ts";

const DAY = 86_400_000;
export const IDLE_MS = 7 * DAY;
export const ABSOLUTE_MS = 30 * DAY;
const REFRESH_EVERY_MS = DAY;
/** A sign-in with `rememberMe: false` (better-auth's rule): a browser-session cookie and a session of one day at most. */
export const SHORT_MS = DAY;

export const COOKIE_BASE = "runcell.session_token";

export type LoginSessionRow = typeof loginSessions.$inferSelect;

export interface CookieOptions {
  name: string;
  secure: boolean;
}

export function cookieOptions(publicUrl: string): CookieOptions {
  const secure = publicUrl.startsWith("https://");
  return { name: secure ? `__Secure-${COOKIE_BASE}` : COOKIE_BASE, secure };
}

/** Set-Cookie value for a session token; `maxAgeSec` null makes a browser-session cookie. */
export function sessionCookie(opts: CookieOptions, token: string, maxAgeSec: number | null): string {
  const parts = [`${opts.name}=${token}`, "Path=/", "HttpOnly", "SameSite=Lax"];
  if (maxAgeSec !== null) parts.push(`Max-Age=${maxAgeSec}`);
  if (opts.secure) parts.push("Secure");
  return parts.join("; ");
}

export function clearSessionCookie(opts: CookieOptions): string {
  return sessionCookie(opts, "", 0);
}

/**
 * Reads one cookie from a Cookie header without allocating a map. A value that is not valid
 * percent-encoding (`%E0%A4%A`) is returned as sent: it matches no session, state or verifier, so
 * it is refused like any other bad credential instead of throwing.
 */
export function readCookie(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(";")) {
    const eqAt = part.indexOf("=");
    if (eqAt < 0) continue;
    if (part.slice(0, eqAt).trim() === name) {
      const raw = part.slice(eqAt + 1).trim();
      if (!raw.includes("%")) return raw;
      try {
        return decodeURIComponent(raw);
      } catch {
        return raw;
      }
    }
  }
  return null;
}

export interface ValidSession {
  session: LoginSessionRow;
  user: UserRow;
}

/** When a login session ends: its idle expiry or its absolute one, whichever comes first. */
const endOf = (s: { expires_at: number; absolute_expires_at: number }) => Math.min(s.expires_at, s.absolute_expires_at);

export class LoginSessions {
  /** Called with a user id whose sessions were all removed (sockets close). */
  onRevokeUser: ((userId: string) => void)[] = [];
  /** Called with a login session id that was deleted (sign-out, or `expired`; its sockets close). */
  onRevokeSession: ((loginSessionId: string, expired: boolean) => void)[] = [];

  constructor(
    private db: DB,
    private now: () => number,
  ) {}

  async create(userId: string, meta: { ip?: string; userAgent?: string | null; remember?: boolean } = {}): Promise<{ token: string; session: LoginSessionRow }> {
    const token = randomToken(32);
    const now = this.now();
    const session: LoginSessionRow = {
      id: newId("login"),
      user_id: userId,
      token_hash: sha256Hex(token),
      expires_at: now + (meta.remember === false ? SHORT_MS : IDLE_MS),
      absolute_expires_at: now + (meta.remember === false ? SHORT_MS : ABSOLUTE_MS),
      refreshed_at: now,
      ip: meta.ip ?? null,
      user_agent: meta.userAgent?.slice(0, 300) ?? null,
      created_at: now,
    };
    await this.db.insert(loginSessions).values(session);
    return { token, session };
  }

  /** The session and user for a cookie token, or null when unknown or expired (endOf). */
  async validate(token: string): Promise<ValidSession | null> {
    if (!token || token.length > 200) return null;
    const row = await first(
      this.db
        .select({ session: loginSessions, user: users })
        .from(loginSessions)
        .innerJoin(users, eq(users.id, loginSessions.user_id))
        .where(eq(loginSessions.token_hash, sha256Hex(token))),
    );
    if (!row) return null;
    const now = this.now();
    const { session } = row;
    if (endOf(session) <= now) {
      // Ended like a sign-out: the sockets it opened close too.
      await this.delete(session.id, true);
      return null;
    }
    if (now - session.refreshed_at >= REFRESH_EVERY_MS) {
      session.expires_at = Math.min(now + IDLE_MS, session.absolute_expires_at);
      session.refreshed_at = now;
      await this.db.update(loginSessions).set({ expires_at: session.expires_at, refreshed_at: now }).where(eq(loginSessions.id, session.id));
    }
    return row;
  }

  /**
   * When the session ends as things stand (its idle expiry may have moved since a socket read it),
   * or null when it has ended — an expired row is deleted here, and its sockets closed, as at sign-out.
   */
  async endsAt(sessionId: string): Promise<number | null> {
    const row = await first(this.db.select().from(loginSessions).where(eq(loginSessions.id, sessionId)));
    if (!row) return null;
    const ends = endOf(row);
    if (ends > this.now()) return ends;
    await this.delete(row.id, true);
    return null;
  }

  /** Ends a sign-in session: signed out, or found `expired` (the sockets it opened say which). */
  async delete(sessionId: string, expired = false): Promise<void> {
    await this.db.delete(loginSessions).where(eq(loginSessions.id, sessionId));
    for (const f of this.onRevokeSession) f(sessionId, expired);
  }

  async deleteAllForUser(userId: string): Promise<void> {
    await this.db.delete(loginSessions).where(eq(loginSessions.user_id, userId));
    for (const f of this.onRevokeUser) f(userId);
  }

  /** Removes expired rows (a worker calls this hourly); the sockets they opened close, as at sign-out. */
  async purgeExpired(): Promise<number> {
    const now = this.now();
    const gone = await this.db
      .delete(loginSessions)
      .where(or(lt(loginSessions.expires_at, now), lt(loginSessions.absolute_expires_at, now)))
      .returning({ id: loginSessions.id });
    for (const { id } of gone) for (const f of this.onRevokeSession) f(id, true);
    return gone.length;
  }
}

export const publicSession = (s: Pick<LoginSessionRow, "id" | "user_id" | "expires_at" | "created_at">) => ({ id: s.id, user_id: s.user_id, expires_at: iso(s.expires_at), created_at: iso(s.created_at) });
