/**
 * The built-in dashboard (web/index.html, app.js, app.css), embedded in the binary. Its CSP lets
 * only its own script and stylesheet run and lets it talk only to this origin; images, too, come
 * only from this origin (signed workspace files) or data: URLs — an image URL elsewhere is a way
 * out for a prompt-injected agent's data, so the dashboard shows such images as links.
 */
import { Elysia } from "elysia";
import { VERSION } from "../../version.ts";
import appCss from "../../../web/app.css" with { type: "text" };
// @ts-ignore -- a browser script embedded as text (TypeScript would look for a JS module's types).
import appJs from "../../../web/app.js" with { type: "text" };
import indexHtml from "../../../web/index.html" with { type: "text" };

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

const asset = (body: unknown, type: string) => {
  const text = body as string;
  const etag = `"${VERSION}-${Bun.hash(text).toString(36)}"`;
  return (request: Request) =>
    request.headers.get("if-none-match") === etag
      ? new Response(null, { status: 304, headers: { etag } })
      : new Response(text, { headers: { "content-type": type, "content-security-policy": CSP, "cache-control": "no-cache", etag } });
};

export const webRoutes = () => {
  const index = asset(indexHtml, "text/html; charset=utf-8");
  const js = asset(appJs, "text/javascript; charset=utf-8");
  const css = asset(appCss, "text/css; charset=utf-8");
  return new Elysia()
    .get("/", ({ request }) => index(request), { detail: { hide: true } })
    .get("/app.js", ({ request }) => js(request), { detail: { hide: true } })
    .get("/app.css", ({ request }) => css(request), { detail: { hide: true } });
};
