/**
 * The outer request pipeline around the Elysia router. It runs for every request, before routing:
 * request id, client IP, caller resolution (cookie or API token, once; a token that would cost a
 * bcrypt compare is paid for from the client address's bucket first), CSRF origin check, rate
 * limit, then the router; on the way out it adds X-Request-Id, RateLimit-* and security headers
 * and writes one log line. The WebSocket upgrade of /v1/stream is handed to the stream module.
 */
import type { Server } from "bun";
import type { Authenticated } from "../auth/principal.ts";
import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import { type RequestContext, requestIdFor, setRequestContext } from "./context.ts";
import { addressKey } from "../lib/address-key.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { isIpLiteral } from "../lib/ip.ts";
import { errorResponse } from "./errors.ts";
import { JSON_TYPE } from "./json.ts";
import type { RateLimiter, RateLimitResult } from "../lib/ratelimit.ts";

export interface PipelineDeps {
  config: Config;
  log: Logger;
  limiter: RateLimiter;
  /**
   * Resolves the caller from the request's cookie or bearer token (a plain value when there is
   * none). `beforeCompare` runs, and may throw, before a bcrypt compare is spent on a token.
   */
  authenticate(req: Request, path: string, opts: { beforeCompare: () => void }): Authenticated | Promise<Authenticated>;
  /** The router (its answer without a promise when the route made it without one). */
  handle(req: Request): Response | Promise<Response>;
  /** The /v1/stream upgrade; returns a Response only when the upgrade was refused. */
  upgrade?(req: Request, server: Server<unknown>, ctx: RequestContext): Promise<Response | undefined>;
  /**
   * GET routes that need no caller and no body (/healthz, what load balancers poll), answered
   * before authentication and the router: a credential changes nothing there, the client
   * address's bucket is reported (not taken), and the headers, log line and metrics are the same.
   */
  direct?: ReadonlyMap<string, () => DirectAnswer>;
  /**
   * Told of every response (the /metrics counters): the method, the route template the router
   * matched (undefined when none did), the status and the seconds it took.
   */
  onResponse?(method: string, route: string | undefined, status: number, seconds: number): void;
  /** This server's replica id, sent as `X-Runcell-Replica` on every response (which replica answered). */
  replica?: string;
}

/** A direct route's answer: a JSON body and its status (the pipeline makes the Response, headers and all, in one go). */
export interface DirectAnswer {
  status: number;
  json: string;
}

/** Paths the per-caller rate limit applies to (the API surfaces; not static assets or /healthz). */
export const LIMITED = /^\/(v1|api|admin|hooks|files|metrics)(\/|$)/;
export const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Where the path of a request's URL begins (Bun gives a request without a Host header the path alone as its URL). */
export const pathStart = (url: string): number => (url.charCodeAt(0) === 47 ? 0 : url.indexOf("/", url.indexOf("//") + 2));

/** The path of a request's URL. */
export function pathOf(url: string): string {
  const start = pathStart(url);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return q < 0 ? url.slice(start) : url.slice(start, q);
}

export function clientIp(req: Request, server: Server<unknown> | null, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers.get("x-forwarded-for");
    if (xff) {
      const parts = xff.split(",");
      const last = parts[parts.length - 1]!.trim();
      if (last) return last;
    }
  }
  return server?.requestIP(req)?.address ?? "unknown";
}

/**
 * A state-changing request carried by a cookie (or any /api/auth request) must come from our own
 * origin: the configured public origin, or — when the Host it was sent to is an IP address or
 * `localhost` — the origin of that Host, in a scheme no weaker than the public URL's (an https
 * server refuses an http Origin: a network attacker could serve that). A Host that is a domain
 * name other than the public URL's is never taken as ours: a DNS-rebinding page (its name made to
 * resolve to this server) sends its own name as both Origin and Host. Its Origin decides, else its
 * Referer's origin (as better-auth's check reads them); a request with neither is no browser's
 * cross-site request (SameSite=Lax keeps the cookie off those).
 */
export function isCrossSite(req: Request, publicOrigin: string): boolean {
  if (req.headers.get("sec-fetch-site") === "cross-site") return true;
  let origin = req.headers.get("origin");
  if (!origin) {
    const referer = req.headers.get("referer");
    if (!referer) return false;
    try {
      origin = new URL(referer).origin;
    } catch {
      return true;
    }
  }
  if (origin === publicOrigin) return false;
  try {
    const u = new URL(origin);
    if (u.host !== req.headers.get("host") || !isAddressOrLocalhost(u.hostname)) return true;
    return publicOrigin.startsWith("https:") && u.protocol !== "https:";
  } catch {
    return true;
  }
}

/** An IP literal or localhost: a host name no DNS answer can stand for. */
function isAddressOrLocalhost(hostname: string): boolean {
  return isIpLiteral(hostname) || hostname === "localhost" || hostname.endsWith(".localhost");
}

/** On every response; pages (text/html) also get PAGE_HEADERS unless they set their own. */
const NOSNIFF = "nosniff";
const PAGE_HEADERS: Record<string, string> = { "referrer-policy": "same-origin", "x-frame-options": "DENY" };
const PAGE_HEADER_NAMES = Object.keys(PAGE_HEADERS);
/** API answers (JSON) are never stored by a cache: they carry tokens, secrets' names, private records. */
const JSON_PREFIX = "application/json";
const NO_STORE = "no-store";

/**
 * Per-request work is kept to what the request needs, and nothing that can be made once is made
 * per request: the context is one object of a fixed shape carried on the Request (no WeakMap),
 * its `beforeCompare` is a method (no closures), the caller of a request with no credential
 * headers is a frozen constant, and the header names and messages are made once per pipeline.
 */
export function createPipeline(deps: PipelineDeps) {
  const { config, log, limiter } = deps;
  const directs = deps.direct;
  const publicOrigin = new URL(config.publicUrl).origin;
  const trustProxy = config.trustProxy;
  const limited = (r: RateLimitResult) => Errors.rateLimited(r.retryAfterSec, limiter.exceeded());
  const replica = deps.replica;

  class Context implements RequestContext {
    principal: RequestContext["principal"] = null;
    authError: RequestContext["authError"] = "missing";
    authorized: boolean | undefined = undefined;
    route: string | undefined = undefined;
    /** The client address's bucket, when it paid for a token's bcrypt compare. */
    charged: RateLimitResult | null = null;
    /** The bucket the response reports (set before the router runs). */
    rl: RateLimitResult | null = null;
    /** The Response `respond` made: it has every header already. */
    made: Response | null = null;
    private address: string | undefined = undefined;
    private bucket: string | undefined = undefined;
    constructor(
      readonly id: string,
      readonly started: number,
      private readonly req: Request,
      private readonly server: Server<unknown>,
    ) {}

    /**
     * The client's address, looked up when first needed (a `getpeername` call): an authenticated
     * request with the access log off never needs it.
     */
    get ip(): string {
      return (this.address ??= clientIp(this.req, this.server, trustProxy));
    }

    /** The client address's bucket key: an IPv6 client's whole /64 shares one (src/lib/address-key.ts). */
    get addressBucket(): string {
      return (this.bucket ??= `ip:${addressKey(this.ip)}`);
    }

    /**
     * A token that is not in the verified cache costs a bcrypt compare: the client's address pays
     * for it from its own bucket first, on every path, and an empty bucket refuses it uncompared.
     * (Called as `opts.beforeCompare()`, the context being the options.)
     */
    beforeCompare(): void {
      const r = (this.charged = limiter.take(this.addressBucket));
      if (!r.ok) throw limited(r);
    }

    /**
     * The headers that do not change between requests (content type, nosniff, replica, the
     * limit) come from a Headers kept per content type and limit, copied into the Response; the
     * three that do are set on it. A full bucket's report (`limiter.full()`: a client address
     * with no bucket) is the same for everyone: its headers are kept whole, only the id is set.
     */
    respond(body: string, status: number, contentType: string): Response {
      const rl = this.rl;
      if (rl !== null && limiter.isFull(rl)) {
        const r = new Response(body, { status, headers: fullHeaders(contentType, rl) });
        r.headers.set("x-request-id", this.id);
        return (this.made = r);
      }
      const r = new Response(body, { status, headers: constantHeaders(contentType, rl?.limit) });
      const h = r.headers;
      h.set("x-request-id", this.id);
      if (rl) {
        h.set("ratelimit-remaining", String(rl.remaining));
        h.set("ratelimit-reset", String(rl.resetSec));
      }
      return (this.made = r);
    }
  }

  /** Per content type and limit (the limit changes only with the configuration or the replica count). */
  const constants = new Map<string, Headers>();
  let last = { contentType: "", limit: undefined as number | undefined, headers: new Headers() };
  function constantHeaders(contentType: string, limit: number | undefined): Headers {
    if (contentType === last.contentType && limit === last.limit) return last.headers;
    const key = `${contentType} ${limit}`;
    let h = constants.get(key);
    if (!h) {
      if (constants.size > 64) constants.clear();
      h = new Headers({ "content-type": contentType, "x-content-type-options": NOSNIFF });
      if (contentType.startsWith(JSON_PREFIX)) h.set("cache-control", NO_STORE);
      if (contentType.startsWith("text/html")) for (const k of PAGE_HEADER_NAMES) h.set(k, PAGE_HEADERS[k]!);
      if (limit !== undefined) h.set("ratelimit-limit", String(limit));
      if (replica) h.set("x-runcell-replica", replica);
      constants.set(key, h);
    }
    last = { contentType, limit, headers: h };
    return h;
  }

  /** The headers of a full bucket's report, per content type (kept for the last report seen). */
  let whole = { rl: null as RateLimitResult | null, byType: new Map<string, Headers>() };
  function fullHeaders(contentType: string, rl: RateLimitResult): Headers {
    if (whole.rl !== rl) whole = { rl, byType: new Map() };
    let h = whole.byType.get(contentType);
    if (!h) {
      h = new Headers(constantHeaders(contentType, rl.limit));
      h.set("ratelimit-remaining", String(rl.remaining));
      h.set("ratelimit-reset", String(rl.resetSec));
      whole.byType.set(contentType, h);
    }
    return h;
  }

  /**
   * The client address's bucket as it stands, for a response that takes nothing from it. While no
   * address holds a bucket, every address's is full: then the address (a `getpeername` call) is
   * not looked up.
   */
  function peekAddress(ctx: Context): RateLimitResult {
    return limiter.holdsAny("ip:") ? limiter.peek(ctx.addressBucket) : limiter.full();
  }

  async function upgrade(req: Request, server: Server<unknown>, ctx: Context, path: string): Promise<Response | undefined> {
    let refused: Response | undefined;
    try {
      refused = await deps.upgrade!(req, server, ctx);
    } catch (e) {
      // Never Bun's generic error page: the interface's error body, like any other answer.
      if (!(e instanceof AppError)) log.error("unhandled error in stream upgrade", { request_id: ctx.id, err: e });
      refused = errorResponse(e instanceof AppError ? e : Errors.internal(ctx.id));
    }
    if (!refused) {
      deps.onResponse?.(req.method, path, 101, (performance.now() - ctx.started) / 1000);
      return undefined;
    }
    // A refused upgrade is an HTTP answer like any other: every header, the log line, the metrics.
    ctx.route = path;
    return finish(req, path, ctx, refused, ctx.rl ?? ctx.charged ?? (ctx.principal ? limiter.peek(`u:${ctx.principal.user.id}`) : peekAddress(ctx)));
  }

  function failed(e: unknown, ctx: Context): Response {
    if (e instanceof AppError) return errorResponse(e);
    log.error("unhandled error in pipeline", { request_id: ctx.id, err: e });
    return errorResponse(Errors.internal(ctx.id));
  }

  /** The headers every response gets (unless `respond` made it with them), the access log line and the metrics. */
  function finish(req: Request, path: string, ctx: Context, response: Response, rl: RateLimitResult | null): Response {
    if (response === ctx.made && rl === ctx.rl) return logged(req, path, ctx, response);
    const h = response.headers;
    h.set("x-request-id", ctx.id);
    h.set("x-content-type-options", NOSNIFF);
    if (replica) h.set("x-runcell-replica", replica);
    const type = h.get("content-type");
    if (type?.startsWith("text/html")) {
      for (const k of PAGE_HEADER_NAMES) if (!h.has(k)) h.set(k, PAGE_HEADERS[k]!);
    } else if (type?.startsWith(JSON_PREFIX) && !h.has("cache-control")) h.set("cache-control", NO_STORE);
    if (rl) {
      h.set("ratelimit-limit", String(rl.limit));
      h.set("ratelimit-remaining", String(rl.remaining));
      h.set("ratelimit-reset", String(rl.resetSec));
    }
    return logged(req, path, ctx, response);
  }

  /** The access log line and the metrics of a finished response. */
  function logged(req: Request, path: string, ctx: Context, response: Response): Response {
    const ms = performance.now() - ctx.started;
    deps.onResponse?.(req.method, ctx.route, response.status, ms / 1000);
    if (log.enabled("info")) {
      log.info("request", {
        request_id: ctx.id,
        method: req.method,
        url: req.url.slice(req.url.indexOf(path)),
        status: response.status,
        ms: Math.round(ms * 100) / 100,
        ip: ctx.ip,
        user_id: ctx.principal?.user.id,
      });
    }
    return response;
  }

  /**
   * The router's answer, then `finish`; a rejection becomes the interface's error body. It reports
   * `ctx.rl`: the caller's bucket, or the one a route refused the request with (a playbook's trigger).
   */
  async function routed(req: Request, path: string, ctx: Context, pending: Promise<Response>): Promise<Response> {
    let response: Response;
    try {
      response = await pending;
    } catch (e) {
      response = failed(e, ctx);
    }
    return finish(req, path, ctx, response, ctx.rl);
  }

  /** The caller, then the checks and the router (the path where the caller took a promise: a token's first verification). */
  async function authenticated(req: Request, path: string, ctx: Context, pending: Promise<Authenticated>): Promise<Response> {
    let auth: Authenticated;
    try {
      auth = await pending;
    } catch (e) {
      return finish(req, path, ctx, failed(e, ctx), ctx.charged);
    }
    return proceed(req, path, ctx, auth);
  }

  /** CSRF, the rate limit, then the router. Returns a Response when it can, a promise while the router works. */
  function proceed(req: Request, path: string, ctx: Context, auth: Authenticated): Response | Promise<Response> {
    ctx.principal = auth.principal;
    ctx.authError = auth.error;
    let rl: RateLimitResult | null = null;
    let pending: Response | Promise<Response>;
    try {
      // Every response reports the caller's bucket; only the API surfaces take from it (an
      // anonymous caller whose address already paid for a compare is not charged twice). Taken
      // before the cross-site check: a refused request is charged and reports it like any other.
      const user = ctx.principal?.user.id;
      if (user === undefined && ctx.charged) rl = ctx.charged;
      else if (LIMITED.test(path)) rl = limiter.take(user !== undefined ? `u:${user}` : ctx.addressBucket);
      else rl = user !== undefined ? limiter.peek(`u:${user}`) : peekAddress(ctx);
      // (peek never refuses: only the API surfaces can answer 429)
      if (!rl.ok) throw limited(rl);
      ctx.rl = rl;
      // (A trigger URL's credential is its secret, never a cookie: a browser that also holds one,
      // posting from a site of the same domain, is not refused.)
      if (!SAFE_METHODS.has(req.method) && ((auth.principal?.via === "cookie" && !path.startsWith("/hooks/")) || path.startsWith("/api/auth/")) && isCrossSite(req, publicOrigin)) {
        throw Errors.forbidden(`Cross-site request refused: the Origin is not this server's (its public URL is ${publicOrigin}; an operator reaching it by another name sets --public-url)`);
      }
      pending = deps.handle(req);
    } catch (e) {
      return finish(req, path, ctx, failed(e, ctx), rl ?? ctx.charged);
    }
    return pending instanceof Promise ? routed(req, path, ctx, pending) : finish(req, path, ctx, pending, ctx.rl);
  }

  return function fetch(req: Request, server: Server<unknown>): Response | Promise<Response | undefined> {
    const started = performance.now();
    const path = pathOf(req.url);
    const ctx = new Context(requestIdFor(req), started, req, server);
    setRequestContext(req, ctx);
    if (path === "/v1/stream" && deps.upgrade) return upgrade(req, server, ctx, path);
    const answer = directs?.get(path);
    if (answer && req.method === "GET") {
      ctx.route = path;
      const rl = (ctx.rl = peekAddress(ctx));
      try {
        const a = answer();
        return logged(req, path, ctx, ctx.respond(a.json, a.status, JSON_TYPE));
      } catch (e) {
        return finish(req, path, ctx, failed(e, ctx), rl);
      }
    }
    let pending: Authenticated | Promise<Authenticated>;
    try {
      pending = deps.authenticate(req, path, ctx);
    } catch (e) {
      return finish(req, path, ctx, failed(e, ctx), ctx.charged);
    }
    return pending instanceof Promise ? authenticated(req, path, ctx, pending) : proceed(req, path, ctx, pending);
  };
}
