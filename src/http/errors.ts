/**
 * The one error shape of the interface, `{error, code, details?}`, and the one class that carries
 * it. Services throw ApiError; the HTTP pipeline and the WebSocket handler turn it into a response
 * or an error frame. Anything that is not an ApiError becomes 500 INTERNAL_ERROR with the request
 * id, never a stack trace or SQL.
 */
export const ERROR_STATUS = {
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  VALIDATION_FAILED: 400,
  RATE_LIMITED: 429,
  CONCURRENCY_LIMIT: 429,
  BUDGET_EXCEEDED: 402,
  TURN_LIMIT_EXCEEDED: 422,
  CONTAINER_FAILED: 502,
  MODEL_ERROR: 502,
  BAD_GATEWAY: 502,
  INTERNAL_ERROR: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorDetails = Record<string, unknown>;

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: ErrorDetails;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
    status?: number,
    /** Extra response headers (Retry-After…). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status ?? ERROR_STATUS[code];
  }

  toBody(): ErrorBody {
    return this.details ? { error: this.message, code: this.code, details: this.details } : { error: this.message, code: this.code };
  }
}

/** Constructors for the errors the code raises most, so messages stay consistent. */
export const Errors = {
  unauthorized: (message = "Missing or invalid credentials") => new ApiError("UNAUTHORIZED", message),
  forbidden: (message = "You do not have access to this resource") => new ApiError("FORBIDDEN", message),
  /** Same answer for "missing" and "someone else's": existence is never revealed. */
  notFound: (kind = "Resource", id?: string) => new ApiError("NOT_FOUND", id ? `${kind} ${id} not found` : `${kind} not found`),
  validation: (field: string, message: string, extra?: ErrorDetails) => new ApiError("VALIDATION_FAILED", message, { field, ...extra }),
  rateLimited: (retryAfterSec: number, message = "Too many requests") =>
    new ApiError("RATE_LIMITED", message, { retry_after: retryAfterSec }, 429, { "retry-after": String(retryAfterSec) }),
  payloadTooLarge: (limit: number) =>
    new ApiError("VALIDATION_FAILED", `Request body is larger than ${limit} bytes`, { field: "body", limit_bytes: limit }, 413),
  unsupportedMediaType: (got: string | null) =>
    new ApiError("VALIDATION_FAILED", `Content-Type must be application/json${got ? ` (got ${got})` : ""}`, { field: "content-type" }, 415),
  internal: (requestId: string) =>
    new ApiError("INTERNAL_ERROR", `Internal server error (request ${requestId})`, { request_id: requestId }),
};

export function errorResponse(err: ApiError, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(err.toBody()), {
    status: err.status,
    headers: { "content-type": "application/json; charset=utf-8", ...err.headers, ...headers },
  });
}
