/**
 * Units of work (src/db/unit.ts) on SQLite: one synchronous transaction per unit (nothing else
 * runs in between), composed units share it, a throw rolls every statement back, and `run`
 * counts changed rows. test/pg/unit.test.ts checks the same contract on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { eq, inArray } from "drizzle-orm";
import { type DatabaseHandle, first as firstRow, openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { settings } from "../../src/db/tables.ts";
import { all, first, isPostgres, run, transact, type Unit } from "../../src/db/unit.ts";
import type { DB } from "../../src/db/client.ts";
import { tempDir } from "../helpers/app.ts";

describe("units of work on SQLite", () => {
  let h: DatabaseHandle;
  beforeAll(() => {
    h = openDatabase(join(tempDir(), "db.sqlite"));
    migrate(h.sqlite);
  });
  afterAll(() => h.close());

  function* put(tx: DB, key: string, value: unknown): Unit<number> {
    return yield* run(tx.insert(settings).values({ key, value, updated_at: 1 }).onConflictDoUpdate({ target: settings.key, set: { value, updated_at: 2 } }));
  }
  function* read(tx: DB, key: string): Unit<unknown> {
    return (yield* first(tx.select().from(settings).where(eq(settings.key, key))))?.value;
  }

  test("not PostgreSQL", () => expect(isPostgres(h.db)).toBe(false));

  test("a unit commits all its statements; composed units share its transaction", async () => {
    const out = await transact(h.db, function* (tx) {
      const a = yield* put(tx, "a", { n: 1 });
      const b = yield* put(tx, "b", [1, 2]);
      const seen = yield* read(tx, "a");
      const rows = yield* all(tx.select().from(settings).where(inArray(settings.key, ["a", "b"])));
      return { a, b, seen, count: rows.length };
    });
    expect(out).toEqual({ a: 1, b: 1, seen: { n: 1 }, count: 2 });
  });

  test("a throw rolls every statement of the unit back", async () => {
    const attempt = transact(h.db, function* (tx) {
      yield* put(tx, "c", 1);
      yield* put(tx, "a", { n: 2 });
      throw new Error("no");
    });
    await expect(attempt).rejects.toThrow("no");
    expect(await firstRow(h.db.select().from(settings).where(eq(settings.key, "c")))).toBeUndefined();
    expect((await firstRow(h.db.select().from(settings).where(eq(settings.key, "a"))))?.value).toEqual({ n: 1 });
  });

  test("the whole unit runs before anything else does (one synchronous transaction)", async () => {
    const order: string[] = [];
    const unit = transact(h.db, function* (tx) {
      order.push("unit start");
      yield* put(tx, "d", 1);
      order.push("unit end");
      return 1;
    });
    order.push("after transact returned");
    await unit;
    expect(order).toEqual(["unit start", "unit end", "after transact returned"]);
  });

  test("run counts the rows changed", async () => {
    expect(await transact(h.db, function* (tx) {
      return yield* run(tx.update(settings).set({ updated_at: 9 }).where(inArray(settings.key, ["a", "b", "c", "d"])));
    })).toBe(3); // a, b, d
  });
});
