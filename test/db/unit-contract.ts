/**
 * The contract of units of work (src/db/unit.ts), the same on both databases: one transaction per
 * unit, composed units share it, a throw rolls every statement back, `run` counts changed rows.
 * test/db/unit.test.ts runs it on SQLite, test/pg/unit.test.ts on PostgreSQL.
 */
import { expect, test } from "bun:test";
import { eq, inArray } from "drizzle-orm";
import { type DB, first as firstRow } from "../../src/db/client.ts";
import { settings } from "../../src/db/tables.ts";
import { all, first, run, transact, type Unit } from "../../src/db/unit.ts";

export function* put(tx: DB, key: string, value: unknown): Unit<number> {
  return yield* run(tx.insert(settings).values({ key, value, updated_at: 1 }).onConflictDoUpdate({ target: settings.key, set: { value, updated_at: 2 } }));
}

function* read(tx: DB, key: string): Unit<unknown> {
  return (yield* first(tx.select().from(settings).where(eq(settings.key, key))))?.value;
}

const stored = async (db: DB, key: string) => (await firstRow(db.select().from(settings).where(eq(settings.key, key))))?.value;

/** Registers the contract's tests; `db()` is the database under test (ready by the time they run). */
export function unitContract(db: () => DB) {
  test("a unit commits all its statements; composed units share its transaction; JSON comes back as written", async () => {
    const out = await transact(db(), function* (tx) {
      const a = yield* put(tx, "a", { n: 1 });
      const b = yield* put(tx, "b", [1, 2]);
      const seen = yield* read(tx, "a");
      const rows = yield* all(tx.select().from(settings).where(inArray(settings.key, ["a", "b"])));
      return { a, b, seen, count: rows.length };
    });
    expect(out).toEqual({ a: 1, b: 1, seen: { n: 1 }, count: 2 });
    expect(await stored(db(), "b")).toEqual([1, 2]);
  });

  test("a throw rolls every statement of the unit back", async () => {
    const attempt = transact(db(), function* (tx) {
      yield* put(tx, "c", 1);
      yield* put(tx, "a", { n: 2 });
      throw new Error("no");
    });
    await expect(attempt).rejects.toThrow("no");
    expect(await stored(db(), "c")).toBeUndefined();
    expect(await stored(db(), "a")).toEqual({ n: 1 });
  });

  test("run counts the rows changed", async () => {
    await transact(db(), (tx) => put(tx, "d", true));
    const n = await transact(db(), function* (tx) {
      return yield* run(tx.update(settings).set({ updated_at: 9 }).where(inArray(settings.key, ["a", "b", "c", "d"])));
    });
    expect(n).toBe(3); // a, b, d
  });
}
