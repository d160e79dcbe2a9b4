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

/**
 * Passwords are hashed in Unicode's composed form (NFC), so the same password typed where an
 * accented letter is one character or two (macOS vs Windows, NIST SP 800-63B 5.1.1.2) matches.
 */
export function hashPassword(password: string): Promise<string> {
  return hash(password.normalize("NFC"), PARAMS);
}

/** A password's length as people count it: in characters (code points), not UTF-16 units. */
export const passwordLength = (password: string) => [...password.normalize("NFC")].length;

/**
 * The hash an unknown account is checked against: same algorithm and parameters as real ones, so
 * the work is the same; its password is a discarded random value, so nothing ever matches it.
 * A constant (not computed at start) because computing it costs 19 MiB and ~30 ms of start-up.
 */
const DUMMY_HASH = "$argon2id$v=19$m=19456,t=2,p=1$RovzJ4k+U882tlKnZ/Qg+Q$QQd1+8ETsgiy0vq9McQNgnVar263Kk7Hexncs9l7fCE";

/** Constant-work verification: a null hash is checked against a dummy and always fails. */
export async function verifyPassword(stored: string | null | undefined, password: string): Promise<boolean> {
  if (!stored) {
    await verify(DUMMY_HASH, password).catch(() => false);
    return false;
  }
  const composed = password.normalize("NFC");
  try {
    if (await verify(stored, composed)) return true;
    // A hash made before passwords were composed: the password as it was typed then.
    return composed !== password && (await verify(stored, password));
  } catch {
    return false;
  }
}
