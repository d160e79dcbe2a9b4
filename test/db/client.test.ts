/** openDatabase (src/db/client.ts): the database and its -wal/-shm are the owner's alone, whatever the umask. */
import { expect, test } from "bun:test";
import { chmodSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client.ts";
import { tempDir } from "../helpers/app.ts";

const modeOf = (f: string) => statSync(f).mode & 0o777;

test("a new database, its -wal and -shm are 0600 under a umask of 022; an existing 0644 one is made 0600", () => {
  const before = process.umask(0o022);
  try {
    const path = join(tempDir(), "runcell.db");
    const h = openDatabase(path);
    h.sqlite.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
    for (const f of [path, `${path}-wal`, `${path}-shm`]) expect(modeOf(f)).toBe(0o600);
    h.close();
    chmodSync(path, 0o644);
    openDatabase(path).close();
    expect(modeOf(path)).toBe(0o600);
  } finally {
    process.umask(before);
  }
});
