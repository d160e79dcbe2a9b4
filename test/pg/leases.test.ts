/** Task leases on PostgreSQL (the cases: test/agents/leases-cases.ts, also run on SQLite). */
import { afterAll, beforeAll, describe } from "bun:test";
import { leaseCases } from "../agents/leases-cases.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";

describe.skipIf(!PG_SERVER)("task leases on PostgreSQL", () => {
  let pg: FreshPostgres;
  beforeAll(async () => {
    pg = await freshPostgres();
  });
  afterAll(async () => {
    await pg?.drop();
  });
  leaseCases(() => pg.db);
});
