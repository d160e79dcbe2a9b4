/** What the two SDK-backed providers share: client reuse, key lookup, tool-argument parsing, endpoint names. */
import { ModelError, type ProviderName } from "./model-error.ts";
import { jsonDepth, MAX_DEPTH } from "../../lib/json-input.ts";
import { boundErrorBodies } from "./model-answer.ts";

/**
 * A small cache of SDK clients keyed by (base URL, key, fetch), so connections are reused between
 * turns. `fetch` is the network route of the request (the SSRF-guarded one for users' base URLs);
 * the client is given it with error bodies bounded (model-answer.ts), since the SDKs read them whole.
 */
export class ClientCache<C> {
  private readonly clients = new Map<string, C>();
  private readonly fetches = new Map<typeof fetch, number>();
  constructor(
    private readonly make: (baseUrl: string | undefined, apiKey: string, fetchImpl: typeof fetch | undefined) => C,
    private readonly max = 32,
  ) {}

  get(baseUrl: string | undefined, apiKey: string, fetchImpl?: typeof fetch): C {
    let route = 0;
    if (fetchImpl) {
      route = this.fetches.get(fetchImpl) ?? this.fetches.size + 1;
      this.fetches.set(fetchImpl, route);
    }
    const key = `${baseUrl ?? ""}\n${apiKey}\n${route}`;
    let c = this.clients.get(key);
    if (c) return c;
    c = this.make(baseUrl, apiKey, boundErrorBodies(fetchImpl ?? ((input, init) => fetch(input, init))));
    if (this.clients.size >= this.max) this.clients.delete(this.clients.keys().next().value!);
    this.clients.set(key, c);
    return c;
  }
}

/**
 * The key to send is only ever the request's: the vault (src/vault/secrets.ts resolveApiKey)
 * decides whether the server's own key may be used, and hands it out only for the provider's
 * official endpoint — never for a profile's custom base_url, which a user could point at a server
 * of theirs to collect the operator's key. A custom base_url may need no key at all (Ollama,
 * llama.cpp), so it gets a placeholder; the provider's own API without a key fails before any
 * request, with a message that says how to fix it.
 */
export function resolveApiKey(provider: ProviderName, envVar: string, apiKey: string | null | undefined, baseUrl: string | undefined): string {
  if (apiKey) return apiKey;
  if (baseUrl) return "no-key";
  throw new ModelError(`No API key for ${provider}: set ${envVar} on the server or the profile's model.api_key_secret`, {
    provider,
    retryable: false,
    status: 401,
  });
}

/** A base URL without credentials or query, for error messages. */
export function describeEndpoint(baseUrl: string | undefined, fallback: string): string {
  if (!baseUrl) return fallback;
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
  } catch {
    return "the configured base_url";
  }
}

/**
 * Tool-call arguments as an object. Models behind compatible servers sometimes send "" for no
 * arguments, or a JSON string holding the JSON; those are accepted. Anything else that is not a
 * JSON object is passed on as `{_raw_arguments: text}` so the tool rejects it and the model, seeing
 * that error, can try again — a malformed call should not end the whole task.
 */
export function parseToolArguments(text: string): Record<string, unknown> {
  const t = text.trim();
  if (t === "") return {};
  // Nested past what runcell walks (scrubbing, storing, checking a tool's input): not read as arguments.
  if (t.length > 2 * MAX_DEPTH && jsonDepth(t) > MAX_DEPTH) return { _raw_arguments: `(arguments nested deeper than ${MAX_DEPTH} levels, not read)` };
  try {
    let v: unknown = JSON.parse(t);
    if (typeof v === "string") v = JSON.parse(v);
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // fall through
  }
  return { _raw_arguments: text };
}

/** Error codes of a connection that dropped while the answer's body was being read. */
const DROPPED = new Set(["ECONNRESET", "EPIPE", "ETIMEDOUT", "ECONNABORTED", "ConnectionClosed", "UND_ERR_SOCKET", "ERR_STREAM_PREMATURE_CLOSE"]);

/**
 * Whether `e` is the connection dropping under a streamed answer (a reset, a closed socket) —
 * thrown by the body's reader, not the SDK's connection error (that one comes before the headers).
 * Transient like any connection failure: retried while nothing was streamed.
 */
export function isConnectionDrop(e: Error): boolean {
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && DROPPED.has(code)) return true;
  return /socket connection was closed unexpectedly|ECONNRESET|connection reset|other side closed/i.test(e.message);
}

/** The ModelError type of a connection dropped under a streamed answer (its words, also for a private server). */
export const CONNECTION_LOST = "connection_lost";

/** `e` as the ModelError of a connection dropped under the answer (`where`: the endpoint), or null when it is not one. */
export function droppedError(e: Error, provider: ProviderName, where: string): ModelError | null {
  if (!isConnectionDrop(e)) return null;
  return new ModelError(`The connection to ${where} was lost while its answer streamed: ${e.message}`, { provider, type: CONNECTION_LOST, retryable: true });
}

/** The message of a connection failure: which endpoint, and the transport's own reason. */
export function connectionMessage(where: string, e: { message: string; cause?: unknown }): string {
  const cause = e.cause instanceof Error ? e.cause.message : "";
  const reason = cause && cause !== e.message ? `${e.message} (${cause})` : e.message;
  return `Cannot reach ${where}: ${reason}`;
}

/** The human message inside an error body: `{error:{message}}`, `{message}`, `{error:"…"}` or a bare string. */
export function bodyMessage(body: unknown): string | undefined {
  if (typeof body === "string") return body.trim() || undefined;
  if (!body || typeof body !== "object") return undefined;
  const o = body as Record<string, unknown>;
  if (typeof o.message === "string" && o.message) return o.message;
  if (typeof o.error === "string" && o.error) return o.error;
  return o.error && typeof o.error === "object" ? bodyMessage(o.error) : undefined;
}

/**
 * The SDKs add headers from ANTHROPIC_CUSTOM_HEADERS / OPENAI_CUSTOM_HEADERS ("Name: value" lines)
 * of the server's environment to every request. Those are the operator's (often a gateway's
 * credentials) and must not reach a profile's custom base_url: this maps each name to null, which
 * makes the SDK drop it.
 */
export function dropEnvHeaders(envVar: string): Record<string, null> {
  const out: Record<string, null> = {};
  for (const line of (process.env[envVar] ?? "").split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) out[line.slice(0, colon).trim()] = null;
  }
  return out;
}
