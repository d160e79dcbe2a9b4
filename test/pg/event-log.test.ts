/**
 * The PostgreSQL event log's live delivery, in one process. A session's tail (what hands stored
 * frames to this process's subscribers) starts from a MAX(seq) read; batches stored while that
 * read is on its way back must still reach the subscribers once, in order. A tail made only after
 * the read came back skipped them, then re-read and re-sent them with the next batch — to a
 * subscriber that had already replayed them and gone live: duplicates, seq going backwards.
 *
 * Each cycle: a subscriber attaches (replay from the start, then live) while a burst is stored,
 * the tail's starting read answered slowly; the session pauses (a tool call) long enough for the
 * replay to end; the next burst comes; the subscriber leaves (the tail goes with it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Hub } from "../../src/events/hub.ts";
import { PgEventLog } from "../../src/events/pg-log.ts";
import { LocalBus } from "../../src/replicas/bus.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";

describe.skipIf(!PG_SERVER)("the PostgreSQL event log's tails", () => {
  let pg: FreshPostgres;
  beforeAll(async () => {
    pg = await freshPostgres();
    await pg.sql`INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_1', 'a@b.c', 'a', 'user', false, false, 0, 0)`;
    await pg.sql`INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES ('sess_a', 'usr_1', 'prof_1', 0, 0)`;
  });
  afterAll(async () => {
    await pg?.drop();
  });

  test("frames stored while a tail's starting read is on its way back reach a replaying subscriber once, in order", async () => {
    const log = new PgEventLog(pg.db, Date.now, new LocalBus(), { flushDelayMs: 1 });
    // A slow answer to the tail's starting read (a busy database).
    const slow = log as unknown as { maxSeq(id: string): Promise<number> };
    const maxSeq = slow.maxSeq.bind(log);
    slow.maxSeq = async (id) => {
      const v = await maxSeq(id);
      await Bun.sleep(20);
      return v;
    };
    const hub = new Hub(log);
    let n = 0;
    const burst = async () => {
      for (let i = 0; i < 10; i++) hub.publish("sess_a", { type: "task:token", task_id: "task_1", text: `t${n++}` } as never);
      await log.flush();
    };
    for (let cycle = 0; cycle < 8; cycle++) {
      const seqs: number[] = [];
      const attached = (async () => {
        const r = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (json) => void seqs.push(JSON.parse(json).seq), replayAfter: 0 });
        for (let rows = r.replay; rows.length; rows = await r.cursor!.next()) for (const row of rows) seqs.push(row.seq!);
        r.subscription.goLive(r.cursor!.lastSeq);
        return r.subscription;
      })();
      // Stored while the tail's starting read is on its way back.
      await Bun.sleep(2);
      await burst();
      const sub = await attached;
      await Bun.sleep(60);
      await burst();
      await Bun.sleep(60);
      expect(seqs).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      sub.close();
    }
  }, 60_000);
});
