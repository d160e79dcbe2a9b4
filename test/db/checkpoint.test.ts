/**
 * WAL checkpoints run in a worker thread while the server serves (src/db/checkpoint.ts): SQLite's
 * automatic checkpoint is off, and the WAL still does not grow without bound.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../src/db/data-dir.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.stop();
});

const walBytes = () => statSync(join(t.dataDir, `${DB_FILE}-wal`)).size;

test("the automatic checkpoint is off while the worker checkpoints; the WAL is reused instead of growing", async () => {
  const sqlite = t.app.services.sqlite;
  expect(sqlite!.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint).toBe(0);
  sqlite!.exec("CREATE TABLE bulk (b BLOB)");
  const write = (mb: number) => sqlite!.transaction(() => {
    for (let i = 0; i < mb * 16; i++) sqlite!.query("INSERT INTO bulk VALUES (?)").run(crypto.getRandomValues(new Uint8Array(64 * 1024)));
  })();
  write(6);
  const grown = walBytes();
  expect(grown).toBeGreaterThan(6 * 1024 * 1024);
  // The worker checkpoints what was written (PASSIVE: no reader holds the WAL here)…
  await Bun.sleep(2500);
  // …so the next writes start the WAL over instead of appending: it stays near its size.
  write(6);
  expect(walBytes()).toBeLessThan(grown + 2 * 1024 * 1024);
});
