/** Typed access to the `settings` table (run-time settings the operator changes). */
import { eq } from "drizzle-orm";
import type { DB } from "./client.ts";
import { settings } from "./schema.ts";

export class Settings {
  constructor(private db: DB) {}

  get<T>(key: string): T | undefined {
    const row = this.db.select({ value: settings.value }).from(settings).where(eq(settings.key, key)).get();
    return row?.value as T | undefined;
  }

  set(key: string, value: unknown) {
    this.db
      .insert(settings)
      .values({ key, value, updated_at: Date.now() })
      .onConflictDoUpdate({ target: settings.key, set: { value, updated_at: Date.now() } })
      .run();
  }

  delete(key: string) {
    this.db.delete(settings).where(eq(settings.key, key)).run();
  }
}
