/**
 * Known devices (OWASP's "device cookies"): a browser that signed in to an account with its
 * password gets a cookie naming that account, signed with a server key. Its later sign-ins to that
 * account are throttled per device, not per account (src/auth/throttle.ts), so wrong passwords
 * sent by anyone else — which block the account for every other client — never lock its owner out
 * of a browser they have used before. The cookie is no credential: it grants nothing without the
 * password, and sign-out leaves it.
 *
 * Value: `<nonce>.<HMAC-SHA256(key, "device\n" + user id + "\n" + nonce)>`. A browser holds one
 * (for the account it signed in to last); a forged, foreign or stale one counts as none.
 */
import { hmacSha256Hex, randomToken, safeEqual } from "../lib/crypto.ts";

export const DEVICE_COOKIE_BASE = "runcell.device";
/** The settings row of its key (sealed; Settings.sealedKey). */
export const DEVICE_KEY_SETTING = "auth.device_cookie_key";
const MAX_AGE_SEC = 365 * 86_400;
/** Only the sign-in and sign-up routes read it. */
const PATH = "/api/auth";

export class DeviceCookies {
  readonly name: string;

  constructor(
    private key: Uint8Array,
    private secure: boolean,
  ) {
    this.name = secure ? `__Secure-${DEVICE_COOKIE_BASE}` : DEVICE_COOKIE_BASE;
  }

  private sign(userId: string, nonce: string): string {
    return hmacSha256Hex(this.key, `device\n${userId}\n${nonce}`);
  }

  /** A new value for `userId` (the Set-Cookie of a successful password sign-in). */
  issue(userId: string): string {
    const nonce = randomToken(16);
    const parts = [`${this.name}=${nonce}.${this.sign(userId, nonce)}`, `Path=${PATH}`, "HttpOnly", "SameSite=Strict", `Max-Age=${MAX_AGE_SEC}`];
    if (this.secure) parts.push("Secure");
    return parts.join("; ");
  }

  /** The device's id when `value` is a cookie this server issued for `userId`; null otherwise. */
  deviceOf(value: string | null | undefined, userId: string | undefined): string | null {
    if (!value || !userId || value.length > 200) return null;
    const dot = value.indexOf(".");
    if (dot <= 0) return null;
    const nonce = value.slice(0, dot);
    return safeEqual(value.slice(dot + 1), this.sign(userId, nonce)) ? nonce : null;
  }
}
