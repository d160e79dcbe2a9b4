/** Typed access to the `settings` table (run-time settings the operator changes). */
import { eq } from "drizzle-orm";
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
}
