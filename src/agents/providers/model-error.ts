/**
 * ModelError: a model provider failed (HTTP error, stream error, unreachable server, invalid
 * stream). `message` is the provider's own message ("Overloaded", "model not found"…), never a
 * key or a request body; the runtime maps it to MODEL_ERROR. Cancellation is not a ModelError:
 * an aborted request rejects with the signal's reason (see `abortError`), like fetch does.
 */
export type ProviderName = "anthropic" | "openai" | "demo";

export interface ModelErrorInit {
  provider: ProviderName;
  /** HTTP status of the failed response; absent for connection failures and in-stream errors. */
  status?: number;
  /** The provider's error type when it sends one (overloaded_error, rate_limit_error, server_error…). */
  type?: string;
  /** Whether this kind of failure is transient (429, 5xx, overloaded, connection failure). */
  retryable: boolean;
  /** Wait the server asked for (Retry-After / retry-after-ms), in ms. */
  retryAfterMs?: number;
  /** The message is the server's own text (an error body or event), not runcell's: never logged. */
  fromServer?: boolean;
}

export class ModelError extends Error {
  override readonly name = "ModelError";
  readonly provider: ProviderName;
  readonly status?: number;
  readonly type?: string;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly fromServer: boolean;
  /** Requests made for this response before giving up (1 = no retry). Set by the retry loop. */
  attempts = 1;
  /** True when part of the response had already been streamed to the caller (so it was not retried). */
  afterOutput = false;

  constructor(message: string, init: ModelErrorInit) {
    super(message);
    this.provider = init.provider;
    this.status = init.status;
    this.type = init.type;
    this.retryable = init.retryable;
    this.retryAfterMs = init.retryAfterMs;
    this.fromServer = init.fromServer ?? false;
  }
}

/** A key shorter than this is not looked for in messages (it would match ordinary words). */
const MIN_HIDDEN_KEY = 6;

/**
 * `e` without the keys it may quote: the one its request was sent with and the server's own for
 * the provider (`envVar`) — a server (a gateway, a proxy, a self-hosted one) may echo a key in its
 * error message, and a ModelError never contains a key; the vault's scrubbing of a user's secrets
 * knows neither the operator's key nor one only a gateway holds.
 */
export function withoutKey(e: unknown, key: string | null | undefined, envVar: string): unknown {
  if (!(e instanceof ModelError)) return e;
  for (const k of [key, process.env[envVar]]) {
    if (k && k.length >= MIN_HIDDEN_KEY && e.message.includes(k)) e.message = e.message.replaceAll(k, "[redacted key]");
  }
  return e;
}

/**
 * The most a model's streamed answer may take (its server-sent events as they arrive). A provider's
 * own servers stop at max_tokens (8192 tokens: well under 1 MiB); a `base_url` server may stream
 * without end, which would hold the server's memory and disk (every delta is stored) without end.
 */
export const MAX_ANSWER_STREAM_BYTES = 32 * 1024 * 1024;

/** The limit of a provider's answer stream (readServerSentEvents), failing the request with a ModelError past it. */
export const answerLimit = (provider: ProviderName) => ({
  bytes: MAX_ANSWER_STREAM_BYTES,
  error: () => new ModelError(`The model's answer went past ${MAX_ANSWER_STREAM_BYTES / 1024 / 1024} MiB of stream; it was cut off there`, { provider, retryable: false }),
});

/** The error an aborted request rejects with: the signal's reason when it is an Error, else an AbortError. */
export function abortError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  return new DOMException(typeof r === "string" ? r : "The model request was aborted", "AbortError");
}

/** True for what `abortError` produces and for fetch's own abort errors. */
export function isAbortError(e: unknown): boolean {
  return e instanceof Error && (e.name === "AbortError" || e.name === "APIUserAbortError");
}
