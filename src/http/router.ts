/**
 * The Elysia router: one shared JSON parser, one error mapper, and every route module mounted
 * from one list (src/http/routes/index.ts). It never listens itself; the pipeline calls
 * `handle`.
 */
import type { ValueError } from "@sinclair/typebox/errors";
import { Elysia, t, ValidationError } from "elysia";
import type { Logger } from "../log.ts";
import { noteRoute, requestContext, setRequestContext } from "./context.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { nulError } from "../lib/json-input.ts";
import { pathStart } from "./pipeline.ts";
import { errorResponse } from "./errors.ts";
import { MAX_JSON_BODY, parseJsonBody } from "./parse.ts";
import { redactString } from "../log.ts";

import { closed } from "../schema/common.ts";
import { check, describe, fieldOf } from "../schema/validate.ts";
import { authorizeOnce, surfaceOf } from "./guards.ts";
import type { AdminPassword } from "../admin/password.ts";

/** Turns an Elysia validation error (query, params, a body that passed no jsonBody) into VALIDATION_FAILED naming the field. */
export function validationToAppError(err: ValidationError): AppError {
  if (err.type === "response") return new AppError("INTERNAL_ERROR", "Internal server error: response failed its schema");
  const where = err.type === "property" ? "query" : err.type;
  const first = (err.valueError ?? (err.all as ValueError[] | undefined)?.[0]) as ValueError | undefined;
  if (!first) return new AppError("VALIDATION_FAILED", `Invalid ${where}`, { field: where, in: where });
  const field = fieldOf(first.path, "") || String((first.schema as { "x-field"?: string })["x-field"] ?? "") || (where === "body" ? "body" : where);
  const { message, reason } = describe(first, field);
  return new AppError("VALIDATION_FAILED", message, { field, reason, in: where });
}

/**
 * The request as Elysia's router must see it. Elysia reads a request's path from the first "/" at
 * index 11 or later of its URL (the length of "http://a.bc"): a shorter Host ("api", "web", "x" — a
 * container's or a proxy's name) would lose its path's first segment and every route would answer
 * 404. Such a request goes on with a URL of the same path that Elysia reads right (its context
 * moves with it); any other is passed as it is.
 */
export function forRouter(req: Request): Request {
  const url = req.url;
  // (A request without a Host header has the path alone as its URL: it gets a host here too.)
  const start = pathStart(url);
  if (start >= 11) return req;
  const moved = new Request(`http://localhost${url.slice(start)}`, req);
  setRequestContext(moved, requestContext(req));
  return moved;
}

function requireDecodable(request: Request, path: string): void {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    throw new AppError("NOT_FOUND", `No route ${request.method} ${redactString(path)}: malformed percent-encoding`);
  }
  if (decoded.includes("\0")) throw new AppError("NOT_FOUND", `No route ${request.method} ${redactString(path)}: a NUL character names nothing`);
}

/**
 * Whether the query (from `q`, its "?") needs reading: it holds a `%`, or it may name one of the
 * route's parameters twice. A request without a query string, or with a plain `?limit=20&cursor=…`,
 * reads nothing here.
 */
function queryNeedsCheck(url: string, q: number, names: readonly string[]): boolean {
  if (q < 0) return false;
  if (url.includes("%", q)) return true;
  for (const name of names) {
    const i = url.indexOf(name, q);
    if (i >= 0 && url.indexOf(name, i + name.length) >= 0) return true;
  }
  return false;
}

/**
 * A query parameter holding U+0000 (`%00`): VALIDATION_FAILED naming it (src/lib/json-input.ts).
 * One of the route's parameters given twice (`limit=500&limit=1`, `status=x&status=failed`):
 * VALIDATION_FAILED naming it — Elysia would take the last one, while another server or a proxy
 * may take the first; which was meant is unknown. A parameter the route does not read is
 * ignored, twice or not.
 */
function requireSaneQuery(request: Request, names: readonly string[]): void {
  const url = request.url;
  const q = url.indexOf("?");
  if (q < 0) return;
  const params = new URLSearchParams(url.slice(q));
  for (const [k, v] of params) if (k.includes("\0") || v.includes("\0")) throw nulError(k);
  for (const name of names) {
    if (params.getAll(name).length > 1) throw Errors.validation(name, `${name} is given more than once`, { reason: "repeated", in: "query" });
  }
}

/**
 * What a route without a body schema accepts: nothing, `{}` or JSON null (an empty body and null are
 * "no body", as on a trigger URL). A field is refused like an unknown field of a closed body — a
 * client's `{"reason": …}` to a cancel must not be taken and silently dropped.
 */
const NO_BODY = closed(t.Object({}));

type RouteList = readonly { method: string; path: string; hooks?: { body?: unknown; ownBody?: boolean; query?: unknown } }[];

/**
 * What the router does with a route's body: `json` reads it against the route's schema, `none`
 * reads it and refuses one with fields (the route declares no body), `own` leaves it unread (the
 * route declares `ownBody`, src/http/route-options.ts).
 */
type BodyKind = "json" | "none" | "own";

/** What the router checks of a route before it runs: its body kind and the query parameters it reads. */
type RouteFacts = { body: BodyKind; query: readonly string[] };

const UNKNOWN_ROUTE: RouteFacts = { body: "json", query: [] };

/** The names of a route's query schema (`queryOf(…)` or `t.Object(…)`, optional or not). */
const queryNames = (schema: unknown): string[] => Object.keys((schema as { properties?: object } | undefined)?.properties ?? {});

/**
 * The facts of `method route` (its template as the router matched it). The table is made from
 * the mounted routes when first asked, and again if routes were added since.
 */
function routeFacts(routes: () => RouteList): (method: string, route: string | undefined) => RouteFacts {
  let seen = -1;
  let facts = new Map<string, RouteFacts>();
  return (method, route) => {
    const all = routes();
    if (all.length !== seen) {
      facts = new Map(
        all.map((r) => [`${r.method} ${r.path}`, { body: r.hooks?.ownBody ? "own" : r.hooks?.body ? "json" : "none", query: queryNames(r.hooks?.query) }]),
      );
      seen = all.length;
    }
    // (A HEAD request is answered by the GET route.)
    return (route !== undefined && facts.get(`${method === "HEAD" ? "GET" : method} ${route}`)) || UNKNOWN_ROUTE;
  };
}

/**
 * `fallback` answers a request no route matched before it becomes a 404 (the dashboard's
 * single-page fallback, src/http/routes/web.ts); null lets the 404 stand.
 */
export function createRouter(log: Logger, adminPassword: AdminPassword | null = null, fallback: (request: Request) => Response | null = () => null) {
  // Credentials before content: the surface's credential is checked by the first hook that runs —
  // parse (requests with a body) or transform (the rest) — before anything is read or validated.
  // A path that does not decode (`%ff`, `%zz`, a lone surrogate) names no record: 404 like any
  // missing one, after the credential — never a null parameter reaching a route.
  // (A route ending in a wildcard — a file path — decodes that part itself and says what is wrong with it.)
  const authorize = (request: Request, path: string, route?: string) => {
    const surface = surfaceOf(path);
    const pending = surface ? authorizeOnce(request, surface, adminPassword) : undefined;
    // (The common case — no % in the path, no query string or a plain one — makes nothing more per request.)
    const checkPath = path.includes("%") && !route?.endsWith("*");
    const q = request.url.indexOf("?");
    const names = q < 0 ? UNKNOWN_ROUTE.query : factsOf(request.method, route).query;
    const checkQuery = queryNeedsCheck(request.url, q, names);
    if (!checkPath && !checkQuery) return pending;
    const check = () => {
      if (checkPath) requireDecodable(request, path);
      if (checkQuery) requireSaneQuery(request, names);
    };
    if (pending) return pending.then(check);
    check();
  };
  const app = new Elysia({ name: "runcell" });
  const factsOf = routeFacts(() => app.routes);
  return app
    .onParse({ as: "global" }, async ({ request, path, route }) => {
      if (request.method === "GET" || request.method === "HEAD") return undefined;
      noteRoute(request, route);
      await authorize(request, path, route);
      const kind = factsOf(request.method, route).body;
      if (kind === "own") return null;
      const body = (await parseJsonBody(request, MAX_JSON_BODY)) ?? null;
      // Elysia checks a body only against a schema: a route without one is checked here, once for all.
      if (body !== null && kind === "none") check(NO_BODY, body);
      return body;
    })
    .onTransform({ as: "global" }, ({ request, path, route }) => {
      noteRoute(request, route);
      return authorize(request, path, route);
    })
    .onError({ as: "global" }, async ({ code, error, request }) => {
      if (error instanceof AppError) return errorResponse(error);
      if (code === "VALIDATION") return errorResponse(validationToAppError(error as ValidationError));
      if (code === "NOT_FOUND") {
        // No route: on /v1 and /admin the credential still comes first (an anonymous caller learns
        // nothing of which paths exist).
        const path = new URL(request.url).pathname;
        try {
          await authorize(request, path);
        } catch (e) {
          if (e instanceof AppError) return errorResponse(e);
          throw e;
        }
        return fallback(request) ?? errorResponse(new AppError("NOT_FOUND", `No route ${request.method} ${redactString(path)}`));
      }
      if (code === "PARSE") {
        // Errors thrown by our parser arrive wrapped in Elysia's ParseError.
        const cause = (error as { cause?: unknown }).cause;
        return errorResponse(cause instanceof AppError ? cause : new AppError("VALIDATION_FAILED", "Malformed request body", { field: "body" }));
      }
      const id = requestContext(request).id;
      log.error("unhandled error", { request_id: id, code, err: error });
      return errorResponse(Errors.internal(id));
    });
}
