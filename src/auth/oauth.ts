/**
 * Sign-in with GitHub or Google (authorization code + PKCE S256, through arctic's generic
 * OAuth2Client so every endpoint is configurable).
 *
 * start: a random `state` and PKCE verifier go into two short-lived (10 min) HttpOnly SameSite=Lax
 * cookies scoped to /api/auth/callback. The state cookie also carries the flow (provider, the
 * after-sign-in paths, its expiry), signed with a server key: the server keeps nothing per started
 * sign-in, so no flood of started sign-ins can push out another's, and any replica can complete it.
 * callback: the `state` query must equal the state cookie's, its signature hold, its flow be this
 * provider's and unexpired, and the state not spent; it is spent before anything else happens (the
 * spent states are remembered until they expire). The code is exchanged with the verifier from the cookie,
 * the identity read from the provider, and the user found: by a known provider account, else by
 * the provider's *verified* email (linked to an account whose address is verified too: made by
 * the operator or by an earlier OAuth sign-in), else created — only while sign-up is open. A
 * provider failure during the exchange or the lookup is 502 BAD_GATEWAY.
 */
// arctic is loaded on first use (only operators who configure OAuth need it).
type Arctic = typeof import("arctic");
let arcticModule: Arctic | null = null;
const arctic = (): Arctic => (arcticModule ??= require("arctic") as Arctic);
import { and, eq } from "drizzle-orm";
import type { Config, OAuthProviderConfig } from "../config.ts";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { oauthAccounts, users } from "../db/tables.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { hmacSha256Hex, safeEqual, sha256Hex } from "../lib/crypto.ts";
import { type Logger, redactString } from "../log.ts";
import type { AuditSink } from "../schema/audit.ts";
import { type Accounts, type ClientMeta, type SignedIn, userAgentDetail } from "./accounts.ts";
import { PROVIDER_SPECS, PROVIDER_TIMEOUT_MS, PROVIDERS, ProviderError, type ProviderIdentity, type ProviderName } from "./oauth-providers.ts";
import { readCookie } from "./sessions.ts";
import { isEmail, isUniqueViolation, NAME_FORBIDDEN, NAME_MAX, normalizeEmail, type UserRow, type Users } from "./users.ts";

export const OAUTH_FLOW_MS = 10 * 60_000;
/** Spent states remembered (until their flow expires; the oldest go first past this). */
const MAX_SPENT = 100_000;
/** The state cookie's longest value (a browser keeps ~4 KB a cookie): the after-sign-in paths share it. */
const MAX_STATE_COOKIE = 3800;
/** The settings row of the key that signs the flow cookies (sealed; Settings.sealedKey). */
export const OAUTH_FLOW_KEY_SETTING = "auth.oauth_flow_key";
const CALLBACK_PATH = "/api/auth/callback";
const LABEL: Record<ProviderName, string> = { github: "GitHub", google: "Google" };

interface Flow {
  provider: ProviderName;
  redirectTo: string;
  /** better-auth's `newUserCallbackURL`: where a sign-in that made the account lands. */
  newUserRedirectTo: string | null;
  /** better-auth's `errorCallbackURL`: where a refused sign-in lands (with `?error=`), not a JSON error. */
  errorRedirectTo: string | null;
  expires: number;
}

/** What `POST /api/auth/sign-in/social` passes on besides the provider (better-auth's names). */
export interface SocialStartOptions {
  callbackURL?: unknown;
  newUserCallbackURL?: unknown;
  errorCallbackURL?: unknown;
  /** Passed to the provider as its account hint (Google's `login_hint`, GitHub's `login`). */
  loginHint?: string;
}

/** A refused sign-in whose flow named an `errorCallbackURL`: the callback redirects there. */
export class OAuthRedirectedError extends Error {
  constructor(
    readonly error: AppError,
    readonly location: string,
  ) {
    super(error.message);
  }
}

/**
 * Whether a path, as sent in a Location header, can only be read as a path on this origin: it
 * starts with exactly one "/" and not "//" or "/\\" (a browser's other host) — also once its
 * tabs and newlines are dropped, its backslashes read as slashes and it is percent-decoded (again
 * and again, for a proxy or client that decodes twice).
 */
function isLocalPath(path: string): boolean {
  let s = path;
  for (let round = 0; round < 4; round++) {
    const probe = s.replace(/[\t\n\r]/g, "").replace(/\\/g, "/");
    if (!probe.startsWith("/") || probe.startsWith("//") || /[\u0000-\u001f\u007f]/.test(s)) return false;
    let next: string;
    try {
      next = decodeURIComponent(s);
    } catch {
      return false;
    }
    if (next === s) return true;
    s = next;
  }
  return false;
}

/** `path` with `?error=<code>&error_description=<message>` added, as better-auth's errorCallbackURL gets it. */
function withError(path: string, e: AppError): string {
  const u = new URL(path, "http://x");
  u.searchParams.set("error", e.code.toLowerCase());
  u.searchParams.set("error_description", e.message.slice(0, 300));
  return u.pathname + u.search + u.hash;
}

/** A provider's display name as an account name: control and invisible formatting characters dropped, at most 200 characters, else the email's local part. */
export function accountName(name: string | null | undefined, email: string): string {
  const clean = (name ?? "").replace(NAME_FORBIDDEN, "").trim();
  return (clean ? [...clean].slice(0, NAME_MAX).join("").trim() : "") || email.slice(0, email.indexOf("@")).slice(0, NAME_MAX) || "user";
}

/**
 * `callbackURL` reduced to a same-origin path; anything else (other origin, scheme, a path a
 * browser could read as another host such as `/.//evil.example`, control characters, backslashes,
 * junk) is "/".
 */
export function safeRedirectPath(input: unknown, publicUrl: string): string {
  if (typeof input !== "string" || input === "" || input.length > 2048) return "/";
  // Browsers drop tabs and newlines and read "\\" as "/": such input is refused, not repaired.
  if (/[\u0000-\u001f\u007f\\]/.test(input)) return "/";
  try {
    const base = new URL(publicUrl);
    const u = new URL(input, base.origin + "/");
    if (u.origin !== base.origin) return "/";
    const path = u.pathname + u.search + u.hash;
    return isLocalPath(path) ? path : "/";
  } catch {
    return "/";
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProviderError(`${what} did not answer within ${ms / 1000} s`, "timeout")), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export class OAuth {
  /** Spent states (SHA-256) and when their flows expire. */
  private spent = new Map<string, number>();
  readonly stateCookie: string;
  readonly verifierCookie: string;
  private secure: boolean;

  constructor(
    private config: Config,
    private db: DB,
    private users: Users,
    private accounts: Accounts,
    private now: () => number,
    private log: Logger,
    private flowKey: Uint8Array,
    private audit?: AuditSink,
  ) {
    this.secure = config.publicUrl.startsWith("https://");
    const prefix = this.secure ? "__Secure-" : "";
    this.stateCookie = `${prefix}runcell.oauth_state`;
    this.verifierCookie = `${prefix}runcell.oauth_verifier`;
  }

  /** The providers the operator configured (the only ones a UI should offer). */
  providers(): ProviderName[] {
    return PROVIDERS.filter((p) => this.config[p] !== null);
  }

  /** The provider's configuration, or NOT_FOUND: an unconfigured provider has no paths. */
  private provider(name: string): { name: ProviderName; cfg: OAuthProviderConfig } {
    const p = PROVIDERS.find((x) => x === name);
    const cfg = p ? this.config[p] : null;
    if (!p || !cfg) throw Errors.notFound("OAuth provider", name);
    return { name: p, cfg };
  }

  redirectUri(provider: ProviderName): string {
    return `${this.config.publicUrl}${CALLBACK_PATH}/${provider}`;
  }

  private cookie(name: string, value: string, maxAgeSec: number): string {
    const parts = [`${name}=${value}`, `Path=${CALLBACK_PATH}`, "HttpOnly", "SameSite=Lax", `Max-Age=${maxAgeSec}`];
    if (this.secure) parts.push("Secure");
    return parts.join("; ");
  }

  /** Set-Cookie values that delete the flow cookies (sent with every callback answer). */
  clearCookies(): string[] {
    return [this.cookie(this.stateCookie, "", 0), this.cookie(this.verifierCookie, "", 0)];
  }

  /** Begins a sign-in: the provider's authorize URL and the two flow cookies. */
  start(providerName: string, opts: SocialStartOptions = {}): { url: string; cookies: string[] } {
    const { name, cfg } = this.provider(providerName);
    const { generateState, generateCodeVerifier, OAuth2Client, CodeChallengeMethod } = arctic();
    const state = generateState();
    const verifier = generateCodeVerifier();
    const client = new OAuth2Client(cfg.clientId, cfg.clientSecret, this.redirectUri(name));
    const url = client.createAuthorizationURLWithPKCE(cfg.authorizeUrl, state, CodeChallengeMethod.S256, verifier, PROVIDER_SPECS[name].scopes);
    if (opts.loginHint) url.searchParams.set(PROVIDER_SPECS[name].loginHintParam, opts.loginHint);
    const optional = (v: unknown) => (v === undefined || v === null || v === "" ? null : safeRedirectPath(v, this.config.publicUrl));
    const flow: Flow = {
      provider: name,
      redirectTo: safeRedirectPath(opts.callbackURL, this.config.publicUrl),
      newUserRedirectTo: optional(opts.newUserCallbackURL),
      errorRedirectTo: optional(opts.errorCallbackURL),
      expires: this.now() + OAUTH_FLOW_MS,
    };
    const signed = `${state}.${Buffer.from(JSON.stringify(flow)).toString("base64url")}`;
    const value = `${signed}.${this.sign(signed)}`;
    if (value.length > MAX_STATE_COOKIE) {
      throw Errors.validation("callbackURL", `callbackURL, newUserCallbackURL and errorCallbackURL are too long together (a browser cookie carries them): keep them under about ${Math.floor((MAX_STATE_COOKIE - 200) * 0.75)} characters`);
    }
    const maxAge = OAUTH_FLOW_MS / 1000;
    return { url: url.toString(), cookies: [this.cookie(this.stateCookie, value, maxAge), this.cookie(this.verifierCookie, verifier, maxAge)] };
  }

  private sign(signed: string): string {
    return hmacSha256Hex(this.flowKey, `oauth-flow\n${signed}`);
  }

  /**
   * Completes a sign-in from the provider's redirect; the caller sets the session cookie. Audited:
   * auth.sign_in (or auth.sign_up for a new account, auth.oauth_linked when an existing account is
   * linked), and every refusal after the provider is known as auth.sign_in_failed with the
   * provider's email when it was read.
   */
  async callback(
    providerName: string,
    query: { code?: string; state?: string; error?: string },
    cookieHeader: string | null,
    meta: ClientMeta,
  ): Promise<{ signedIn: SignedIn; redirectTo: string }> {
    const { name, cfg } = this.provider(providerName);
    const seen: { email?: string; userId?: string; flow?: Flow } = {};
    try {
      return await this.complete(name, cfg, query, cookieHeader, meta, seen);
    } catch (e) {
      if (e instanceof AppError) {
        await this.audit?.record({
          action: "auth.sign_in_failed",
          actor: "anonymous",
          user_id: seen.userId ?? null,
          ip: meta.ip,
          details: {
            method: name,
            ...(seen.email ? { email: seen.email.slice(0, 320) } : {}),
            reason: e.code,
            error: redactString(e.message.slice(0, 300)),
            ...userAgentDetail(meta),
          },
        });
        if (seen.flow?.errorRedirectTo) throw new OAuthRedirectedError(e, withError(seen.flow.errorRedirectTo, e));
      }
      throw e;
    }
  }

  private async complete(
    name: ProviderName,
    cfg: OAuthProviderConfig,
    query: { code?: string; state?: string; error?: string },
    cookieHeader: string | null,
    meta: ClientMeta,
    seen: { email?: string; userId?: string; flow?: Flow },
  ): Promise<{ signedIn: SignedIn; redirectTo: string }> {
    const flow = this.consumeState(name, query.state, readCookie(cookieHeader, this.stateCookie));
    seen.flow = flow;
    if (query.error) {
      throw Errors.unauthorized(`${LABEL[name]} did not authorize the sign-in (${String(query.error).slice(0, 100)})`);
    }
    if (!query.code) throw Errors.validation("code", "The callback has no authorization code");
    const verifier = readCookie(cookieHeader, this.verifierCookie);
    if (!verifier) throw Errors.validation("state", "The PKCE verifier cookie is missing: start the sign-in again");

    let identity: ProviderIdentity;
    try {
      const accessToken = await this.exchange(name, cfg, query.code, verifier);
      identity = await withTimeout(PROVIDER_SPECS[name].identity(cfg, accessToken), PROVIDER_TIMEOUT_MS * 2, `${LABEL[name]}'s user API`);
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      this.log.warn("oauth provider failure", { provider: name, reason: e.reason, error: e.message });
      throw new AppError("BAD_GATEWAY", `${LABEL[name]} sign-in failed: ${e.message}`, { provider: name, reason: e.reason });
    }
    if (identity.email) seen.email = normalizeEmail(identity.email);
    const { user, created } = await this.findOrCreateUser(name, identity, meta, seen);
    seen.userId = user.id;
    const signedIn = await this.accounts.sessionFor(user, meta);
    await this.audit?.record({
      action: created ? "auth.sign_up" : "auth.sign_in",
      actor: "user",
      user_id: user.id,
      target_id: created ? user.id : signedIn.session.id,
      ip: meta.ip,
      details: { method: name, ...(created ? { email: user.email } : {}), ...userAgentDetail(meta) },
    });
    return { signedIn, redirectTo: (created && flow.newUserRedirectTo) || flow.redirectTo };
  }

  /** The state must match the cookie's, which must be ours, unexpired and this provider's; it is spent at once. */
  private consumeState(provider: ProviderName, state: string | undefined, cookieValue: string | null): Flow {
    const refuse = (why: string) => Errors.validation("state", `OAuth state ${why}: start the sign-in again`);
    if (!state) throw refuse("is missing from the callback");
    if (!cookieValue) throw refuse("cookie is missing (expired, or the sign-in was started in another browser)");
    const [cookieState = "", payload = "", sig = ""] = cookieValue.split(".");
    if (state.length > 200 || !safeEqual(state, cookieState)) throw refuse("does not match this browser's sign-in");
    let flow: Flow | null = null;
    if (safeEqual(sig, this.sign(`${cookieState}.${payload}`))) {
      try {
        flow = JSON.parse(Buffer.from(payload, "base64url").toString()) as Flow;
      } catch {
        flow = null;
      }
    }
    const now = this.now();
    for (const [k, expires] of this.spent) {
      if (expires > now && this.spent.size < MAX_SPENT) break;
      this.spent.delete(k);
    }
    const key = sha256Hex(state);
    if (!flow || flow.expires <= now || this.spent.has(key)) throw refuse("is unknown, expired or already used");
    this.spent.set(key, flow.expires);
    if (flow.provider !== provider) throw refuse("belongs to another provider");
    return flow;
  }

  private async exchange(name: ProviderName, cfg: OAuthProviderConfig, code: string, verifier: string): Promise<string> {
    const { OAuth2Client, OAuth2RequestError, ArcticFetchError, UnexpectedResponseError, UnexpectedErrorResponseBodyError } = arctic();
    const client = new OAuth2Client(cfg.clientId, cfg.clientSecret, this.redirectUri(name));
    let data: Record<string, unknown>;
    try {
      const tokens = await withTimeout(client.validateAuthorizationCode(cfg.tokenUrl, code, verifier), PROVIDER_TIMEOUT_MS, `${LABEL[name]}'s token endpoint`);
      data = tokens.data as Record<string, unknown>;
    } catch (e) {
      if (e instanceof ProviderError) throw e;
      if (e instanceof OAuth2RequestError) throw new ProviderError(`the token endpoint refused the code (${e.code})`, e.code);
      if (e instanceof ArcticFetchError) throw new ProviderError("could not reach the token endpoint", "unreachable");
      if (e instanceof UnexpectedResponseError) throw new ProviderError(`the token endpoint answered HTTP ${e.status}`, `http_${e.status}`);
      if (e instanceof UnexpectedErrorResponseBodyError) throw new ProviderError(`the token endpoint answered HTTP ${e.status} with an unexpected body`, `http_${e.status}`);
      throw new ProviderError(`the code exchange failed: ${(e as Error).message}`, "exchange_failed");
    }
    // GitHub reports a refused code with HTTP 200 and an `error` field.
    if (typeof data.error === "string") throw new ProviderError(`the token endpoint refused the code (${data.error.slice(0, 100)})`, data.error.slice(0, 100));
    if (typeof data.access_token !== "string" || !data.access_token) throw new ProviderError("the token endpoint answered without an access token", "bad_response");
    return data.access_token;
  }

  private async linked(provider: ProviderName, accountId: string): Promise<UserRow | undefined> {
    const row = await first(
      this.db
        .select({ user: users })
        .from(oauthAccounts)
        .innerJoin(users, eq(users.id, oauthAccounts.user_id))
        .where(and(eq(oauthAccounts.provider, provider), eq(oauthAccounts.provider_account_id, accountId))),
    );
    return row?.user;
  }

  private async findOrCreateUser(provider: ProviderName, id: ProviderIdentity, meta: ClientMeta, seen: { userId?: string }): Promise<{ user: UserRow; created: boolean }> {
    const known = await this.linked(provider, id.accountId);
    if (known) return { user: known, created: false };
    if (!id.email || !id.emailVerified) {
      throw Errors.forbidden(`Your ${LABEL[provider]} account has no verified primary email address: verify one with ${LABEL[provider]}, then sign in again`);
    }
    const email = normalizeEmail(id.email);
    if (!isEmail(email)) throw Errors.forbidden(`Your ${LABEL[provider]} account's email address cannot be used on this server`);
    let user = await this.users.byEmail(email);
    let created = false;
    if (user) seen.userId = user.id;
    if (!user) {
      if (this.config.signup !== "open") {
        throw Errors.forbidden(`Sign-up is closed on this server and no account uses ${email}: ask the operator for one`);
      }
      try {
        user = await this.users.create({ email, name: accountName(id.name, email), password: null, role: "user", emailVerified: true });
        created = true;
      } catch (e) {
        // Made by a concurrent sign-up or callback: that account, under the same rule as below.
        user = await this.users.byEmail(email);
        if (!user) throw e;
      }
    }
    if (!created && !user.email_verified && user.password_hash !== null) {
      // A self-registered account never proved this address: whoever chose its password may not
      // own the mailbox (account pre-hijacking), so the provider's word does not link to it.
      throw Errors.forbidden(`An account with ${email} already exists but its address was never verified: sign in with its password instead`);
    }
    // A refused sign-in changes nothing: a disabled account gets no new way in while it is disabled.
    if (user.disabled) throw Errors.forbidden("This account is disabled");
    const linkId = newId("oauth");
    try {
      await this.db.insert(oauthAccounts).values({ id: linkId, user_id: user.id, provider, provider_account_id: id.accountId, email, created_at: this.now() });
      this.log.info("oauth account linked", { provider, user_id: user.id });
    } catch (e) {
      // The same provider account linked by a concurrent callback: use that link.
      if (!isUniqueViolation(e)) throw e;
      return { user: (await this.linked(provider, id.accountId)) ?? user, created: false };
    }
    if (!created) {
      await this.audit?.record({ action: "auth.oauth_linked", actor: "user", user_id: user.id, target_id: linkId, ip: meta.ip, details: { provider, email, ...userAgentDetail(meta) } });
    }
    return { user: (await this.users.byId(user.id))!, created };
  }
}
