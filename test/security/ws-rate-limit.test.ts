/**
 * Every client frame on /v1/stream takes a token from the caller's rate-limit bucket (the same
 * bucket as REST, key u:<user id>): an empty bucket answers an error frame RATE_LIMITED with
 * details.retry_after and the request_id, and the socket stays open. And session.resume reads
 * the replay in pages, keeping the seam between replay and live frames without a gap or a
 * duplicate.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlRun } from "../helpers/db.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

describe("rate limit on client frames", () => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  beforeAll(async () => {
    // 60 a minute (one a second), burst 10: what the README ships.
    t = await startTestApp({ flags: ["--rate-limit-per-minute", "60", "--rate-limit-burst", "10"] });
    alice = await createUser(t);
    bob = await createUser(t);
  });
  afterAll(() => t.stop());

  const open = (u: TestUser) => WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${u.token}`] });

  for (const kind of ["session.start", "task.submit"] as const) {
    test(`500 ${kind} frames on one socket: the bucket runs out, the rest are RATE_LIMITED, the socket stays open`, async () => {
      const u = await createUser(t);
      const c = await open(u); // the upgrade takes one token
      const N = 500;
      for (let i = 0; i < N; i++) {
        const body = kind === "session.start" ? { profile_id: "prof_nope" } : { profile_id: "prof_nope", prompt: "hi" };
        c.send({ type: kind, ...body, request_id: `r${i}` });
      }
      await c.waitFor((f) => f.request_id === `r${N - 1}`, 15_000);
      const answers = c.frames.filter((f) => f.type === "error");
      expect(answers).toHaveLength(N);
      const passed = answers.filter((f) => f.code !== "RATE_LIMITED");
      const limited = answers.filter((f) => f.code === "RATE_LIMITED");
      // 9 tokens were left after the upgrade (maybe one more refilled meanwhile); the rest are refused.
      expect(passed.length).toBeGreaterThanOrEqual(9);
      expect(passed.length).toBeLessThanOrEqual(11);
      expect(passed.every((f) => f.code === "NOT_FOUND")).toBe(true);
      // A socket's messages are answered in the order they came (work waits for its turn of the
      // event loop, and the messages behind it wait too: src/ws/stream.ts turnFor).
      expect(answers.map((f) => f.request_id)).toEqual(Array.from({ length: N }, (_, i) => `r${i}`));
      expect(limited.length).toBe(N - passed.length);
      for (const f of limited) {
        expect(f.request_id).toMatch(/^r\d+$/);
        expect(f.details.retry_after).toBeGreaterThanOrEqual(1);
        expect(typeof f.message).toBe("string");
      }
      // Each frame answered once, request ids echoed.
      expect(new Set(answers.map((f) => f.request_id)).size).toBe(N);
      // The socket is still open; the same bucket refuses REST too.
      expect(c.closed).toBeNull();
      const rest = await api(t, "GET", "/v1/profiles", u.bearer);
      expect(rest.status).toBe(429);
      // A second later a token is back, and a frame passes on the same socket.
      await Bun.sleep(1100);
      c.send({ type: "session.resume", session_id: "sess_nope", request_id: "later" });
      expect(await c.waitFor((f) => f.request_id === "later")).toMatchObject({ code: "NOT_FOUND" });
      c.close();
    }, 30_000);
  }

  test("invalid frames take from the bucket too; another caller's bucket is untouched", async () => {
    const c = await open(alice);
    for (let i = 0; i < 30; i++) c.send(`{"type":"nope","request_id":"x${i}"}`);
    for (let i = 0; i < 30; i++) c.send(`not json ${i}`);
    await c.waitFor((f) => f.request_id === "x29");
    await Bun.sleep(200);
    const errors = c.frames.filter((f) => f.type === "error");
    expect(errors).toHaveLength(60);
    expect(errors.filter((f) => f.code === "RATE_LIMITED").length).toBeGreaterThanOrEqual(48);
    // The refusal of a well-formed frame still names it.
    expect(errors.find((f) => f.request_id === "x29")).toMatchObject({ code: "RATE_LIMITED" });
    const b = await open(bob);
    b.send({ type: "session.resume", session_id: "sess_nope", request_id: "b1" });
    expect(await b.waitFor((f) => f.request_id === "b1")).toMatchObject({ code: "NOT_FOUND" });
    b.close();
    c.close();
  });
});

describe("session.resume reads the replay in pages", () => {
  let t: TestApp;
  let user: TestUser;
  beforeAll(async () => {
    t = await startTestApp();
    user = await createUser(t);
  });
  afterAll(() => t.stop());

  test("a 5,000-frame replay is read in pages of at most 1,000 rows; live frames published between pages follow replay_end with no gap and no duplicate", async () => {
    const { hub, eventLog } = t.app.services;
    const sid = "sess_pagedreplay00000000000000";
    await sqlRun(t, "INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, 'prof_x', 0, 0)", [sid, user.id]);
    const TOTAL = 5000;
    for (let i = 1; i <= TOTAL; i++) hub.publish(sid, { type: "task:token", task_id: "task_x", text: `t${i} ` });
    await eventLog.flush();

    // Watch every read of the log: how many rows each returns. After each read while the replay
    // runs, publish a live frame, so frames arrive between pages.
    const sizes: number[] = [];
    let live = 0;
    const proto = Object.getPrototypeOf(eventLog);
    const originals = new Map<string, Function>();
    for (const name of Object.getOwnPropertyNames(proto)) {
      const fn = (eventLog as any)[name];
      if (name === "constructor" || typeof fn !== "function") continue;
      originals.set(name, fn);
      (eventLog as any)[name] = function (this: unknown, ...args: unknown[]) {
        const out = fn.apply(eventLog, args);
        const seen = (result: unknown) => {
          // The rows a read returns: the result itself, or an array inside it.
          const rows = Array.isArray(result) ? result : result && typeof result === "object" ? Object.values(result).find(Array.isArray) : undefined;
          if (rows && args[0] === sid) {
            sizes.push(rows.length);
            if (live < 50) {
              live++;
              hub.publish(sid, { type: "task:token", task_id: "task_x", text: `live${live} ` });
            }
          }
          return result;
        };
        // PostgreSQL's log reads asynchronously: the rows are the promise's.
        return out instanceof Promise ? out.then(seen) : seen(out);
      };
    }
    try {
      const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
      c.send({ type: "session.resume", session_id: sid, after: 0 });
      const end = await c.waitFor((f) => f.type === "session.replay_end", 30_000);
      for (const [name] of originals) delete (eventLog as any)[name];
      // Live frames were published between the pages.
      expect(live).toBeGreaterThanOrEqual(5);
      // Publish a few more once live.
      for (let i = 0; i < 5; i++) hub.publish(sid, { type: "task:token", task_id: "task_x", text: `after${i} ` });
      const expected = TOTAL + live + 5;
      await c.waitFor((f) => f.seq === expected, 15_000);
      await Bun.sleep(100);

      expect(sizes.length).toBeGreaterThanOrEqual(5);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(1000);
      const start = c.frames.findIndex((f) => f.type === "session.replay_start");
      const endAt = c.frames.indexOf(end);
      const seqs = c.frames.filter((f) => typeof f.seq === "number").map((f) => f.seq);
      expect(seqs).toEqual(Array.from({ length: expected }, (_, i) => i + 1));
      expect(c.frames.slice(start + 1, endAt).every((f) => f.seq <= end.last_seq)).toBe(true);
      expect(c.frames.slice(endAt + 1).every((f) => f.seq > end.last_seq)).toBe(true);
      // The frames are the stored ones, byte for byte.
      const stored = (await eventLog.read(sid, 0, 100_000)).map((r) => JSON.parse(r.frame));
      expect(c.frames.filter((f) => typeof f.seq === "number")).toEqual(stored);
      c.close();
    } finally {
      for (const [name] of originals) delete (eventLog as any)[name];
    }
  }, 60_000);
});
