/**
 * Signed workspace-file URLs: `{public_url}/files/<ctr_id>/<path>?exp=<unix>&sig=<hex>`, where
 * sig = HMAC-SHA256(key, "<ctr_id>\n<path>\n<exp>") and <path> is relative to /workspace. They
 * work without a credential until `exp`, so `<img>` tags and chat surfaces can show them. The key
 * is 32 random bytes made at first start and kept in `settings`, sealed with the data dir's key
 * (src/lib/sealer.ts): a copy of the database alone cannot mint URLs, and deleting the setting
 * revokes every URL ever issued.
 */
import { hmacSha256Hex, randomBytes, safeEqual } from "../lib/crypto.ts";
import type { Sealer } from "../lib/sealer.ts";
import type { Settings } from "../db/settings.ts";

export const SIGNING_KEY_SETTING = "workspaces.file_url_key";
export const SIGNING_KEY_AAD = "settings:" + SIGNING_KEY_SETTING;
const AAD = SIGNING_KEY_AAD;

export async function loadSigningKey(settings: Settings, sealer: Sealer): Promise<Uint8Array> {
  const stored = await settings.get<{ sealed: string }>(SIGNING_KEY_SETTING);
  if (stored?.sealed) {
    try {
      return Buffer.from(sealer.open(Buffer.from(stored.sealed, "base64"), AAD), "hex");
    } catch {
      // Sealed under another data-dir key (restored database): make a new one below.
    }
  }
  const key = randomBytes(32);
  await settings.set(SIGNING_KEY_SETTING, { sealed: sealer.seal(Buffer.from(key).toString("hex"), AAD).toString("base64") });
  return key;
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
