/**
 * The replica registry on a real SQLite file: a data dir keeps its replica id across restarts (a
 * restarted replica is the same replica), a crash's left-over row is taken over, the live count
 * follows heartbeats, a clean stop leaves the row registered but not live, and a long-gone
 * replica is forgotten.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { loadReplicaId, REPLICA_ID_FILE, ReplicaIdInUseError, Replicas } from "../../src/replicas/registry.ts";
import { tempDir } from "../helpers/app.ts";

function db() {
  const h = openDatabase(join(tempDir(), "db.sqlite"));
  migrate(h.sqlite);
  return h;
}

describe("replica ids", () => {
  test("made once per data dir, then kept; an unreadable file is replaced", () => {
    const dir = tempDir();
    const id = loadReplicaId(dir);
    expect(id).toMatch(/^rep_[0-9a-z]{26}$/);
    expect(readFileSync(join(dir, REPLICA_ID_FILE), "utf8").trim()).toBe(id);
    expect(loadReplicaId(dir)).toBe(id);
    writeFileSync(join(dir, REPLICA_ID_FILE), "garbage\n");
    const fresh = loadReplicaId(dir);
    expect(fresh).not.toBe(id);
    expect(fresh).toMatch(/^rep_/);
  });
});

describe("the registry", () => {
  test("register, a restart with the same id after a crash (row left behind), heartbeats, live count, leave", async () => {
    const h = db();
    let clock = 1_000_000;
    const now = () => clock;
    const a = new Replicas(h.db, now, 3000, "test", "rep_00000000000000000000000000");
    const b = new Replicas(h.db, now, 3000, "test", "rep_11111111111111111111111111");
    await a.register();
    await b.register();
    expect(a.liveCount()).toBe(1); // counted before b registered
    await a.heartbeat();
    expect(a.liveCount()).toBe(2);
    // a crashes (its row stays) and starts again with the same id: the row is taken over.
    const again = new Replicas(h.db, now, 3000, "test", a.id);
    await again.register();
    expect((await again.list()).map((r) => r.id).sort()).toEqual([a.id, b.id]);
    // b stops renewing: after a lease it no longer counts.
    clock += 3001;
    await again.heartbeat();
    expect(again.liveCount()).toBe(1);
    expect((await again.list()).find((r) => r.id === b.id)?.live).toBe(false);
    // A clean stop: still registered (its pool members wait for it), no longer live.
    await again.leave();
    await b.heartbeat();
    expect(b.liveCount()).toBe(1);
    expect((await b.list()).find((r) => r.id === a.id)).toMatchObject({ live: false });
    // Gone for 20 leases: forgotten at the next heartbeat.
    clock += 20 * 3000 + 1;
    await b.heartbeat();
    expect((await b.list()).map((r) => r.id)).toEqual([b.id]);
    h.close();
  });
});

describe("a copied data dir", () => {
  test("the same id live on another machine is refused at start; gone (not seen for a lease), it is taken over", async () => {
    const h = db();
    let clock = 5_000_000;
    const now = () => clock;
    const original = new Replicas(h.db, now, 3000, "test", "rep_22222222222222222222222222");
    await original.register();
    const copy = new Replicas(h.db, now, 3000, "test", original.id);
    (copy as unknown as { hostname: string }).hostname = "another-machine";
    await expect(copy.register()).rejects.toBeInstanceOf(ReplicaIdInUseError);
    await expect(copy.register()).rejects.toThrow(/in use by a running server on .*copied/);
    clock += 3001;
    await copy.register();
    expect((await copy.list()).map((r) => r.hostname)).toEqual(["another-machine"]);
    h.close();
  });
});
