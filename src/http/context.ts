import type { Principal } from "../auth/principal.ts";
import type { RateLimitResult } from "../lib/ratelimit.ts";

/** What the pipeline learns about a request before routing; handlers read it by request. */
export interface RequestContext {
  id: string;
  /** The client's address as resolved (logs, audit rows): the full address. */
  ip: string;
  /**
   * The client address's rate-limit bucket: `ip:` and the address's limiter key
   * (src/lib/address-key.ts: an IPv6 address's /64, an IPv4 one itself).
   */
  readonly addressBucket: string;
  started: number;
  /** null: no credential or a rejected one (then `authError` says which). */
  principal: Principal | null;
  authError: "missing" | "invalid";
  /** The surface's credential was checked (src/http/surfaces.ts). */
  authorized?: boolean;
  /** The route template the router matched ("/v1/sessions/:id"; the /metrics route label), set by router.ts. */
  route?: string;
  /**
   * The caller's bucket the response reports (taken or peeked); the pipeline sets it before the
   * router runs. A route that refuses with a bucket of its own (a playbook's trigger) sets that one.
   */
  rl: RateLimitResult | null;
  /**
   * A Response of `body` made with every header the pipeline adds (request id, nosniff, the
   * caller's RateLimit-*, replica) given at construction: the pipeline then adds none to it.
   */
  respond(body: string, status: number, contentType: string): Response;
}

/**
 * The context rides on the Request itself under a private symbol: a WeakMap entry cost ~0.4 µs a
 * request (set and get), a property next to nothing, and it goes with the request to the collector.
 */
const CONTEXT = Symbol("runcell.requestContext");
type Carrier = Request & { [CONTEXT]?: RequestContext };

export function setRequestContext(req: Request, ctx: RequestContext) {
  (req as Carrier)[CONTEXT] = ctx;
}

/** Notes the route template the router matched (a request that did not pass through the pipeline has no context to note it in). */
export function noteRoute(req: Request, route: string) {
  const ctx = (req as Carrier)[CONTEXT];
  if (ctx) ctx.route = route;
}

/** The request's context, or undefined for a request that did not pass through the pipeline. */
export function contextOf(req: Request): RequestContext | undefined {
  return (req as Carrier)[CONTEXT];
}

export function requestContext(req: Request): RequestContext {
  const ctx = (req as Carrier)[CONTEXT];
  if (!ctx) throw new Error("request did not pass through the HTTP pipeline");
  return ctx;
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{8,64}$/;

/** A random prefix per process and a counter: unique, and cheap on the hot path (not a secret). */
const PREFIX = "req_" + Buffer.from(crypto.getRandomValues(new Uint8Array(6))).toString("hex");
let counter = 0;
const SPAN = 36 ** 8;

/** Keeps a caller-supplied X-Request-Id when it is sane (proxies set one), else makes one. */
export function requestIdFor(req: Request): string {
  const given = req.headers.get("x-request-id");
  if (given && SANE_REQUEST_ID.test(given)) return given;
  // Eight base-36 digits, zero-padded by an offset rather than padStart (a third of the cost).
  return ++counter < SPAN ? PREFIX + (SPAN + counter).toString(36).slice(1) : PREFIX + counter.toString(36);
}
