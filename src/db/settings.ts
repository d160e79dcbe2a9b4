/** Typed access to the `settings` table (run-time settings the operator changes). */
import { eq } from "drizzle-orm";
import { randomBytes } from "../lib/crypto.ts";
import type { Sealer } from "../lib/sealer.ts";
import { type DB, first } from "./client.ts";
import { settings } from "./tables.ts";

export class Settings {
  constructor(private db: DB) {}

  async get<T>(key: string): Promise<T | undefined> {
    const row = await first(this.db.select({ value: settings.value }).from(settings).where(eq(settings.key, key)));
    return row?.value as T | undefined;
  }

  async set(key: string, value: unknown): Promise<void> {
    const updated_at = Date.now();
    await this.db
      .insert(settings)
      .values({ key, value, updated_at })
      .onConflictDoUpdate({ target: settings.key, set: { value, updated_at } });
  }

  async delete(key: string): Promise<void> {
    await this.db.delete(settings).where(eq(settings.key, key));
  }

  /**
   * A 32-byte key made at first use and kept under `key`, sealed with the data dir's key (its AAD
   * names the setting): a copy of the database alone does not hold it, and deleting the setting
   * replaces it (revoking whatever it signed). One sealed under another key (a restored
   * database) is replaced too.
   */
  async sealedKey(key: string, sealer: Sealer): Promise<Uint8Array> {
    const aad = "settings:" + key;
    const open = async (): Promise<Uint8Array | null> => {
      const stored = await this.get<{ sealed: string }>(key);
      if (!stored?.sealed) return null;
      try {
        return Buffer.from(sealer.open(Buffer.from(stored.sealed, "base64"), aad), "hex");
      } catch {
        return null;
      }
    };
    const found = await open();
    if (found) return found;
    const sealed = { sealed: sealer.seal(Buffer.from(randomBytes(32)).toString("hex"), aad).toString("base64") };
    // Servers starting at once on one database (replicas) keep the first key written, not each its own.
    const inserted = await this.db.insert(settings).values({ key, value: sealed, updated_at: Date.now() }).onConflictDoNothing().returning({ key: settings.key });
    if (!inserted.length) {
      const theirs = await open();
      if (theirs) return theirs;
      // One sealed under another data-dir key (a restored database): replaced.
      await this.set(key, sealed);
    }
    return Buffer.from(sealer.open(Buffer.from(sealed.sealed, "base64"), aad), "hex");
  }
}
