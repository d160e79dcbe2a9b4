import { Elysia } from "elysia";
import { asyncApiDocument } from "../../schema/asyncapi.ts";
import { VERSION } from "../../version.ts";
import { docsPage } from "./web.ts";
import { jsonResponse } from "../json.ts";
import { finishDocument, type RouteInfo } from "../openapi.ts";

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

/** The OpenAPI document generated from every mounted route's schemas, and its /docs viewer. */
export function docsRoutes(getRouter: () => Elysia<any, any, any, any, any, any, any>, publicUrl: string) {
  let cached: string | null = null;
  const spec = () => {
    if (cached) return cached;
    const router = getRouter();
    // The generator is loaded on the first request for the document, not at start-up.
    const { toOpenAPISchema } = require("@elysiajs/openapi") as typeof import("@elysiajs/openapi");
    const generated = toOpenAPISchema(router as never, { paths: ["/v1/openapi.json", "/v1/asyncapi.json", "/docs"] });
    const { paths, schemas } = finishDocument(generated, router.routes as RouteInfo[]);
    cached = JSON.stringify({
      openapi: "3.1.0",
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
        schemas,
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
