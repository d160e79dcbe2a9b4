/** The content type of every JSON answer. */
export const JSON_TYPE = "application/json; charset=utf-8";

import { contextOf } from "./context.ts";

/**
 * A response from JSON already serialized (stored bodies, precomputed ones). Given the request,
 * the Response is made with the pipeline's headers at once (RequestContext.respond) instead of
 * the pipeline setting them one by one on it afterwards.
 */
export function jsonResponse(json: string, status = 200, request?: Request): Response {
  const ctx = request && contextOf(request);
  return ctx ? ctx.respond(json, status, JSON_TYPE) : new Response(json, { status, headers: { "content-type": JSON_TYPE } });
}
