import { Elysia } from "elysia";
import { asyncApiDocument } from "../../schema/asyncapi.ts";
import { VERSION } from "../../version.ts";
import { docsPage } from "./web.ts";
import { jsonResponse } from "../json.ts";

const TAGS = [
  { name: "Auth", description: "Cookie sessions (better-auth compatible paths)" },
  { name: "Account", description: "You: your limits on this server and your use of them" },
  { name: "API tokens", description: "rc_ tokens for scripts and integrations" },
  { name: "Profiles", description: "How an agent is configured" },
  { name: "Secrets", description: "Encrypted vault; values are never returned" },
  { name: "Tasks", description: "Prompts submitted to an agent" },
  { name: "Sessions", description: "Conversations and their transcripts" },
  { name: "Workspaces", description: "The Docker container of each session" },
  { name: "Playbooks", description: "Saved prompts run on demand, on a schedule, or from a trigger URL" },
  { name: "Integrations", description: "The outbound webhook" },
  { name: "Notifications", description: "Notifications and their delivery log" },
  { name: "Admin", description: "Operator surface (Bearer admin password)" },
  { name: "Health", description: "Liveness" },
];

type Operation = { requestBody?: { content?: Record<string, unknown> } } & Record<string, unknown>;
type Paths = Record<string, Record<string, Operation>>;
type RouteInfo = { method: string; path: string; hooks?: { body?: unknown } };

/** `/v1/profiles/` and `/v1/profiles` are one resource: document it without the trailing slash. */
export function normalizePaths(paths: Paths): Paths {
  const out: Paths = {};
  for (const [path, ops] of Object.entries(paths)) {
    const key = path.length > 1 ? path.replace(/\/+$/, "") : path;
    out[key] = { ...out[key], ...ops };
  }
  return out;
}

const openapiPath = (p: string) => (p.length > 1 ? p.replace(/\/+$/, "") : p).replace(/:([A-Za-z0-9_]+)/g, "{$1}");

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
  }
  return paths;
}

/**
 * Query fields carry their default as `x-default` (src/http/schema.ts queryOf: a `default` would
 * make Elysia check every request's query); the document shows it as the schema's `default`.
 */
export function withQueryDefaults(paths: Paths): Paths {
  for (const ops of Object.values(paths)) {
    for (const op of Object.values(ops)) {
      for (const param of (op.parameters ?? []) as { in?: string; schema?: Record<string, unknown> }[]) {
        if (param.in !== "query" || !param.schema) continue;
        // A copy, at every depth (the coerced integer is an anyOf): the generator's objects may be
        // the route's own schema, which must stay as it is.
        param.schema = JSON.parse(JSON.stringify(param.schema), (_key, value) => {
          if (!value || typeof value !== "object" || !("x-default" in value)) return value;
          const { "x-default": fallback, ...rest } = value;
          return { ...rest, default: fallback };
        });
      }
    }
  }
  return paths;
}

/** The OpenAPI document generated from every mounted route's schemas, and its /docs viewer. */
export function docsRoutes(getRouter: () => Elysia<any, any, any, any, any, any, any>, publicUrl: string) {
  let cached: string | null = null;
  const spec = () => {
    if (cached) return cached;
    const router = getRouter();
    // The generator is loaded on the first request for the document, not at start-up.
    const { toOpenAPISchema } = require("@elysiajs/openapi") as typeof import("@elysiajs/openapi");
    const generated = toOpenAPISchema(router as never, { paths: ["/v1/openapi.json", "/v1/asyncapi.json", "/docs"] });
    const paths = withQueryDefaults(withJsonBodies(normalizePaths(generated.paths as Paths), router.routes as RouteInfo[]));
    const components = generated.components;
    cached = JSON.stringify({
      openapi: "3.0.3",
      info: {
        title: "runcell API",
        version: VERSION,
        description:
          "Self-hosted agent platform. All errors use {error, code, details?}. Lists are {data, next_cursor}, newest first, ?limit=1..100 and ?cursor=. Every response carries X-Request-Id and RateLimit-* headers. The WebSocket stream (/v1/stream) is described by the AsyncAPI 3 document at /v1/asyncapi.json.",
      },
      servers: [{ url: publicUrl }],
      tags: TAGS,
      security: [{ bearerToken: [] }, { cookieSession: [] }],
      paths,
      components: {
        ...components,
        securitySchemes: {
          bearerToken: { type: "http", scheme: "bearer", description: "API token rc_<64 hex>" },
          cookieSession: { type: "apiKey", in: "cookie", name: "runcell.session_token" },
          adminPassword: { type: "http", scheme: "bearer", description: "The operator's admin password (/admin/* only)" },
        },
      },
    });
    return cached;
  };
  let asyncApi: string | null = null;
  return new Elysia()
    .get(
      "/v1/asyncapi.json",
      () => jsonResponse((asyncApi ??= JSON.stringify(asyncApiDocument({ publicUrl, version: VERSION })))),
      { detail: { hide: true } },
    )
    .get("/v1/openapi.json", () => jsonResponse(spec()), {
      detail: { hide: true },
    })
    // The reference is a view of the dashboard's app (same look, same CSP), rendered from /v1/openapi.json.
    .get("/docs", ({ request }) => docsPage(request), { detail: { hide: true } });
}
