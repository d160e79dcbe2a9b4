/** Who is calling: resolved once per request (or WebSocket) from a cookie or an API token. */
export interface AuthUser {
  id: string;
  email: string;
  name: string;
  role: "user" | "admin";
  created_at: number;
}

export interface Principal {
  user: AuthUser;
  via: "token" | "cookie";
  /** Set when via = token. */
  tokenId?: string;
  /** Set when via = cookie: the login session (id and expiry, for get-session). */
  loginSession?: { id: string; user_id: string; expires_at: number; created_at: number };
}

export const isAdmin = (p: Principal | null | undefined) => p?.user.role === "admin";

/** A request's caller as resolved from its credential: `error` says why there is none. */
export interface Authenticated {
  principal: Principal | null;
  error: "missing" | "invalid";
}
