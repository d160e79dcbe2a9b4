/**
 * What differs between the two OAuth providers: their scopes and how the signed-in identity is
 * read with the access token. GitHub: `GET {api}/user` for the stable id and name, then
 * `GET {api}/user/emails` for the primary address and whether GitHub verified it. Google: the
 * OpenID Connect userinfo endpoint (`sub`, `email`, `email_verified`). Endpoints come from the
 * configuration so tests (and GitHub Enterprise) can point them elsewhere.
 */
import type { OAuthProviderConfig } from "../config.ts";
import { USER_AGENT } from "../version.ts";

export type ProviderName = "github" | "google";
export const PROVIDERS: readonly ProviderName[] = ["github", "google"];

export interface ProviderIdentity {
  /** The provider's stable account id (GitHub numeric id, Google `sub`). */
  accountId: string;
  email: string | null;
  emailVerified: boolean;
  name: string | null;
}

/** A provider answered something we cannot use (turned into 502 BAD_GATEWAY by the caller). */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}

export const PROVIDER_TIMEOUT_MS = 10_000;

async function getJson(url: string, accessToken: string, accept: string): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { authorization: `Bearer ${accessToken}`, accept, "user-agent": USER_AGENT },
      signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
      redirect: "error",
    });
  } catch (e) {
    throw new ProviderError(`could not reach ${new URL(url).host}: ${(e as Error).message}`, "unreachable");
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new ProviderError(`${new URL(url).pathname} answered HTTP ${res.status}`, `http_${res.status}`);
  }
  try {
    return await res.json();
  } catch {
    throw new ProviderError(`${new URL(url).pathname} did not answer JSON`, "bad_response");
  }
}

const str = (v: unknown): string | null => (typeof v === "string" && v.trim() ? v.trim() : typeof v === "number" ? String(v) : null);

async function githubIdentity(cfg: OAuthProviderConfig, accessToken: string): Promise<ProviderIdentity> {
  const accept = "application/vnd.github+json";
  const user = (await getJson(`${cfg.apiUrl}/user`, accessToken, accept)) as Record<string, unknown>;
  const accountId = str(user?.id);
  if (!accountId) throw new ProviderError("/user has no id", "bad_response");
  const emails = await getJson(`${cfg.apiUrl}/user/emails`, accessToken, accept);
  if (!Array.isArray(emails)) throw new ProviderError("/user/emails is not a list", "bad_response");
  const primary = emails.find((e) => e && typeof e === "object" && e.primary === true && typeof e.email === "string") as
    | { email: string; verified?: unknown }
    | undefined;
  return { accountId, email: primary?.email ?? null, emailVerified: primary?.verified === true, name: str(user.name) ?? str(user.login) };
}

async function googleIdentity(cfg: OAuthProviderConfig, accessToken: string): Promise<ProviderIdentity> {
  const info = (await getJson(cfg.apiUrl, accessToken, "application/json")) as Record<string, unknown>;
  const accountId = str(info?.sub);
  if (!accountId) throw new ProviderError("userinfo has no sub", "bad_response");
  const verified = info.email_verified === true || info.email_verified === "true";
  return { accountId, email: str(info.email), emailVerified: verified, name: str(info.name) };
}

export const PROVIDER_SPECS: Record<ProviderName, { scopes: string[]; loginHintParam: string; identity(cfg: OAuthProviderConfig, accessToken: string): Promise<ProviderIdentity> }> = {
  github: { scopes: ["read:user", "user:email"], loginHintParam: "login", identity: githubIdentity },
  google: { scopes: ["openid", "email", "profile"], loginHintParam: "login_hint", identity: googleIdentity },
};
