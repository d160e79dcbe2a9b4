/**
 * The domain's one error: a code from the interface's table, a human-readable message and optional
 * details (`details.field` names the rejected input). Services throw it; the transports map it —
 * src/http/errors.ts to a response (status from the same table), src/ws/connection.ts to an error
 * frame. Anything that is not an AppError is a bug and becomes INTERNAL_ERROR with a request id,
 * never a stack trace or SQL.
 */

/** The interface's error codes and the HTTP status each one answers with. */
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
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];
export type ErrorDetails = Record<string, unknown>;

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: ErrorDetails;
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
    /**
     * A more precise HTTP status than the code's own (413 carries VALIDATION_FAILED). Only
     * the HTTP layer reads it.
     */
    readonly status?: number,
  ) {
    super(message);
    this.name = "AppError";
  }

  toBody(): ErrorBody {
    return this.details ? { error: this.message, code: this.code, details: this.details } : { error: this.message, code: this.code };
  }
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;

/** Constructors for the errors the code raises most, so messages stay consistent. */
export const Errors = {
  unauthorized: (message = "Missing or invalid credentials") => new AppError("UNAUTHORIZED", message),
  forbidden: (message = "You do not have access to this resource") => new AppError("FORBIDDEN", message),
  /** Same answer for "missing" and "someone else's": existence is never revealed. */
  /** An id over 64 characters (no real id is) is not echoed whole: the answer stays small whatever was asked for. */
  notFound: (kind = "Resource", id?: string) => new AppError("NOT_FOUND", id ? `${kind} ${id.length > 64 ? `${id.slice(0, 64)}…` : id} not found` : `${kind} not found`),
  validation: (field: string, message: string, extra?: ErrorDetails) => new AppError("VALIDATION_FAILED", message, { field, ...extra }),
  /** `details.retry_after` (seconds) becomes the Retry-After header of an HTTP answer. */
  rateLimited: (retryAfterSec: number, message = "Too many requests") => new AppError("RATE_LIMITED", message, { retry_after: retryAfterSec }),
  internal: (requestId: string) => new AppError("INTERNAL_ERROR", `Internal server error (request ${requestId})`, { request_id: requestId }),
};
