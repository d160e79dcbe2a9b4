import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import journal from "../../migrations/meta/_journal.json";
import { openDatabase } from "../../src/db/client.ts";
import { migrate, migrationStatus, NewerDatabaseError } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { tempDir } from "../helpers/app.ts";

const fresh = () => openDatabase(join(tempDir(), "runcell.db"));
const tables = (h: ReturnType<typeof fresh>) =>
  h.sqlite.query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").all().map((r) => r.name);

describe("migrations", () => {
  test("the embedded list matches drizzle-kit's journal", () => {
    expect(MIGRATIONS.map((m) => m.tag)).toEqual(journal.entries.map((e) => e.tag));
    for (const m of MIGRATIONS) expect(m.sql.length).toBeGreaterThan(0);
  });

  test("pragmas", () => {
    const h = fresh();
    expect(h.sqlite.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(h.sqlite.query("PRAGMA synchronous").get()).toEqual({ synchronous: 1 });
    expect(h.sqlite.query("PRAGMA foreign_keys").get()).toEqual({ foreign_keys: 1 });
    expect(h.sqlite.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 5000 });
    h.close();
  });

  test("an empty database gets every migration, recorded, in one go", () => {
    const h = fresh();
    expect(migrate(h.sqlite).applied).toEqual(MIGRATIONS.map((m) => m.tag));
    expect(tables(h)).toContain("users");
    expect(tables(h)).toContain("notification_log");
    const recorded = h.sqlite.query<{ tag: string; hash: string }, []>("SELECT tag, hash FROM _migrations ORDER BY id").all();
    expect(recorded.map((r) => r.tag)).toEqual(MIGRATIONS.map((m) => m.tag));
    expect(recorded[0]!.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(h.sqlite.query("PRAGMA user_version").get()).toEqual({ user_version: MIGRATIONS.length });
    expect(migrate(h.sqlite).applied).toEqual([]);
    h.close();
  });

  test("an existing database keeps its data and gets only the new migrations", () => {
    const h = fresh();
    const first = [{ tag: "0000_a", sql: "CREATE TABLE a (x INTEGER);" }];
    const both = [...first, { tag: "0001_b", sql: "ALTER TABLE a ADD COLUMN y TEXT;--> statement-breakpoint\nCREATE TABLE b (z INTEGER);" }];
    migrate(h.sqlite, first);
    h.sqlite.exec("INSERT INTO a (x) VALUES (42)");
    expect(migrationStatus(h.sqlite, both).pending.map((m) => m.tag)).toEqual(["0001_b"]);
    expect(migrate(h.sqlite, both).applied).toEqual(["0001_b"]);
    expect(h.sqlite.query("SELECT x, y FROM a").all()).toEqual([{ x: 42, y: null }]);
    h.close();
  });

  test("a failing migration leaves nothing behind", () => {
    const h = fresh();
    const bad = [
      { tag: "0000_a", sql: "CREATE TABLE a (x INTEGER);" },
      { tag: "0001_bad", sql: "CREATE TABLE c (x INTEGER);--> statement-breakpoint\nTHIS IS NOT SQL;" },
    ];
    expect(() => migrate(h.sqlite, bad)).toThrow();
    expect(tables(h)).toEqual([]);
    h.close();
  });

  test("a database written by a newer version is refused, untouched", () => {
    const h = fresh();
    migrate(h.sqlite, [...MIGRATIONS, { tag: "9999_future", sql: "CREATE TABLE future (x INTEGER);" }]);
    const before = tables(h);
    expect(() => migrate(h.sqlite)).toThrow(NewerDatabaseError);
    expect(() => migrate(h.sqlite)).toThrow(/newer runcell.*9999_future/);
    expect(tables(h)).toEqual(before);
    h.close();
  });
});
