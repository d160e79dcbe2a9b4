/** Task leases on SQLite (the cases: ./leases-cases.ts; on PostgreSQL: test/pg/leases.test.ts). */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { succeedReplica } from "../../src/replicas/predecessor.ts";
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

test("a data dir remembers its replica: the next one on it learns its predecessor's id", () => {
  const dir = tempDir();
  expect(succeedReplica(dir, "rep_01first")).toBeNull();
  expect(readFileSync(join(dir, "replica-id"), "utf8")).toBe("rep_01first\n");
  expect(statSync(join(dir, "replica-id")).mode & 0o777).toBe(0o600);
  expect(succeedReplica(dir, "rep_02second")).toBe("rep_01first");
  expect(succeedReplica(dir, "rep_03third")).toBe("rep_02second");
});
