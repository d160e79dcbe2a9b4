/**
 * Units of work (src/db/unit.ts) on PostgreSQL: the contract both databases share
 * (test/db/unit-contract.ts), on a fresh database of the PostgreSQL pass.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { dialect } from "../../src/db/tables.ts";
import { isPostgres } from "../../src/db/unit.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";
import { unitContract } from "../db/unit-contract.ts";

describe.skipIf(!PG_SERVER)("units of work on PostgreSQL", () => {
  let pg: FreshPostgres;
  beforeAll(async () => {
    pg = await freshPostgres();
  });
  afterAll(async () => {
    await pg?.drop();
  });

  test("the process serves PostgreSQL: its tables and dialect", () => {
    expect(dialect()).toBe("postgres");
    expect(isPostgres(pg.db)).toBe(true);
  });

  unitContract(() => pg.db);
});
