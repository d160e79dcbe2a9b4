/**
 * Units of work (src/db/unit.ts) on SQLite: the contract both databases share
 * (./unit-contract.ts), and what only SQLite gives — the unit runs as one synchronous transaction,
 * so nothing else runs in between.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { type DatabaseHandle, openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { isPostgres, transact } from "../../src/db/unit.ts";
import { tempDir } from "../helpers/app.ts";
import { put, unitContract } from "./unit-contract.ts";

describe("units of work on SQLite", () => {
  let h: DatabaseHandle;
  beforeAll(() => {
    h = openDatabase(join(tempDir(), "db.sqlite"));
    migrate(h.sqlite);
  });
  afterAll(() => h.close());

  test("not PostgreSQL", () => expect(isPostgres(h.db)).toBe(false));

  unitContract(() => h.db);

  test("the whole unit runs before anything else does (one synchronous transaction)", async () => {
    const order: string[] = [];
    const unit = transact(h.db, function* (tx) {
      order.push("unit start");
      yield* put(tx, "e", 1);
      order.push("unit end");
      return 1;
    });
    order.push("after transact returned");
    await unit;
    expect(order).toEqual(["unit start", "unit end", "after transact returned"]);
  });
});
