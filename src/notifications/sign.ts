/**
 * The webhook signature of the interface: `X-Service-Signature: t=<unix seconds>,v1=<hex>` where
 * v1 = HMAC-SHA256(secret, "<t>.<raw body>"). The same scheme as Stripe's `Stripe-Signature`, so
 * receivers can use any verifier of that scheme. `t` is the time of the attempt (each retry is
 * signed afresh, so receivers can keep a replay window of a few minutes); the body never changes.
 */
import { hmacSha256Hex } from "../lib/crypto.ts";

export const SIGNATURE_HEADER = "X-Service-Signature";
export const DELIVERY_HEADER = "X-Service-Delivery";

export function signatureV1(secret: string, t: number, body: string): string {
  return hmacSha256Hex(secret, `${t}.${body}`);
}

/** The header value for `body` signed at `nowMs`. */
export function signatureHeader(secret: string, body: string, nowMs: number): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${signatureV1(secret, t, body)}`;
}
