/**
 * src/db/changes.ts: a memo of a watched table is dropped by every write that could change it —
 * this connection's (insert, update, delete, a cascaded delete, a write rolled back) and any other
 * connection's commit (another process's, here a second connection and a CLI-like `bun -e` child) —
 * and kept otherwise. Then through the API: a user disabled, and a profile renamed, behind the
 * server's back show on the very next request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { rmSync } from "node:fs";
import { TableChanges, TableMemo } from "../../src/db/changes.ts";
import { startTestApp, tempDir, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

/** The next turn of the event loop (TableChanges asks SQLite about other connections once per turn). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("TableChanges and TableMemo on a real SQLite file", () => {
  let dir: string;
  let file: string;
  let db: Database;
  let other: Database;
  let changes: TableChanges;
  let loads: number;
  let memo: TableMemo<{ name: string }>;
  const read = (id: string) => () => {
    loads++;
    const row = db.query("SELECT name FROM users WHERE id = ?").get(id) as { name: string } | null;
    return row ? { name: row.name } : undefined;
  };

  beforeAll(() => {
    dir = tempDir("runcell-changes-");
    file = join(dir, "t.db");
    db = new Database(file, { create: true });
    db.exec("PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON");
    db.exec("CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL)");
    db.exec("CREATE TABLE profiles (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE)");
    db.exec("CREATE TABLE unrelated (id INTEGER PRIMARY KEY, v TEXT)");
    db.exec("INSERT INTO users VALUES ('u1', 'Ada'), ('u2', 'Grace')");
    other = new Database(file);
    changes = new TableChanges(db);
    loads = 0;
    memo = new TableMemo(changes, ["users"]);
  });
  afterAll(() => {
    other.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The memo's value for u1 and whether it read the table to answer. */
  const get = (id = "u1") => {
    const before = loads;
    const v = memo.get(id, read(id));
    return { name: v?.name, loaded: loads > before };
  };

  test("kept while nothing changes; a missing row is not stored", () => {
    expect(get()).toEqual({ name: "Ada", loaded: true });
    expect(get()).toEqual({ name: "Ada", loaded: false });
    expect(get("nobody")).toEqual({ name: undefined, loaded: true });
    expect(get("nobody")).toEqual({ name: undefined, loaded: true });
  });

  test("values are frozen: callers share them", () => {
    const v = memo.get("u1", read("u1"))!;
    expect(Object.isFrozen(v)).toBe(true);
  });

  test("this connection's update, insert and delete drop it; a write to another table does not", () => {
    get();
    db.exec("INSERT INTO unrelated (v) VALUES ('x')");
    expect(get()).toEqual({ name: "Ada", loaded: false });
    db.exec("UPDATE users SET name = 'Ada L.' WHERE id = 'u1'");
    expect(get()).toEqual({ name: "Ada L.", loaded: true });
    db.exec("INSERT INTO users VALUES ('u3', 'Edsger')");
    expect(get()).toEqual({ name: "Ada L.", loaded: true });
    db.exec("DELETE FROM users WHERE id = 'u3'");
    expect(get("u3")).toEqual({ name: undefined, loaded: true });
  });

  test("a write rolled back drops it too (a needless reload, never a stale answer)", () => {
    get();
    expect(() =>
      db.transaction(() => {
        db.exec("UPDATE users SET name = 'temp' WHERE id = 'u1'");
        throw new Error("roll back");
      })(),
    ).toThrow("roll back");
    expect(get()).toEqual({ name: "Ada L.", loaded: true });
  });

  test("a cascaded delete counts for the child table", () => {
    const profiles = new TableMemo<{ n: number }>(changes, ["profiles"]);
    db.exec("INSERT INTO users VALUES ('u4', 'Barbara'); INSERT INTO profiles VALUES ('p1', 'u4')");
    const count = () => ({ n: (db.query("SELECT count(*) AS n FROM profiles").get() as { n: number }).n });
    expect(profiles.get("all", count)).toEqual({ n: 1 });
    db.exec("DELETE FROM users WHERE id = 'u4'");
    expect(profiles.get("all", count)).toEqual({ n: 0 });
  });

  test("another connection's commit drops it from the next turn of the event loop (data_version)", async () => {
    get();
    expect(get().loaded).toBe(false);
    other.exec("UPDATE users SET name = 'Ada King' WHERE id = 'u1'");
    await nextTurn();
    expect(get()).toEqual({ name: "Ada King", loaded: true });
    // Any table: another connection's commits are not told apart by table.
    other.exec("INSERT INTO unrelated (v) VALUES ('y')");
    await nextTurn();
    expect(get().loaded).toBe(true);
    expect(get().loaded).toBe(false);
  });

  test("SQLite is asked once per turn of the event loop: a commit elsewhere during a turn shows from the next; this connection's writes at once", async () => {
    await nextTurn();
    const first = changes.stamp(["users"]);
    other.exec("UPDATE users SET name = 'Ada (during the turn)' WHERE id = 'u1'");
    // Within the turn: the commit elsewhere is concurrent with what the turn serves, the first answer stands.
    expect(changes.stamp(["users"])).toBe(first);
    // This connection's own writes always count, within the turn too.
    db.exec("INSERT INTO unrelated (v) VALUES ('own')");
    expect(changes.stamp(["users"])).toBe(first);
    db.exec("UPDATE users SET name = name WHERE id = 'u2'");
    const own = changes.stamp(["users"]);
    expect(own).not.toBe(first);
    // The next turn sees the other connection's commit.
    await nextTurn();
    expect(changes.stamp(["users"])).not.toBe(own);
    expect(memo.get("u1", read("u1"))?.name).toBe("Ada (during the turn)");
    other.exec("UPDATE users SET name = 'Ada King' WHERE id = 'u1'");
    await nextTurn();
    expect(get()).toEqual({ name: "Ada King", loaded: true });
  });

  test("another process's commit drops it", async () => {
    get();
    const r = Bun.spawnSync(["bun", "-e", `const { Database } = require("bun:sqlite"); new Database(${JSON.stringify(file)}).exec("UPDATE users SET name = 'Countess' WHERE id = 'u1'")`]);
    expect(r.exitCode).toBe(0);
    await nextTurn();
    expect(get()).toEqual({ name: "Countess", loaded: true });
  });

  test("an asynchronous load: a miss answers with a promise, a hit without; a value read before a write seen meanwhile is not kept", async () => {
    const m = new TableMemo<{ name: string }>(changes, ["users"]);
    const load = (id: string) => async () => read(id)();
    const miss = m.get("u2", load("u2"));
    expect(miss).toBeInstanceOf(Promise);
    expect((await miss)?.name).toBe("Grace");
    expect(m.get("u2", load("u2"))).toEqual({ name: "Grace" });
    // u1 is read, then a write is seen by another lookup before that read settles.
    const pending = m.get("u1", load("u1"));
    db.exec("UPDATE users SET name = name WHERE id = 'u2'");
    expect(m.get("u2", load("u2"))).toBeInstanceOf(Promise);
    await pending;
    expect(m.get("u1", load("u1"))).toBeInstanceOf(Promise);
  });

  test("bounded: the oldest entry goes first", () => {
    const small = new TableMemo<{ id: string }>(changes, ["users"], 2);
    let made = 0;
    const make = (id: string) => () => {
      made++;
      return { id };
    };
    for (const id of ["a", "b", "c"]) small.get(id, make(id));
    expect(made).toBe(3);
    small.get("c", make("c"));
    small.get("b", make("b"));
    expect(made).toBe(3);
    small.get("a", make("a"));
    expect(made).toBe(4);
  });
});

describe("through the API: changes made behind the server's back", () => {
  let t: TestApp;
  let alice: TestUser;
  let other: Database;

  beforeAll(async () => {
    t = await startTestApp();
    alice = await createUser(t);
    other = new Database(join(t.dataDir, "runcell.db"));
    other.exec("PRAGMA busy_timeout = 5000");
  });
  afterAll(async () => {
    other.close();
    await t.stop();
  });

  test("a user disabled by another process is refused on the very next request", async () => {
    const auth = { authorization: `Bearer ${alice.token}` };
    expect((await api(t, "GET", "/v1/profiles", auth)).status).toBe(200);
    expect((await api(t, "GET", "/v1/profiles", auth)).status).toBe(200);
    other.query("UPDATE users SET disabled = 1 WHERE id = ?").run(alice.id);
    const r = await api(t, "GET", "/v1/profiles", auth);
    expect(r.status).toBe(401);
    other.query("UPDATE users SET disabled = 0 WHERE id = ?").run(alice.id);
    expect((await api(t, "GET", "/v1/profiles", auth)).status).toBe(200);
  });

  test("the profile list shows a profile added, renamed and deleted elsewhere on the very next request", async () => {
    const auth = { authorization: `Bearer ${alice.token}` };
    const made = await api(t, "POST", "/v1/profiles", auth, { name: "first" });
    expect(made.status).toBe(201);
    const names = async () => (await api(t, "GET", "/v1/profiles", auth)).body.data.map((p: { name: string }) => p.name);
    expect(await names()).toEqual(["first"]);
    expect(await names()).toEqual(["first"]);
    other.query("UPDATE profiles SET name = 'renamed', updated_at = updated_at + 1 WHERE id = ?").run(made.body.id);
    expect(await names()).toEqual(["renamed"]);
    // Through the server itself (its own connection): shown at once as well.
    const second = await api(t, "POST", "/v1/profiles", auth, { name: "second" });
    expect(await names()).toEqual(["second", "renamed"]);
    other.query("DELETE FROM profiles WHERE id = ?").run(second.body.id);
    expect(await names()).toEqual(["renamed"]);
  });

  test("a user's row (policy checks, role) shows a change made elsewhere on the next turn, and the server's own at once", async () => {
    const users = t.app.services.users;
    expect((await users.byId(alice.id))?.role).toBe("user");
    expect((await users.byId(alice.id))?.role).toBe("user");
    other.query("UPDATE users SET role = 'admin' WHERE id = ?").run(alice.id);
    await nextTurn();
    expect((await users.byId(alice.id))?.role).toBe("admin");
    await users.update(alice.id, { role: "user" });
    expect((await users.byId(alice.id))?.role).toBe("user");
    expect(Object.isFrozen(await users.byId(alice.id))).toBe(true);
  });
});
