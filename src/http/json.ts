/** The content type of every JSON answer. */
export const JSON_TYPE = "application/json; charset=utf-8";

/** A response from JSON already serialized (stored bodies, precomputed ones). */
export function jsonResponse(json: string, status = 200): Response {
  return new Response(json, { status, headers: { "content-type": JSON_TYPE } });
}
