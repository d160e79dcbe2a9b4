/**
 * Password hashing: argon2id at OWASP's minimum parameters (m = 19 MiB, t = 2, p = 1) with
 * @node-rs/argon2 (runs on the thread pool, off the event loop). `verifyPassword` against a
 * missing hash still does a full verification against a dummy hash, so an unknown email and a
 * wrong password take the same time.
 */
import { Algorithm, hash, verify } from "@node-rs/argon2";

const PARAMS = { algorithm: Algorithm.Argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

export function hashPassword(password: string): Promise<string> {
  return hash(password, PARAMS);
}

let dummy: Promise<string> | null = null;
function dummyHash(): Promise<string> {
  dummy ??= hash(crypto.randomUUID(), PARAMS);
  return dummy;
}

/** Constant-work verification: a null hash is checked against a dummy and always fails. */
export async function verifyPassword(stored: string | null | undefined, password: string): Promise<boolean> {
  if (!stored) {
    await verify(await dummyHash(), password).catch(() => false);
    return false;
  }
  try {
    return await verify(stored, password);
  } catch {
    return false;
  }
}

/** Warms the dummy hash at start so the first failed sign-in is not faster than later ones. */
export function warmPasswordHashing(): Promise<unknown> {
  return dummyHash();
}
