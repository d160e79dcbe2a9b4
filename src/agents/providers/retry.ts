/**
 * Our retry policy for model requests (the SDKs' own retries are off, so the count is ours):
 * 429, 408/409, 5xx, Anthropic's overloaded_error, in-stream server errors and connection failures
 * are retried with exponential backoff and jitter, honouring Retry-After (capped) — but only while
 * no text of the response has reached the caller. Once text was emitted, a failure is final:
 * retrying would duplicate what the caller relayed. A complete tool call's event is not output in
 * that sense — no caller acts on a call before the response it belongs to is complete (the loop
 * runs calls from the finished answer) — so a failure after one is retried like any other.
 * Aborting stops the request and any wait at once.
 */
import { abortError, ModelError } from "./model-error.ts";
import type { ModelResponse, StreamEvent } from "./types.ts";

export interface RetryPolicy {
  /** Retries after the first attempt (0 = never retry). */
  retries: number;
  /** First backoff; doubles each retry. */
  baseDelayMs: number;
  /** Cap of the computed backoff. */
  maxDelayMs: number;
  /** Cap of a server's Retry-After. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({ retries: 3, baseDelayMs: 1000, maxDelayMs: 16_000, maxRetryAfterMs: 60_000 });

let policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY };

/** Changes the process-wide policy (the server sets it from --model-retries / --model-retry-delay). */
export function setRetryPolicy(p: Partial<RetryPolicy>): void {
  policy = { ...policy, ...Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined)) };
}

export function retryPolicy(): RetryPolicy {
  return { ...policy };
}

/** HTTP statuses worth another attempt. */
export function retryableStatus(status: number | undefined): boolean {
  return status === 408 || status === 409 || status === 429 || (status !== undefined && status >= 500);
}

/** Error types (Anthropic's and OpenAI's) that name a transient failure. */
const TRANSIENT_TYPES = new Set(["overloaded_error", "api_error", "rate_limit_error", "timeout_error", "server_error", "rate_limit_exceeded", "internal_error"]);
export const transientType = (type: string | null | undefined): boolean => !!type && TRANSIENT_TYPES.has(type);

/** Retry-After in ms from `retry-after-ms`, or `retry-after` as seconds or an HTTP date. */
export function parseRetryAfter(headers: Headers | null | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined;
  const ms = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return Math.round(ms);
  const raw = headers.get("retry-after");
  if (!raw) return undefined;
  const sec = Number(raw);
  if (raw.trim() !== "" && Number.isFinite(sec) && sec >= 0) return Math.round(sec * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before retry number `retry` (0-based): the server's Retry-After if given (capped), else backoff with jitter. */
export function backoffDelay(retry: number, p: RetryPolicy, retryAfterMs?: number, random: () => number = Math.random): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, p.maxRetryAfterMs);
  const exp = Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** retry);
  return Math.round(exp * (0.5 + random() / 2));
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, fails for good, or the caller aborts. `attempt` must send
 * everything through the `emit` it is given (that is how the loop knows output has started).
 * `classify` turns whatever an attempt threw into a ModelError.
 */
export async function withRetries(
  signal: AbortSignal | undefined,
  onEvent: (e: StreamEvent) => void,
  attempt: (emit: (e: StreamEvent) => void) => Promise<ModelResponse>,
  classify: (e: unknown) => ModelError,
  p: RetryPolicy = policy,
): Promise<ModelResponse> {
  for (let n = 0; ; n++) {
    if (signal?.aborted) throw abortError(signal);
    let emitted = false;
    let consumerError: { e: unknown } | null = null;
    const emit = (e: StreamEvent) => {
      if (e.type === "text") emitted = true;
      try {
        onEvent(e);
      } catch (err) {
        consumerError = { e: err };
        throw err;
      }
    };
    try {
      return await attempt(emit);
    } catch (e) {
      if (consumerError) throw (consumerError as { e: unknown }).e; // the caller's own failure is not the model's
      if (signal?.aborted) throw abortError(signal);
      const err = e instanceof ModelError ? e : classify(e);
      err.attempts = n + 1;
      if (emitted) {
        err.afterOutput = true;
        throw err;
      }
      if (!err.retryable || n >= p.retries) throw err;
      await sleep(backoffDelay(n, p, err.retryAfterMs), signal);
    }
  }
}
