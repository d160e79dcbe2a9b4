/**
 * The SSRF guard, shared by webhooks (src/notifications/) and model base URLs
 * (src/agents/model-network.ts). A URL is checked when it is configured (every address its host
 * resolves to must be public) and again at every connection on the addresses resolved then, and
 * the connection goes to exactly the address that was checked (so a DNS answer that changes
 * between the check and the connect — DNS rebinding — cannot slip through). Operators lift it with
 * `--allow-private-webhooks` (webhooks) or `--allow-model-hosts` (named model hosts).
 */
import { lookup } from "node:dns/promises";
import { type BlockReason, isIpLiteral, REASON_TEXT } from "./ip.ts";

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to its addresses (getaddrinfo by default; tests inject their own). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** Which addresses are refused (tests may substitute a policy; production uses classifyAddress). */
export type AddressPolicy = (address: string) => BlockReason | null;

export interface NetworkPolicy {
  /** false when the operator allowed private webhooks (--allow-private-webhooks). */
  guard: boolean;
  resolve: Resolver;
  classify: AddressPolicy;
}

export const RESOLVE_TIMEOUT_MS = 5000;
export const URL_MAX = 2048;

export const systemResolver: Resolver = async (hostname) => {
  const all = await lookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** The host of a URL without IPv6 brackets. */
export const bareHost = (u: URL) => u.hostname.replace(/^\[|\]$/g, "");

/** A refusal by the guard; `reason` is the address class. */
export class BlockedAddressError extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: BlockReason,
  ) {
    super(
      address === host
        ? `${host} is ${REASON_TEXT[reason]}`
        : `${host} resolves to ${address}, ${REASON_TEXT[reason]}`,
    );
    this.name = "BlockedAddressError";
  }
}

export class ResolveError extends Error {
  constructor(
    readonly host: string,
    readonly code: string,
  ) {
    super(code === "ENOTFOUND" || code === "ENODATA" ? `${host} does not resolve (${code})` : `resolving ${host} failed (${code})`);
    this.name = "ResolveError";
  }
}

async function resolveWithTimeout(resolve: Resolver, host: string, signal?: AbortSignal): Promise<ResolvedAddress[]> {
  let timer: Timer | undefined;
  const aborted = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ResolveError(host, "ETIMEOUT")), RESOLVE_TIMEOUT_MS);
    signal?.addEventListener("abort", () => reject(signal.reason ?? new ResolveError(host, "EABORTED")), { once: true });
  });
  try {
    const out = await Promise.race([resolve(host), aborted]);
    if (!out.length) throw new ResolveError(host, "ENODATA");
    return out;
  } catch (e) {
    if (e instanceof ResolveError || (signal?.aborted && e === signal.reason)) throw e;
    throw new ResolveError(host, String((e as { code?: string }).code ?? "EFAIL"));
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The addresses `url` may be delivered to: every address its host resolves to, each one checked.
 * Throws BlockedAddressError when any of them is refused (a name that resolves to both a public
 * and a private address is refused as a whole), ResolveError when the name does not resolve.
 */
export async function checkedAddresses(url: URL, net: NetworkPolicy, signal?: AbortSignal): Promise<ResolvedAddress[]> {
  const host = bareHost(url);
  const addrs: ResolvedAddress[] = isIpLiteral(host)
    ? [{ address: host, family: host.includes(":") ? 6 : 4 }]
    : await resolveWithTimeout(net.resolve, host, signal);
  for (const a of addrs) {
    const reason = net.classify(a.address);
    if (reason) throw new BlockedAddressError(host, a.address, reason);
  }
  return addrs;
}

/** Syntax of a webhook URL: absolute http(s), no credentials, at most URL_MAX characters. */
export function parseWebhookUrl(raw: string): { url: URL } | { error: string } {
  if (raw.length > URL_MAX) return { error: `config.url must be at most ${URL_MAX} characters` };
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    return { error: "config.url is not a valid absolute URL" };
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return { error: `config.url must use http or https, not ${u.protocol.replace(/:$/, "")}` };
  if (u.username || u.password) return { error: "config.url must not contain credentials (user:password@); set config.secret and verify the signature instead" };
  if (!u.hostname) return { error: "config.url has no host" };
  // The URL parser accepts 0 (and already refuses above 65535), but nothing can listen on port 0.
  if (u.port === "0") return { error: "config.url must not use port 0 (use a port from 1 to 65535, or none for the scheme's default)" };
  u.hash = "";
  return { url: u };
}

/** The URL to connect to for address `a` of `url`: same scheme, port, path and query, host = the IP. */
export function urlForAddress(url: URL, a: ResolvedAddress): string {
  const host = a.family === 6 ? `[${a.address}]` : a.address;
  return `${url.protocol}//${host}${url.port ? `:${url.port}` : ""}${url.pathname}${url.search}`;
}

/**
 * A fetch that connects only to checked addresses: the URL's host is resolved, every address must
 * pass the policy (else BlockedAddressError, before any connection), and the request goes to the
 * first checked address that accepts it, with the Host header and TLS server name of the URL.
 * Redirects are never followed.
 */
export function guardedFetch(net: NetworkPolicy, opts: { ca?: string } = {}): typeof fetch {
  const f = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const req = input instanceof Request ? input : null;
    const url = new URL(req ? req.url : String(input));
    const addrs = (await checkedAddresses(url, net, init.signal ?? undefined)).sort((a, b) => a.family - b.family);
    const headers = new Headers(req?.headers ?? undefined);
    new Headers(init.headers).forEach((v, k) => headers.set(k, v));
    headers.set("host", url.host);
    const host = bareHost(url);
    const tls = url.protocol === "https:" && !isIpLiteral(host) ? { serverName: host, ...(opts.ca ? { ca: opts.ca } : {}) } : opts.ca ? { ca: opts.ca } : undefined;
    const body = init.body ?? (req && req.body ? await req.arrayBuffer() : undefined);
    return fetchFirst(
      addrs.map((a) => urlForAddress(url, a)),
      { ...init, method: init.method ?? req?.method, body, headers, redirect: "manual", ...(tls ? { tls } : {}) } as RequestInit,
    );
  };
  return f as typeof fetch;
}

/** Errors that prove nothing was sent: the next address may be tried. */
const NOT_CONNECTED = /refused|unreach|EADDRNOTAVAIL/i;

/** Fetches the first of `targets` (one URL per checked address, in order) that accepts a connection. */
export async function fetchFirst(targets: string[], init: RequestInit): Promise<Response> {
  for (let i = 0; ; i++) {
    try {
      return await fetch(targets[i]!, init);
    } catch (e) {
      const code = String((e as { code?: string }).code ?? "");
      if (i + 1 >= targets.length || init.signal?.aborted || !NOT_CONNECTED.test(code)) throw e;
    }
  }
}
