/**
 * Where a profile's model requests may go. Its provider's own endpoint: anywhere. A custom
 * `model.base_url` of a user: only to public addresses — checked when the profile is saved, and
 * again at every request on the addresses resolved then, connecting to exactly the checked
 * address (the SSRF guard of src/lib/ssrf.ts, the webhooks' own). Loopback and private model
 * servers (a local Ollama, vLLM) are for admin-role users' profiles, or for the hosts the operator
 * names with `--allow-model-hosts`; errors from those never echo the server's answer, so a model
 * URL cannot be used to read or probe internal services.
 */
import { Errors } from "../lib/errors.ts";
import { CONNECTION_LOST } from "./providers/sdk-support.ts";
import { classifyAddress, isIpLiteral } from "../lib/ip.ts";
import { bareHost, BlockedAddressError, checkedAddresses, guardedFetch, type NetworkPolicy, ResolveError, type ResolvedAddress, systemResolver } from "../lib/ssrf.ts";

export interface ModelRoute {
  /** The fetch the provider must use (undefined: the global one). */
  fetch?: typeof fetch;
  /** Errors from this server are reported without its answer (a loopback or private host). */
  quiet: boolean;
}

export interface ModelNetworkDeps {
  /** `host` or `host:port` entries (lower case) every user may use. */
  allowHosts: string[];
  isAdmin(userId: string): boolean | Promise<boolean>;
  /** Address policy (tests may substitute the resolver). */
  net?: NetworkPolicy;
}

const PUBLIC: ModelRoute = { quiet: false };

export class ModelNetwork {
  private net: NetworkPolicy;
  private guarded: typeof fetch;

  constructor(private d: ModelNetworkDeps) {
    this.net = d.net ?? { guard: true, resolve: systemResolver, classify: classifyAddress };
    this.guarded = guardedFetch(this.net);
  }

  /** Whether the operator listed this URL's host (with or without its port). */
  private listed(u: URL): boolean {
    const host = bareHost(u).toLowerCase();
    const port = u.port || (u.protocol === "https:" ? "443" : "80");
    return this.d.allowHosts.includes(host) || this.d.allowHosts.includes(`${host}:${port}`);
  }

  private async exempt(userId: string, u: URL): Promise<boolean> {
    return this.listed(u) || (await this.d.isAdmin(userId));
  }

  /**
   * When a profile is saved: VALIDATION_FAILED on model.base_url for an address the owner may not
   * use. A host that does not resolve yet is accepted (every request checks again).
   */
  check(userId: string, baseUrl: string | null | undefined): Promise<void> {
    return this.checkUrl(userId, baseUrl, "model.base_url", "model servers");
  }

  /** The same rule for any outbound URL a user configures (MCP servers, git repositories), naming `field`. */
  async checkUrl(userId: string, url: string | null | undefined, field: string, what = "servers"): Promise<void> {
    if (!url) return;
    const u = new URL(url);
    if (await this.exempt(userId, u)) return;
    try {
      await checkedAddresses(u, this.net);
    } catch (e) {
      const hint = `${what} on loopback or private networks are for admins, or for the hosts the operator allows with --allow-model-hosts`;
      if (e instanceof BlockedAddressError) throw Errors.validation(field, `${field} is refused: ${e.message}; ${hint}`, { reason: e.reason });
      // A name that does not resolve now may later: the request-time check decides then.
      if (e instanceof ResolveError) return;
      throw e;
    }
  }

  /**
   * For a client that connects by itself (git): null when the owner may reach the host as it
   * resolves (an admin, a listed host), else the checked addresses to pin the connection to.
   * Throws BlockedAddressError / ResolveError like the guarded fetch.
   */
  async pin(userId: string, url: URL): Promise<ResolvedAddress[] | null> {
    if (await this.exempt(userId, url)) return null;
    return checkedAddresses(url, this.net);
  }

  /** Whether the owner may reach private addresses at this URL's host (plain http is allowed only there). */
  mayUsePrivate(userId: string, url: URL): Promise<boolean> {
    return this.exempt(userId, url);
  }

  /** How the next request of `userId`'s profile to `baseUrl` goes out. */
  async route(userId: string, baseUrl: string | null | undefined): Promise<ModelRoute> {
    if (!baseUrl) return PUBLIC;
    const u = new URL(baseUrl);
    if (!(await this.exempt(userId, u))) return { fetch: this.guarded, quiet: false };
    return { quiet: await this.isPrivate(u) };
  }

  /** Whether a host resolves to any loopback, private or otherwise non-public address. */
  private async isPrivate(u: URL): Promise<boolean> {
    const host = bareHost(u);
    if (isIpLiteral(host)) return classifyAddress(host) !== null;
    try {
      return (await this.net.resolve(host)).some((a) => classifyAddress(a.address) !== null);
    } catch {
      return true;
    }
  }
}

/** An error type as servers name them (overloaded_error, rate_limit_exceeded): anything else is not echoed. */
const ERROR_TYPE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * A model failure from a quiet (private) host: what happened, not what it said — its HTTP status
 * and the error type it named (a short token, so nothing of a page or a message gets through).
 */
export function quietModelMessage(status: number | undefined, type?: string): string {
  if (type === CONNECTION_LOST) return "The connection to the model server was lost while its answer streamed (details are not shown for servers on private networks)";
  const kind = type && ERROR_TYPE.test(type) ? ` (${type})` : "";
  if (status) return `The model server answered HTTP ${status}${kind} (its answer is not shown for servers on private networks)`;
  if (kind) return `The model server reported an error${kind} (details are not shown for servers on private networks)`;
  return "The model server could not be reached or sent an invalid response (details are not shown for servers on private networks)";
}
