/**
 * The OpenAPI 3.1 document, made from what @elysiajs/openapi generates from every mounted route's
 * schemas, then finished here where the generator falls short of a valid document or does not know
 * the pipeline:
 *
 * - paths without trailing slashes, a wildcard route's tail as a `{path}` parameter;
 * - JSON request bodies (the shared parser is a function the generator cannot name);
 * - query fields as their real type with their default (Elysia's coercing string branch and
 *   `x-default` dropped);
 * - nullable enums and constants that accept null (the generator's `type: [..., "null"]` keeps an
 *   enum without it);
 * - no `content` on bodiless answers (204, 302), file downloads as bytes, `$id`s turned into
 *   `$ref`s to components;
 * - the statuses the pipeline adds to every operation it applies to: 413 and 400 wherever a body is
 *   read (every method but GET and HEAD), 400 too where the route takes no body (the router refuses
 *   one with fields), 403 for a cross-site cookie request that changes something, 429 on the
 *   rate-limited surfaces.
 */
import { documentNullAsAbsent, ErrorBody } from "../schema/common.ts";
import { LIMITED, SAFE_METHODS } from "./pipeline.ts";
import { BYTES_MARK } from "./schema.ts";

type Json = Record<string, any>;
type Operation = Json & { parameters?: Json[]; requestBody?: { content?: Record<string, unknown> }; responses?: Record<string, Json> };
type Paths = Record<string, Record<string, Operation>>;
export type RouteInfo = { method: string; path: string; hooks?: { body?: unknown } };

/** OpenAPI's form of a route path: no trailing slash, `{id}` for `:id`, and `{path}` for a wildcard tail. */
export const openapiPath = (p: string) =>
  (p.length > 1 ? p.replace(/\/+$/, "") : p).replace(/:([A-Za-z0-9_]+)/g, "{$1}").replace(/\/\*$/, "/{path}");

/** `/v1/profiles/` and `/v1/profiles` are one resource: document it without the trailing slash; a `*` tail is `{path}`. */
export function normalizePaths(paths: Paths): Paths {
  const out: Paths = {};
  for (const [path, ops] of Object.entries(paths)) {
    const key = openapiPath(path);
    out[key] = { ...out[key], ...ops };
    if (key.endsWith("/{path}") && !path.endsWith("{path}")) {
      for (const op of Object.values(out[key]!)) {
        op.parameters = [
          ...(op.parameters ?? []).filter((p) => p.name !== "*"),
          {
            name: "path",
            in: "path",
            required: true,
            description: "The file's path under the directory, e.g. src/app.ts (its slashes as they are, or as %2F)",
            schema: { type: "string", minLength: 1 },
          },
        ];
        if (op.operationId) op.operationId = String(op.operationId).replace(/\*$/, "Path");
      }
    }
  }
  return out;
}

/**
 * Every JSON endpoint shares one body parser (a function, src/http/router.ts), which the generator
 * cannot name, so it leaves `requestBody.content` empty: fill it from the route's body schema.
 */
export function withJsonBodies(paths: Paths, routes: RouteInfo[]): Paths {
  for (const r of routes) {
    if (!r.hooks?.body) continue;
    const op = paths[openapiPath(r.path)]?.[r.method.toLowerCase()];
    if (op?.requestBody && Object.keys(op.requestBody.content ?? {}).length === 0) {
      op.requestBody.content = { "application/json": { schema: r.hooks.body } };
    }
    // A body that may be left out (jsonBody's `optional`: the schema or null) is not required.
    const branches = (r.hooks.body as { anyOf?: { type?: unknown }[] }).anyOf;
    if (op?.requestBody && branches?.some((b) => b.type === "null")) (op.requestBody as Json).required = false;
  }
  return paths;
}

/** Elysia's coercion branch of a query field (`{type: "string", format: "integer"}`): the wire form, not the field's type. */
const isCoercion = (s: unknown) => !!s && typeof s === "object" && (s as Json).type === "string" && ["integer", "number", "boolean"].includes((s as Json).format);

/**
 * Query fields carry their default as `x-default` (src/http/schema.ts queryOf: a `default` would
 * make Elysia check every request's query); the document shows it as the schema's `default`. A
 * coerced field (integers) is documented as its type, without the string branch Elysia decodes it
 * from.
 */
export function withQueryDefaults(paths: Paths): Paths {
  for (const ops of Object.values(paths)) {
    for (const op of Object.values(ops)) {
      for (const param of op.parameters ?? []) {
        if (param.in !== "query" || !param.schema) continue;
        // A copy, at every depth: the generator's objects may be the route's own schema, which must stay as it is.
        let schema: Json = JSON.parse(JSON.stringify(param.schema), (_key, value) => {
          if (!value || typeof value !== "object" || !("x-default" in value)) return value;
          const { "x-default": fallback, ...rest } = value;
          return { ...rest, default: fallback };
        });
        const branches = Array.isArray(schema.anyOf) ? (schema.anyOf as Json[]) : null;
        if (branches?.some(isCoercion)) {
          const real = branches.filter((b) => !isCoercion(b));
          const { anyOf: _, ...rest } = schema;
          schema = real.length === 1 ? { ...rest, ...real[0] } : { ...rest, anyOf: real };
        }
        param.schema = schema;
      }
    }
  }
  return paths;
}

/** Applies `fn` to every schema-like object in `value`, children first. */
function walk(value: unknown, fn: (o: Json) => Json | void): unknown {
  if (Array.isArray(value)) return value.map((v) => walk(v, fn));
  if (!value || typeof value !== "object") return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) out[k] = walk(v, fn);
  return fn(out) ?? out;
}

/**
 * Schema fixes on a copy of the whole document's paths: a field whose null is taken as absent
 * says so (documentNullAsAbsent); a nullable enum or constant accepts null;
 * a schema with `$id: "#/components/schemas/X"` (the error body) becomes a `$ref` to X.
 */
function fixSchemas(paths: Paths, components: Record<string, Json>): Paths {
  return walk(paths, (o) => {
    documentNullAsAbsent(o);
    if (Array.isArray(o.type) && o.type.includes("null")) {
      if (Array.isArray(o.enum) && !o.enum.includes(null)) o.enum = [...o.enum, null];
      if ("const" in o && o.const !== null) {
        o.enum = [o.const, null];
        delete o.const;
      }
    }
    if (typeof o.$id === "string") {
      const m = /^#\/components\/schemas\/(\w+)$/.exec(o.$id);
      const { $id: _, ...rest } = o;
      if (!m) return rest;
      components[m[1]!] ??= rest;
      return { $ref: o.$id };
    }
  }) as Paths;
}

const ERROR_REF = { $ref: "#/components/schemas/Error" };
const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: ERROR_REF } } });
const PIPELINE_ERRORS = {
  400: errorResponse("Bad input (VALIDATION_FAILED; details.field names the field): a body that is not JSON (content-type) or has a Content-Encoding (content-encoding), malformed JSON, or — where the operation takes no body — one with fields"),
  413: errorResponse("The body is over 1 MiB (VALIDATION_FAILED)"),
  403: errorResponse("A cookie-authenticated request from another origin (FORBIDDEN)"),
  429: errorResponse("The caller's rate limit (RATE_LIMITED), or no room for another workspace (CONCURRENCY_LIMIT); both with Retry-After and details.retry_after (seconds)"),
};

/** The interface's meaning of each status, for the answers the generator describes only by number. */
const STATUS_WORDS: Record<string, string> = {
  200: "Success",
  201: "Created",
  202: "Accepted: the work goes on in the background",
  204: "Done; no body",
  302: "A redirect (Location)",
  400: "Bad input (VALIDATION_FAILED; details.field names the field)",
  401: "No credential, or a rejected one (UNAUTHORIZED)",
  402: "The task's budget was reached (BUDGET_EXCEEDED)",
  403: "Authenticated but not allowed (FORBIDDEN)",
  404: "Not found, or not the caller's (NOT_FOUND)",
  422: "The task's turn limit was reached (TURN_LIMIT_EXCEEDED)",
  502: "The Docker engine, the model provider or a third party failed (CONTAINER_FAILED, MODEL_ERROR, BAD_GATEWAY)",
  503: "Not available now",
};

/**
 * Response objects the generator gets wrong or cannot know: bodiless answers lose their made-up
 * `content`, file downloads are bytes, and the pipeline's own answers are listed where they apply.
 */
function fixResponses(paths: Paths): Paths {
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const responses = (op.responses ??= {});
      for (const [status, r] of Object.entries(responses)) {
        if (r.description === `Response for status ${status}` && STATUS_WORDS[status]) r.description = STATUS_WORDS[status];
        const content = r.content as Json | undefined;
        // The generator writes `content: {type: "void"}` for t.Void(): not a media-type map.
        if (content && typeof content.type === "string") delete r.content;
        const json = content?.["application/json"]?.schema as Json | undefined;
        if (json?.[BYTES_MARK]) r.content = { "*/*": { schema: { type: "string", contentMediaType: "application/octet-stream" } } };
      }
      const add = (status: keyof typeof PIPELINE_ERRORS) => (responses[status] ??= PIPELINE_ERRORS[status]);
      // The router reads the body of every method but GET and HEAD (src/http/router.ts): one
      // without a body schema answers 400 to a body with fields.
      if (!SAFE_METHODS.has(method.toUpperCase())) {
        add(400);
        add(413);
      }
      if (!SAFE_METHODS.has(method.toUpperCase()) && (path.startsWith("/v1/") || path.startsWith("/api/auth/"))) add(403);
      if (LIMITED.test(path)) add(429);
    }
  }
  return paths;
}

/** The finished `paths` and `components.schemas` from the generator's output. */
export function finishDocument(generated: { paths: unknown; components?: Json }, routes: RouteInfo[]): { paths: Paths; schemas: Record<string, Json> } {
  const schemas: Record<string, Json> = { ...(generated.components?.schemas ?? {}) };
  let paths = withQueryDefaults(withJsonBodies(normalizePaths(generated.paths as Paths), routes));
  paths = fixResponses(fixSchemas(paths, schemas));
  const { $id: _, ...error } = JSON.parse(JSON.stringify(ErrorBody)) as Json;
  schemas.Error ??= error;
  return { paths, schemas };
}
