/**
 * The built-in dashboard (web/src, built by scripts/build-web.ts into web/dist/bundle.json and
 * embedded in the binary through this import). The index page is served at `/`, `/setup`, `/docs`
 * and, as the single-page app's fallback, at any other GET path that names no file and is not under
 * an API prefix (router.ts calls `spaFallback` on a 404). Hashed assets under /assets/ are cached
 * for a year; the index revalidates (ETag). The CSP lets only this origin's script and stylesheet
 * run, lets the page talk only to this origin, and loads images only from this origin (signed
 * workspace files) or data: URLs — an image URL elsewhere is a way out for a prompt-injected
 * agent's data, so the dashboard shows such images as links.
 */
import { Elysia } from "elysia";
import bundle from "../../../web/dist/bundle.json" with { type: "json" };
import { AppError } from "../../lib/errors.ts";
import { VERSION } from "../../version.ts";

interface WebBundle {
  index: string;
  assets: Record<string, { type: string; body: string }>;
}
const built = bundle as WebBundle;

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Paths the single-page app never answers: the API, operator and machine surfaces. */
const RESERVED = /^\/(v1|api|admin|hooks|files|docs|metrics|assets|healthz)(\/|$)/;

const INDEX_HEADERS = { "content-type": "text/html; charset=utf-8", "content-security-policy": CSP, "cache-control": "no-cache" };
const INDEX_ETAG = `"${VERSION}-${Bun.hash(built.index).toString(36)}"`;

/** The index page, with a 304 for a matching If-None-Match. */
function indexPage(request: Request, extra: Record<string, string> = {}): Response {
  if (request.headers.get("if-none-match") === INDEX_ETAG) return new Response(null, { status: 304, headers: { etag: INDEX_ETAG } });
  return new Response(request.method === "HEAD" ? null : built.index, { headers: { ...INDEX_HEADERS, etag: INDEX_ETAG, ...extra } });
}

/** Hashed assets: their name changes with their content, so they may be cached for good. */
const ASSETS = new Map(
  Object.entries(built.assets).map(([name, a]) => [
    name,
    { body: a.body, headers: { "content-type": a.type, "content-security-policy": CSP, "cache-control": "public, max-age=31536000, immutable" } },
  ]),
);

/**
 * The SPA fallback for a request no route matched: the index page for a GET/HEAD of an app path
 * (no file extension, not under a reserved prefix); null otherwise (the caller answers 404).
 */
export function spaFallback(request: Request): Response | null {
  if (request.method !== "GET" && request.method !== "HEAD") return null;
  const path = new URL(request.url).pathname;
  if (RESERVED.test(path) || /\.[A-Za-z0-9]+$/.test(path)) return null;
  return indexPage(request);
}

export const webRoutes = () =>
  new Elysia()
    .get("/", ({ request }) => indexPage(request), { detail: { hide: true } })
    // The setup link carries its token in the fragment; the page sends no Referer and is never cached.
    .get("/setup", ({ request }) => indexPage(request, { "cache-control": "no-store", "referrer-policy": "no-referrer" }), { detail: { hide: true } })
    .get(
      "/assets/:name",
      ({ params, request }) => {
        const a = ASSETS.get(params.name);
        if (!a) throw new AppError("NOT_FOUND", `No asset ${params.name.slice(0, 100)}`);
        return new Response(request.method === "HEAD" ? null : a.body, { headers: a.headers });
      },
      { detail: { hide: true } },
    );

/** The API reference page (/docs) is a view of the same app. */
export const docsPage = (request: Request) => indexPage(request);
