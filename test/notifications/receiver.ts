/**
 * A webhook receiver on loopback for the notification tests. It records every request (arrival
 * time, headers, raw body) and verifies every signature independently of runcell's code: by
 * recomputing the HMAC with node:crypto and by Stripe's own verifier of the same t=…,v1=… scheme
 * (our header value fed in as Stripe-Signature).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import Stripe from "stripe";

const stripe = new Stripe("sk_test_unused");

export interface Received {
  at: number;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** null when no secret is known to the receiver; else whether both verifiers accepted it. */
  hmacOk: boolean | null;
  stripeOk: boolean | null;
}

export type Responder = (n: number, req: Request, body: string) => Response | Promise<Response>;

/** Recomputes v1 = hex HMAC-SHA256(secret, "<t>.<body>") and compares in constant time. */
export function verifyHmac(header: string | undefined, body: string, secret: string): boolean {
  if (!header) return false;
  const parts = Object.fromEntries(header.split(",").map((kv) => kv.split("=", 2) as [string, string]));
  if (!parts.t || !parts.v1 || !/^\d+$/.test(parts.t)) return false;
  const expected = createHmac("sha256", secret).update(`${parts.t}.${body}`).digest();
  const got = Buffer.from(parts.v1, "hex");
  return got.length === expected.length && timingSafeEqual(got, expected);
}

export async function verifyWithStripe(header: string | undefined, body: string, secret: string, receivedAtMs = Date.now()): Promise<boolean> {
  if (!header) return false;
  try {
    await stripe.webhooks.constructEventAsync(body, header, secret, 300, undefined, receivedAtMs);
    return true;
  } catch {
    return false;
  }
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Replaces the responder (default: 200 "ok"). */
  respond(fn: Responder): void;
  /** The secret the receiver verifies with (null: unsigned expected). */
  secret: string | null;
  stop(): void;
}

export function startReceiver(opts: { hostname?: string; secret?: string | null; respond?: Responder } = {}): Receiver {
  let responder: Responder = opts.respond ?? (() => new Response("ok"));
  const received: Received[] = [];
  const r: Receiver = {
    url: "",
    port: 0,
    received,
    secret: opts.secret ?? null,
    respond(fn) {
      responder = fn;
    },
    stop() {
      server.stop(true);
    },
  };
  const server = Bun.serve({
    hostname: opts.hostname ?? "127.0.0.1",
    port: 0,
    async fetch(req) {
      const at = Date.now();
      const body = await req.text();
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      const sig = headers["x-service-signature"];
      const rec: Received = {
        at,
        path: new URL(req.url).pathname,
        headers,
        body,
        hmacOk: r.secret == null ? null : verifyHmac(sig, body, r.secret),
        stripeOk: r.secret == null ? null : await verifyWithStripe(sig, body, r.secret),
      };
      received.push(rec);
      return responder(received.length, req, body);
    },
  });
  r.port = server.port!;
  r.url = `http://${opts.hostname ?? "127.0.0.1"}:${server.port}`;
  return r;
}
