/**
 * The dashboard's API client: same-origin fetch with the session cookie, JSON in and out, the
 * interface's error shape turned into an ApiError. A request refused by the rate limit (429
 * RATE_LIMITED) is sent again after the server's Retry-After; a 401 outside the sign-in surface
 * means the session ended (lib/status.ts). Record types come from the server's own schema modules
 * (type-only imports: nothing of the server reaches the bundle).
 */
import { signedOut, slowedDown } from "./status.ts";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
  /** The rejected field (`details.field`), when the server named one. */
  get field(): string | undefined {
    return typeof this.details?.field === "string" ? this.details.field : undefined;
  }
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** How many times a rate-limited request is sent again before its 429 is the answer. */
const RATE_LIMIT_RETRIES = 10;
/** Password checks are throttled on purpose: their 429 ("try again in N s") is for the user to read. */
const NO_RETRY = /^\/api\/auth\/(sign-in|setup)/;

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      res = await fetch(path, {
        method,
        credentials: "same-origin",
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError("The server could not be reached", 0, "NETWORK");
    }
    const text = await res.text();
    let data: unknown = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (res.ok) return data as T;
    const e = (data ?? {}) as { error?: string; code?: string; details?: Record<string, unknown> };
    if (res.status === 429 && e.code === "RATE_LIMITED" && attempt < RATE_LIMIT_RETRIES && !NO_RETRY.test(path)) {
      // Refused before it was handled: safe to send again, whatever the method.
      const wait = Math.max(1, Number(res.headers.get("retry-after") ?? e.details?.retry_after) || 1);
      slowedDown(wait);
      await new Promise((r) => setTimeout(r, wait * 1000));
      continue;
    }
    if (res.status === 401 && !path.startsWith("/api/auth/")) signedOut();
    throw new ApiError(e.error ?? `${res.status} ${res.statusText}`, res.status, e.code ?? "HTTP_ERROR", e.details);
  }
}

export const get = <T>(path: string) => api<T>("GET", path);
export const post = <T>(path: string, body?: unknown) => api<T>("POST", path, body ?? {});
export const patch = <T>(path: string, body: unknown) => api<T>("PATCH", path, body);
export const put = <T>(path: string, body: unknown) => api<T>("PUT", path, body);
export const del = (path: string) => api<null>("DELETE", path);

/** Every page of a list (small lists: profiles, tokens, secrets). */
export async function all<T>(path: string, max = 1000): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const page: Page<T> = await get<Page<T>>(`${path}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && out.length < max);
  return out;
}
