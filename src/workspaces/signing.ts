/**
 * Signed workspace-file URLs: `{public_url}/files/<ctr_id>/<path>?exp=<unix>&sig=<hex>`, where
 * sig = HMAC-SHA256(key, "<ctr_id>\n<path>\n<exp>") and <path> is relative to /workspace. They
 * work without a credential until `exp`, so `<img>` tags and chat surfaces can show them. The key
 * is 32 random bytes made at first start and kept in `settings`, sealed with the data dir's key
 * (src/lib/sealer.ts): a copy of the database alone cannot mint URLs, and deleting the setting
 * revokes every URL ever issued.
 */
import { hmacSha256Hex, safeEqual } from "../lib/crypto.ts";
import type { Sealer } from "../lib/sealer.ts";
import type { Settings } from "../db/settings.ts";

export const SIGNING_KEY_SETTING = "workspaces.file_url_key";
/** The AAD Settings.sealedKey seals it with. */
export const SIGNING_KEY_AAD = "settings:" + SIGNING_KEY_SETTING;

export function loadSigningKey(settings: Settings, sealer: Sealer): Promise<Uint8Array> {
  return settings.sealedKey(SIGNING_KEY_SETTING, sealer);
}

export const encodePath = (rel: string) => rel.split("/").map(encodeURIComponent).join("/");

export class FileUrlSigner {
  constructor(
    private key: Uint8Array,
    private publicUrl: string,
    private now: () => number,
  ) {}

  private sig(ctrId: string, rel: string, exp: number): string {
    return hmacSha256Hex(this.key, `${ctrId}\n${rel}\n${exp}`);
  }

  /** `rel` is a normalised path relative to /workspace. */
  url(ctrId: string, rel: string, ttlSec: number): string {
    const exp = Math.floor(this.now() / 1000) + Math.max(1, Math.floor(ttlSec));
    return `${this.publicUrl}/files/${ctrId}/${encodePath(rel)}?exp=${exp}&sig=${this.sig(ctrId, rel, exp)}`;
  }

  /** True when `sig` is ours for exactly this container, path and expiry, and it has not passed. */
  verify(ctrId: string, rel: string, exp: string | undefined, sig: string | undefined): boolean {
    if (!exp || !sig || !/^\d{1,12}$/.test(exp) || !/^[0-9a-f]{64}$/.test(sig)) return false;
    const expSec = Number(exp);
    if (expSec * 1000 < this.now()) return false;
    return safeEqual(this.sig(ctrId, rel, expSec), sig);
  }
}
