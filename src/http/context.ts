import type { Principal } from "../auth/principal.ts";

/** What the pipeline learns about a request before routing; handlers read it by request. */
export interface RequestContext {
  id: string;
  ip: string;
  started: number;
  /** null: no credential or a rejected one (then `authError` says which). */
  principal: Principal | null;
  authError: "missing" | "invalid";
  /** The surface's credential was checked (src/http/surfaces.ts). */
  authorized?: boolean;
  /** The route template the router matched ("/v1/sessions/:id"; the /metrics route label), set by router.ts. */
  route?: string;
}

const contexts = new WeakMap<Request, RequestContext>();

export function setRequestContext(req: Request, ctx: RequestContext) {
  contexts.set(req, ctx);
}

/** Notes the route template the router matched (a request that did not pass through the pipeline has no context to note it in). */
export function noteRoute(req: Request, route: string) {
  const ctx = contexts.get(req);
  if (ctx) ctx.route = route;
}

export function requestContext(req: Request): RequestContext {
  const ctx = contexts.get(req);
  if (!ctx) throw new Error("request did not pass through the HTTP pipeline");
  return ctx;
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{8,64}$/;

/** A random prefix per process and a counter: unique, and cheap on the hot path (not a secret). */
const PREFIX = "req_" + Buffer.from(crypto.getRandomValues(new Uint8Array(6))).toString("hex");
let counter = 0;

/** Keeps a caller-supplied X-Request-Id when it is sane (proxies set one), else makes one. */
export function requestIdFor(req: Request): string {
  const given = req.headers.get("x-request-id");
  if (given && SANE_REQUEST_ID.test(given)) return given;
  return PREFIX + (++counter).toString(36).padStart(8, "0");
}
