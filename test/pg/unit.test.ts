/**
 * Units of work (src/db/unit.ts) on PostgreSQL: one transaction per unit, composed units share
 * it, a throw rolls every statement back, and `run` counts changed rows — the same contract
 * test/db/unit.test.ts checks on SQLite.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, inArray } from "drizzle-orm";
import { first as firstRow } from "../../src/db/client.ts";
import { dialect, settings } from "../../src/db/tables.ts";
import { all, first, isPostgres, run, transact, type Unit } from "../../src/db/unit.ts";
import type { DB } from "../../src/db/client.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";

describe.skipIf(!PG_SERVER)("units of work on PostgreSQL", () => {
  let pg: FreshPostgres;
  beforeAll(async () => {
    pg = await freshPostgres();
  });
  afterAll(async () => {
    await pg?.drop();
  });

  function* put(tx: DB, key: string, value: unknown): Unit<number> {
    return yield* run(tx.insert(settings).values({ key, value, updated_at: 1 }).onConflictDoUpdate({ target: settings.key, set: { value, updated_at: 2 } }));
  }
  function* read(tx: DB, key: string): Unit<unknown> {
    return (yield* first(tx.select().from(settings).where(eq(settings.key, key))))?.value;
  }

  test("the process serves PostgreSQL: its tables and dialect", () => {
    expect(dialect()).toBe("postgres");
    expect(isPostgres(pg.db)).toBe(true);
  });

  test("a unit commits all its statements; composed units share its transaction; jsonb comes back parsed", async () => {
    const out = await transact(pg.db, function* (tx) {
      const a = yield* put(tx, "a", { n: 1 });
      const b = yield* put(tx, "b", [1, 2]);
      const seen = yield* read(tx, "a");
      const rows = yield* all(tx.select().from(settings).where(inArray(settings.key, ["a", "b"])));
      return { a, b, seen, count: rows.length };
    });
    expect(out).toEqual({ a: 1, b: 1, seen: { n: 1 }, count: 2 });
    expect((await firstRow(pg.db.select().from(settings).where(eq(settings.key, "b"))))?.value).toEqual([1, 2]);
  });

  test("a throw rolls every statement of the unit back", async () => {
    const attempt = transact(pg.db, function* (tx) {
      yield* put(tx, "c", 1);
      yield* put(tx, "a", { n: 2 });
      throw new Error("no");
    });
    await expect(attempt).rejects.toThrow("no");
    expect(await firstRow(pg.db.select().from(settings).where(eq(settings.key, "c")))).toBeUndefined();
    expect((await firstRow(pg.db.select().from(settings).where(eq(settings.key, "a"))))?.value).toEqual({ n: 1 });
  });

  test("run counts the rows changed", async () => {
    const n = await transact(pg.db, function* (tx) {
      return yield* run(tx.update(settings).set({ updated_at: 9 }).where(inArray(settings.key, ["a", "b", "c", "d"])));
    });
    expect(n).toBe(2);
  });
});
