/**
 * openPostgres before it connects: a URL option's value the driver refuses (sslmode=bogus) is a
 * DatabaseUnavailableError naming the host without the password, like an unreachable database —
 * not the driver's TypeError. config.ts refuses such a URL first for the CLI (test/cli/main.test.ts).
 */
import { expect, test } from "bun:test";
import { DatabaseUnavailableError, openPostgres } from "../../src/db/pg/client.ts";

test("a URL option's value the driver refuses: DatabaseUnavailableError, password masked", async () => {
  const e = await openPostgres("postgres://u:pw-never-shown@127.0.0.1:1/db?sslmode=bogus").catch((err) => err);
  expect(e).toBeInstanceOf(DatabaseUnavailableError);
  expect(e.message).toStartWith("PostgreSQL at postgres://u:***@127.0.0.1:1/db?sslmode=bogus: ");
  expect(e.message).toContain("sslmode");
  expect(e.message).not.toContain("pw-never-shown");
});
