/**
 * The one place a domain error (src/lib/errors.ts) becomes an HTTP answer: the interface's body
 * `{error, code, details?}`, the status of its code (or the error's more precise one), and
 * Retry-After on a 429 (RATE_LIMITED, CONCURRENCY_LIMIT) from its `details.retry_after`, which is
 * also what a stream error frame carries; WWW-Authenticate on a 401. Plus the errors only HTTP has:
 * a body over the limit (413, API.md's one exception to VALIDATION_FAILED's 400), and a body that is
 * not plain JSON (400 like any bad input: the interface maps VALIDATION_FAILED to 400).
 */
import { AppError, ERROR_STATUS } from "../lib/errors.ts";
import { JSON_TYPE } from "./json.ts";

const WWW_AUTHENTICATE = 'Bearer realm="runcell"';

export const statusOf = (err: AppError): number => err.status ?? ERROR_STATUS[err.code];

export function errorResponse(err: AppError, headers: Record<string, string> = {}): Response {
  const h: Record<string, string> = { "content-type": JSON_TYPE, ...headers };
  const retry = err.details?.retry_after;
  const status = statusOf(err);
  if (status === 429 && typeof retry === "number") h["retry-after"] = String(retry);
  // RFC 9110: a 401 names the scheme that would be accepted.
  if (status === 401) h["www-authenticate"] = WWW_AUTHENTICATE;
  return new Response(JSON.stringify(err.toBody()), { status, headers: h });
}

export const HttpErrors = {
  payloadTooLarge: (limit: number) =>
    new AppError("VALIDATION_FAILED", `Request body is larger than ${limit} bytes`, { field: "body", limit_bytes: limit }, 413),
  unsupportedMediaType: (got: string | null) =>
    new AppError("VALIDATION_FAILED", `Content-Type must be application/json${got ? ` (got ${got})` : ""}`, { field: "content-type" }),
  unsupportedEncoding: (got: string) =>
    new AppError("VALIDATION_FAILED", `Content-Encoding ${got.slice(0, 40)} is not accepted: send the JSON body uncompressed`, { field: "content-encoding" }),
};
