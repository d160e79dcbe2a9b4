import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { type DatabaseHandle, openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { Hub } from "../../src/events/hub.ts";
import { EventLog } from "../../src/events/log.ts";
import { tempDir } from "../helpers/app.ts";

let h: DatabaseHandle;
let log: EventLog;
let hub: Hub;

function session(id: string) {
  h.sqlite.run("INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_1','a@b.c','a','user',0,0,0,0) ON CONFLICT DO NOTHING");
  h.sqlite.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, 'usr_1', 'prof_1', 0, 0)", [id]);
}

beforeEach(() => {
  h = openDatabase(join(tempDir(), "db.sqlite"));
  migrate(h.sqlite);
  log = new EventLog(h.sqlite, Date.now);
  hub = new Hub(log);
  session("sess_a");
  session("sess_b");
});
afterEach(() => h.close());

describe("event log", () => {
  test("gap-free per-session seq, stored as the exact frame sent", () => {
    const a1 = log.append("sess_a", { type: "task:token", task_id: "task_1", text: "hi" });
    const b1 = log.append("sess_b", { type: "task:token", task_id: "t", text: "x" });
    const a2 = log.append("sess_a", { type: "turn.done", task_id: "task_1", result_text: "hi", input_tokens: 1, output_tokens: 1, cost_usd: 0 });
    expect([a1.seq, a2.seq, b1.seq]).toEqual([1, 2, 1]);
    expect(JSON.parse(a1.json)).toEqual({ type: "task:token", session_id: "sess_a", task_id: "task_1", seq: 1, text: "hi" });
    const rows = log.read("sess_a");
    expect(rows.map((r) => r.frame)).toEqual([a1.json, a2.json]);
  });

  test("batches writes and continues the sequence after a restart", async () => {
    for (let i = 0; i < 1000; i++) log.append("sess_a", { type: "task:token", task_id: "t", text: String(i) });
    expect(h.sqlite.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 512 });
    await Bun.sleep(20);
    expect(h.sqlite.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 1000 });
    const fresh = new EventLog(h.sqlite, Date.now);
    expect(fresh.append("sess_a", { type: "task:token", task_id: "t", text: "next" }).seq).toBe(1001);
  });

  test("a batch is written once its JSON reaches the size bound, however few frames it has", () => {
    const big = "x".repeat(300 * 1024);
    for (let i = 0; i < 3; i++) log.append("sess_a", { type: "task:token", task_id: "t", text: big });
    expect(h.sqlite.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 0 });
    log.append("sess_a", { type: "task:token", task_id: "t", text: big }); // past 1 MiB of JSON
    expect(h.sqlite.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 4 });
    log.append("sess_a", { type: "task:token", task_id: "t", text: "small" });
    expect(h.sqlite.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 4 });
  });

  test("a frame for a deleted session does not lose the rest of its batch", () => {
    const dropped: number[] = [];
    log.onDropped = (f) => dropped.push(f.seq);
    log.append("sess_a", { type: "task:token", task_id: "t", text: "x" });
    log.append("sess_b", { type: "task:token", task_id: "t", text: "x" });
    h.sqlite.run("DELETE FROM sessions WHERE id = 'sess_b'");
    log.flush();
    expect(dropped).toEqual([1]);
    expect(log.read("sess_a")).toHaveLength(1);
  });
});

describe("hub", () => {
  test("fan-out to every subscriber of the session, once-serialized; system prompt to admins only", async () => {
    const got: Record<string, string[]> = { u1: [], u2: [], admin: [], other: [] };
    hub.live({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (j) => void got.u1!.push(j) });
    hub.live({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (j) => void got.u2!.push(j) });
    hub.live({ sessionId: "sess_a", userId: "usr_1", isAdmin: true, sink: (j) => void got.admin!.push(j) });
    hub.live({ sessionId: "sess_b", userId: "usr_1", isAdmin: true, sink: (j) => void got.other!.push(j) });
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "a" });
    hub.publish("sess_a", { type: "task:system_prompt", task_id: "t", system_prompt: "secret sauce", model: "demo", provider: "demo", tools: [] });
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "b" });
    expect(got.u1).toHaveLength(2);
    expect(got.u1).toEqual(got.u2!);
    expect(got.admin).toHaveLength(3);
    expect(got.other).toHaveLength(0);
    expect(got.u1![0]).toBe(got.admin![0]!);
    // The system prompt is numbered like every frame (API.md: every session frame carries seq):
    // users who may not see it see a gap there (a gap is allowed, a reuse never).
    expect(got.u1!.map((j) => JSON.parse(j).seq)).toEqual([1, 3]);
    expect(got.admin!.map((j) => JSON.parse(j).seq)).toEqual([1, 2, 3]);
    expect(JSON.parse(got.admin![1]!)).toEqual({ type: "task:system_prompt", session_id: "sess_a", task_id: "t", seq: 2, system_prompt: "secret sauce", model: "demo", provider: "demo", tools: [] });
    // Replays: in its place for admins, left out for the others.
    const admin = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: true, sink: () => true, replayAfter: 0 });
    expect(admin.replay.map((r) => [r.type, r.seq])).toEqual([["task:token", 1], ["task:system_prompt", 2], ["task:token", 3]]);
    expect(admin.lastSeq).toBe(3);
    const user = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: () => true, replayAfter: 0 });
    expect(user.replay.map((r) => r.seq)).toEqual([1, 3]);
    expect(user.lastSeq).toBe(3);
    const later = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: true, sink: () => true, replayAfter: 1 });
    expect(later.replay.map((r) => r.type)).toEqual(["task:system_prompt", "task:token"]);
    // A replay whose last frame is one the user may not see ends below it; what follows is live.
    hub.publish("sess_a", { type: "task:system_prompt", task_id: "t", system_prompt: "again", model: "demo", provider: "demo", tools: [] });
    const seen: number[] = [];
    const tail = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (_j, seq) => void seen.push(seq), replayAfter: 0 });
    expect([tail.replay.map((r) => r.seq), tail.lastSeq]).toEqual([[1, 3], 3]);
    tail.subscription.goLive(tail.lastSeq);
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "c" });
    expect(seen).toEqual([5]);
  });

  test("replay then live: no gap and no duplicate at the seam", async () => {
    for (let i = 0; i < 50; i++) hub.publish("sess_a", { type: "task:token", task_id: "t", text: String(i) });
    const seen: number[] = [];
    const { subscription, replay, lastSeq } = await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (_j, seq) => void seen.push(seq), replayAfter: 10 });
    // Frames published while the replay is being sent are buffered…
    for (let i = 0; i < 5; i++) hub.publish("sess_a", { type: "task:token", task_id: "t", text: "live" });
    expect(seen).toEqual([]);
    for (const r of replay) seen.push(r.seq!);
    subscription.goLive(lastSeq);
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "after" });
    expect(seen).toEqual(Array.from({ length: 46 }, (_, i) => i + 11));
  });

  test("a sink that refuses is dropped; overflow while buffering drops too", async () => {
    let n = 0;
    hub.live({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: () => ++n < 3 });
    for (let i = 0; i < 10; i++) hub.publish("sess_a", { type: "task:token", task_id: "t", text: "x" });
    expect(n).toBe(3);
    expect(hub.subscriberCount("sess_a")).toBe(0);
    let overflowed = false;
    await hub.attach({ sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: () => true, replayAfter: 0, maxPending: 5, onOverflow: () => (overflowed = true) });
    for (let i = 0; i < 6; i++) hub.publish("sess_a", { type: "task:token", task_id: "t", text: "x" });
    expect(overflowed).toBe(true);
    expect(hub.subscriberCount("sess_a")).toBe(0);
  });

  test("one live socket is sent to directly; from two on, all of them get the session's frames through native topics until nobody watches", async () => {
    const published: string[] = [];
    hub.useNativePublish((topic, json) => void published.push(`${topic} ${JSON.parse(json).text ?? JSON.parse(json).type}`));
    const joined: string[] = [];
    const socket = (name: string, isAdmin = false) => {
      const direct: string[] = [];
      const native = { join: () => void joined.push(`+${name}`), leave: () => void joined.push(`-${name}`) };
      return { direct, opts: { sessionId: "sess_a", userId: "usr_1", isAdmin, sink: (j: string) => void direct.push(JSON.parse(j).text), native } };
    };
    const one = socket("one");
    const a = hub.live(one.opts);
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "1" });
    expect(one.direct).toEqual(["1"]);
    expect(published).toEqual([]);
    expect(hub.onTopics("sess_a")).toBe(false);

    // A second socket, replaying first: still direct until it is live.
    const two = socket("two", true);
    const r = await hub.attach({ ...two.opts, replayAfter: 0 });
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "2" });
    expect(one.direct).toEqual(["1", "2"]);
    expect(published).toEqual([]);
    r.subscription.goLive(r.lastSeq);
    expect(two.direct).toEqual(["2"]); // its buffered live frame, sent directly before it joined
    expect(joined).toEqual(["+one", "+two"]);
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "3" });
    hub.publish("sess_a", { type: "task:system_prompt", task_id: "t", system_prompt: "p", model: "demo", provider: "demo", tools: [] });
    expect(published).toEqual(["s:sess_a 3", "a:sess_a task:system_prompt"]);
    expect(one.direct).toEqual(["1", "2"]);
    expect(two.direct).toEqual(["2"]);

    // Down to one watcher: it stays on the topics (a direct send could overtake a queued topic frame).
    r.subscription.close();
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "4" });
    expect(published.at(-1)).toBe("s:sess_a 4");
    expect(one.direct).toEqual(["1", "2"]);
    // Nobody watches: the next watcher is sent to directly again.
    a.close();
    expect(joined).toEqual(["+one", "+two", "-two", "-one"]);
    const three = socket("three");
    hub.live(three.opts);
    hub.publish("sess_a", { type: "task:token", task_id: "t", text: "5" });
    expect(three.direct).toEqual(["5"]);
    expect(published).toHaveLength(3);
  });

  test("a frame its replay already sent is not sent again live (PostgreSQL: the tail can hand it out after the replay read it); a socket joins the topics only once the session's frames are past its replay", async () => {
    for (let i = 0; i < 5; i++) hub.publish("sess_a", { type: "task:token", task_id: "t", text: String(i) });
    const published: number[] = [];
    hub.useNativePublish((_topic, json) => void published.push(JSON.parse(json).seq));
    const deliver = (seq: number) => (hub as unknown as { deliver(s: string, seq: number, type: string, json: string): void }).deliver("sess_a", seq, "task:token", JSON.stringify({ type: "task:token", seq }));
    const joined: string[] = [];
    const socket = (name: string) => {
      const got: number[] = [];
      return { got, opts: { sessionId: "sess_a", userId: "usr_1", isAdmin: false, sink: (j: string) => void got.push(JSON.parse(j).seq), native: { join: () => void joined.push(name), leave() {} } } };
    };
    const a = socket("a");
    const r = await hub.attach({ ...a.opts, replayAfter: 0 });
    expect(r.lastSeq).toBe(5);
    r.subscription.goLive(r.lastSeq);
    deliver(4); // read by the replay, handed out by the tail afterwards
    deliver(5);
    deliver(6);
    expect(a.got).toEqual([6]);

    // A second socket whose replay reached seq 8 while the session's frames reached 6 only.
    const b = socket("b");
    const rb = await hub.attach({ ...b.opts, replayAfter: 0 });
    rb.subscription.goLive(8);
    expect(hub.onTopics("sess_a")).toBe(true);
    expect(joined).toEqual(["a"]); // b waits: the topic would send it 7 and 8 again
    deliver(7);
    expect(b.got).toEqual([]);
    deliver(8);
    expect(joined).toEqual(["a", "b"]);
    deliver(9);
    expect(published).toEqual([7, 8, 9]);
    expect(b.got).toEqual([]);
    expect(a.got).toEqual([6]);
  });
});
