/** Task leases on SQLite (the cases: ./leases-cases.ts; on PostgreSQL: test/pg/leases.test.ts). */
import { afterAll, beforeAll } from "bun:test";
import { join } from "node:path";
import { type DatabaseHandle, openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { tempDir } from "../helpers/app.ts";
import { leaseCases } from "./leases-cases.ts";

let h: DatabaseHandle;
beforeAll(() => {
  h = openDatabase(join(tempDir(), "db.sqlite"));
  migrate(h.sqlite);
});
afterAll(() => h.close());

leaseCases(() => h.db);
