/**
 * A local OAuth 2.0 / OpenID Connect provider on loopback that speaks the real protocol, in
 * GitHub's or Google's dialect: an authorize endpoint that redirects back with a code (or an
 * error), a token endpoint that authenticates the client, checks the code (single use, bound to
 * its redirect_uri) and verifies the PKCE S256 verifier against the challenge, and the identity
 * endpoints (GitHub: /user and /user/emails; Google: OIDC userinfo) that require the access token.
 */
import { randomBytes } from "node:crypto";

export type Dialect = "github" | "google";

export interface ProviderAccount {
  id: string;
  name: string;
  email: string | null;
  verified: boolean;
}

interface IssuedCode {
  clientId: string;
  redirectUri: string;
  challenge: string;
  method: string;
  account: ProviderAccount;
  used: boolean;
}

export interface OAuthProvider {
  dialect: Dialect;
  url: string;
  clientId: string;
  clientSecret: string;
  /** The account the next authorize request signs in as. */
  account: ProviderAccount;
  /** Make the authorize endpoint answer `error=<value>` instead of a code. */
  denyWith: string | null;
  /** Force an HTTP status on the token endpoint or the identity endpoints. */
  failToken: number | null;
  failUser: number | null;
  /** Every request seen: method and path (for assertions such as "no token exchange happened"). */
  requests: { method: string; path: string }[];
  /** Token endpoint outcomes, e.g. "ok", "invalid_grant: PKCE verifier mismatch". */
  exchanges: string[];
  /** runcell flags pointing the provider's endpoints here. */
  flags(): string[];
  stop(): void;
}

const b64url = (buf: ArrayBuffer | Uint8Array) => Buffer.from(buf as Uint8Array).toString("base64url");
const sha256b64url = (s: string) => b64url(new Bun.CryptoHasher("sha256").update(s).digest() as unknown as Uint8Array);
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

export function startOAuthProvider(dialect: Dialect, account: Partial<ProviderAccount> = {}): OAuthProvider {
  const codes = new Map<string, IssuedCode>();
  const tokens = new Map<string, ProviderAccount>();
  const clientId = `client-${dialect}-${randomBytes(4).toString("hex")}`;
  const clientSecret = randomBytes(16).toString("hex");
  const paths =
    dialect === "github"
      ? { authorize: "/login/oauth/authorize", token: "/login/oauth/access_token" }
      : { authorize: "/o/oauth2/v2/auth", token: "/token" };

  const p: OAuthProvider = {
    dialect,
    url: "",
    clientId,
    clientSecret,
    account: { id: dialect === "github" ? "583231" : "110248495921238986420", name: "Octo Cat", email: "octo@example.com", verified: true, ...account },
    denyWith: null,
    failToken: null,
    failUser: null,
    requests: [],
    exchanges: [],
    flags() {
      if (dialect === "github") {
        return [
          "--github-client-id", clientId,
          "--github-client-secret", clientSecret,
          "--github-authorize-url", p.url + paths.authorize,
          "--github-token-url", p.url + paths.token,
          "--github-api-url", p.url,
        ];
      }
      return [
        "--google-client-id", clientId,
        "--google-client-secret", clientSecret,
        "--google-authorize-url", p.url + paths.authorize,
        "--google-token-url", p.url + paths.token,
        "--google-userinfo-url", p.url + "/v1/userinfo",
      ];
    },
    stop() {
      server.stop(true);
    },
  };

  /** Token endpoint error, in each provider's style: GitHub answers 200 with an error field. */
  const tokenError = (error: string, description: string) => {
    p.exchanges.push(`${error}: ${description}`);
    return dialect === "github" ? json({ error, error_description: description }) : json({ error, error_description: description }, 400);
  };

  function authorize(url: URL): Response {
    const q = url.searchParams;
    if (q.get("response_type") !== "code") return new Response("unsupported response_type", { status: 400 });
    if (q.get("client_id") !== clientId) return new Response("unknown client", { status: 400 });
    const redirectUri = q.get("redirect_uri");
    const state = q.get("state");
    const challenge = q.get("code_challenge");
    if (!redirectUri || !state || !challenge) return new Response("missing redirect_uri, state or code_challenge", { status: 400 });
    if (q.get("code_challenge_method") !== "S256") return new Response("only S256", { status: 400 });
    const back = new URL(redirectUri);
    back.searchParams.set("state", state);
    if (p.denyWith) back.searchParams.set("error", p.denyWith);
    else {
      const code = randomBytes(20).toString("hex");
      codes.set(code, { clientId, redirectUri, challenge, method: "S256", account: { ...p.account }, used: false });
      back.searchParams.set("code", code);
      if (dialect === "google") back.searchParams.set("scope", q.get("scope") ?? "");
    }
    return new Response(null, { status: 302, headers: { location: back.toString() } });
  }

  async function token(req: Request): Promise<Response> {
    if (p.failToken) return new Response("provider trouble", { status: p.failToken });
    if (!req.headers.get("content-type")?.startsWith("application/x-www-form-urlencoded")) return tokenError("invalid_request", "form body expected");
    const form = new URLSearchParams(await req.text());
    let id = form.get("client_id");
    let secret = form.get("client_secret");
    const basic = req.headers.get("authorization");
    if (basic?.startsWith("Basic ")) {
      const [u, s] = Buffer.from(basic.slice(6), "base64").toString().split(":");
      id = decodeURIComponent(u ?? "");
      secret = decodeURIComponent(s ?? "");
    }
    if (id !== clientId || secret !== clientSecret) return tokenError("invalid_client", "client authentication failed");
    if (form.get("grant_type") !== "authorization_code") return tokenError("unsupported_grant_type", "authorization_code only");
    const issued = codes.get(form.get("code") ?? "");
    if (!issued || issued.used) return tokenError(dialect === "github" ? "bad_verification_code" : "invalid_grant", "unknown or used code");
    issued.used = true;
    if (form.get("redirect_uri") !== issued.redirectUri) return tokenError("invalid_grant", "redirect_uri mismatch");
    const verifier = form.get("code_verifier");
    if (!verifier || sha256b64url(verifier) !== issued.challenge) return tokenError("invalid_grant", "PKCE verifier mismatch");
    const accessToken = (dialect === "github" ? "gho_" : "ya29.") + randomBytes(20).toString("hex");
    tokens.set(accessToken, issued.account);
    p.exchanges.push("ok");
    return json(
      dialect === "github"
        ? { access_token: accessToken, token_type: "bearer", scope: "read:user,user:email" }
        : { access_token: accessToken, token_type: "Bearer", expires_in: 3599, scope: "openid email profile" },
    );
  }

  function identity(req: Request, path: string): Response {
    if (p.failUser) return json({ message: "provider trouble" }, p.failUser);
    const auth = req.headers.get("authorization") ?? "";
    const acct = tokens.get(auth.replace(/^Bearer\s+/i, ""));
    if (!acct) return json({ message: "Bad credentials" }, 401);
    if (dialect === "github" && path === "/user") return json({ id: Number(acct.id), login: "octocat", name: acct.name, email: null });
    if (dialect === "github" && path === "/user/emails") {
      const list: { email: string; primary: boolean; verified: boolean; visibility: string | null }[] = [
        { email: "octo-secondary@example.com", primary: false, verified: true, visibility: null },
      ];
      if (acct.email) list.unshift({ email: acct.email, primary: true, verified: acct.verified, visibility: "private" });
      return json(list);
    }
    if (dialect === "google" && path === "/v1/userinfo") {
      return json({ sub: acct.id, name: acct.name, email: acct.email ?? undefined, email_verified: acct.verified, picture: "https://example.com/p.png" });
    }
    return json({ message: "Not Found" }, 404);
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      p.requests.push({ method: req.method, path: url.pathname });
      if (req.method === "GET" && url.pathname === paths.authorize) return authorize(url);
      if (req.method === "POST" && url.pathname === paths.token) return token(req);
      if (req.method === "GET") return identity(req, url.pathname);
      return new Response("not found", { status: 404 });
    },
  });
  p.url = `http://127.0.0.1:${server.port}`;
  return p;
}
