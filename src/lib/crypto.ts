import { timingSafeEqual } from "node:crypto";

export function randomBytes(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

export function randomHex(bytes: number): string {
  return Buffer.from(randomBytes(bytes)).toString("hex");
}

export function randomToken(bytes = 32): string {
  return Buffer.from(randomBytes(bytes)).toString("base64url");
}

/** One-shot SHA-256 (Bun.SHA256.hash: a third of a CryptoHasher's cost; API tokens are hashed on every request). */
export function sha256Hex(input: string | Uint8Array): string {
  return Bun.SHA256.hash(input, "hex");
}

export function hmacSha256Hex(key: string | Uint8Array, data: string | Uint8Array): string {
  return new Bun.CryptoHasher("sha256", key).update(data).digest("hex");
}

/** Constant-time string comparison (lengths are not secret). */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export function sha256Base64(input: string | Uint8Array): string {
  return Bun.SHA256.hash(input, "base64");
}
