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

/**
 * `jsonResponse` of a body that may still be loading: a body already in memory is answered
 * without a promise (a route handler that awaits makes one, and a turn of the microtask queue).
 */
export function jsonAnswer(json: string | Promise<string>, request: Request): Response | Promise<Response> {
  return json instanceof Promise ? json.then((j) => jsonResponse(j, 200, request)) : jsonResponse(json, 200, request);
}
