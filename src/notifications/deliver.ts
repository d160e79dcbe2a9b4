/**
 * One HTTP attempt of a webhook delivery and its classification. With the SSRF guard on, the host
 * is resolved here, every address checked, and the request sent to the checked IP itself (Host
 * header and TLS server name set to the URL's host, so virtual hosting and certificate checks work
 * as usual). Redirects are never followed.
 *
 * Outcomes: a 2xx is `delivered`; a 5xx, 408, 429, a timeout, a network or DNS failure is `retry`;
 * any other 4xx, a 3xx, or a refused address is `fail` (retrying cannot help); `aborted` means
 * our own shutdown cut the attempt short.
 */
import { bareHost, BlockedAddressError, checkedAddresses, fetchFirst, type NetworkPolicy, ResolveError, urlForAddress } from "../lib/ssrf.ts";
import { readHead } from "../lib/bounded-fetch.ts";
import { isIpLiteral } from "../lib/ip.ts";

export type Outcome =
  | { kind: "delivered"; status: number }
  | { kind: "retry" | "fail"; status: number | null; error: string }
  | { kind: "aborted" };

export interface AttemptRequest {
  url: string | URL;
  body: string;
  headers: Record<string, string>;
}

export interface AttemptOptions {
  net: NetworkPolicy;
  timeoutMs: number;
  /** The worker aborts it at shutdown (the attempt then reports `aborted`). */
  controller?: AbortController;
  /** Extra trusted CA (PEM) for https receivers with a private CA (tests). */
  ca?: string;
}

/** How much of a non-2xx response body is kept in last_error. */
const SNIPPET = 200;

/** How much of a non-2xx response body is read for it (the rest is cancelled, not read). */
const SNIPPET_READ_BYTES = 4096;

async function readSnippet(res: Response): Promise<string> {
  const head = await readHead(res.body, SNIPPET_READ_BYTES);
  const text = Buffer.from(head).toString("utf8").replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return text.length > SNIPPET ? text.slice(0, SNIPPET) + "…" : text;
}

function networkError(e: unknown): string {
  const err = e as { code?: string; name?: string; message?: string };
  const code = err.code && err.code !== "ERR_UNKNOWN" ? err.code : err.name ?? "Error";
  // Bun's messages repeat the URL; the code says what happened without it.
  return `network error: ${code}`;
}

export async function attempt(req: AttemptRequest, opts: AttemptOptions): Promise<Outcome> {
  const url = typeof req.url === "string" ? new URL(req.url) : req.url;
  // One controller for both the attempt's deadline and the worker's shutdown.
  const ac = opts.controller ?? new AbortController();
  const signal = ac.signal;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new Error("timeout"));
  }, opts.timeoutMs);
  const headers = { ...req.headers };
  let targets = [url.href];
  let serverName: string | undefined;

  try {
    if (opts.net.guard) {
      // IPv4 first (a host without IPv6 routes still delivers); every address already checked.
      const addrs = (await checkedAddresses(url, opts.net, signal)).sort((a, b) => a.family - b.family);
      targets = addrs.map((a) => urlForAddress(url, a));
      headers.host = url.host;
      const host = bareHost(url);
      if (url.protocol === "https:" && !isIpLiteral(host)) serverName = host;
    }
    const res = await fetchFirst(targets, { method: "POST", body: req.body, headers, redirect: "manual", signal, tls: serverName || opts.ca ? { serverName, ca: opts.ca } : undefined } as RequestInit);
    const status = res.status;
    if (status >= 200 && status < 300) {
      // Drain a small body so the connection goes back to the pool; cut a large one short.
      const len = Number(res.headers.get("content-length") ?? NaN);
      if (len <= 65536) await res.arrayBuffer().catch(() => {});
      else await res.body?.cancel().catch(() => {});
      return { kind: "delivered", status };
    }
    const snippet = await readSnippet(res);
    const text = `HTTP ${status}${snippet ? `: ${snippet}` : ""}`;
    if (status >= 300 && status < 400) {
      return { kind: "fail", status, error: `HTTP ${status}: redirects are not followed; configure the final URL of the receiver` };
    }
    if (status >= 400 && status < 500 && status !== 408 && status !== 429) return { kind: "fail", status, error: text };
    return { kind: "retry", status, error: text };
  } catch (e) {
    if (timedOut) return { kind: "retry", status: null, error: `timed out after ${opts.timeoutMs} ms` };
    if (signal.aborted) return { kind: "aborted" };
    if (e instanceof BlockedAddressError) {
      return { kind: "fail", status: null, error: `refused by the SSRF guard: ${e.message} (webhooks may only reach public addresses)` };
    }
    if (e instanceof ResolveError) return { kind: "retry", status: null, error: `DNS: ${e.message}` };
    return { kind: "retry", status: null, error: networkError(e) };
  } finally {
    clearTimeout(timer);
  }
}
