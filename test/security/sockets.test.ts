/**
 * Open sockets per caller are capped (--max-sockets-per-caller, default 20): one more is closed
 * right after it opens with 4029 and a reason, other callers are not affected, and closing one
 * frees a slot. A reader that stops reading is closed with 1013 and its connection released within
 * a few seconds, not kept (with its backlog) until the close handshake times out.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlRun } from "../helpers/db.ts";
import { waitFor } from "../helpers/net.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { stalledReader, WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let stream: string;

beforeAll(async () => {
  // The operator policy as shipped: the default cap of 20.
  t = await startTestApp({ policy: "defaults" });
  alice = await createUser(t);
  bob = await createUser(t);
  stream = `${t.wsUrl}/v1/stream`;
});
afterAll(() => t.stop());

const open = (u: TestUser) => WsClient.connect(stream, { protocols: [`Bearer.${u.token}`] });

/** A socket is usable: a message gets its answer. */
async function answers(c: WsClient, id: string) {
  c.send({ type: "session.resume", session_id: "sess_nope", request_id: id });
  expect(await c.waitFor((f) => f.request_id === id)).toMatchObject({ code: "NOT_FOUND" });
}

describe("sockets per caller", () => {
  test("the 21st socket of one user is closed with 4029; another user's opens; closing one frees a slot", async () => {
    expect(t.config.maxSocketsPerCaller).toBe(20);
    const base = t.app.stream.size;
    const mine: WsClient[] = [];
    for (let i = 0; i < 20; i++) mine.push(await open(alice));
    for (const [i, c] of mine.entries()) await answers(c, `a${i}`);
    expect(t.app.stream.size).toBe(base + 20);

    const extra = await open(alice); // the upgrade succeeds; the socket is closed right after
    const closed = await extra.waitClose(5_000);
    expect(closed.code).toBe(4029);
    expect(closed.reason).toContain("20");
    expect(extra.frames).toEqual([]);
    expect(t.app.stream.size).toBe(base + 20);
    // A cookie-authenticated socket of the same user counts too.
    const viaCookie = await WsClient.connect(stream, { headers: { cookie: alice.cookie, origin: t.url } });
    expect((await viaCookie.waitClose(5_000)).code).toBe(4029);

    // Someone else is not affected.
    const other = await open(bob);
    await answers(other, "b0");
    expect(other.closed).toBeNull();

    // All 20 are still open and usable.
    for (const [i, c] of mine.entries()) {
      expect(c.closed).toBeNull();
      await answers(c, `again${i}`);
    }

    // Closing one frees a slot.
    mine.pop()!.close();
    await waitFor(() => t.app.stream.size === base + 20, { timeoutMs: 5_000, what: "socket released" });
    const again = await open(alice);
    await answers(again, "freed");
    await Bun.sleep(200);
    expect(again.closed).toBeNull();
    // …and the cap holds again.
    const over = await open(alice);
    expect((await over.waitClose(5_000)).code).toBe(4029);

    for (const c of [...mine, again, other]) c.close();
    await waitFor(() => t.app.stream.size === base, { timeoutMs: 5_000, what: "all closed" });
  }, 60_000);
});

/** TCP states of the server's side of the connection to the client's `port` (from /proc/net). */
function serverSideStates(serverPort: number, clientPort: number): string[] {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, "0");
  const out: string[] = [];
  for (const f of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(f, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4) continue;
      if (cols[1]!.endsWith(`:${hex(serverPort)}`) && cols[2]!.endsWith(`:${hex(clientPort)}`)) out.push(cols[3]!);
    }
  }
  return out;
}
const ESTABLISHED = "01";

/** A raw client of alice's that resumes the session, then stops reading. */
const stalled = (sessionId: string) => stalledReader(stream, alice.token, sessionId, 0);

describe("a reader that stops reading", () => {
  test("is closed with 1013 and its connection released within a few seconds", async () => {
    const { hub } = t.app.services;
    const sid = "sess_stalledreader000000000000";
    await sqlRun(t, "INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES (?, ?, 'prof_x', 0, 0)", [sid, alice.id]);
    const base = t.app.stream.size;
    const sock = await stalled(sid);
    const clientPort = sock.localPort!;
    const serverPort = Number(new URL(stream).port);
    await waitFor(() => t.app.stream.size === base + 1, { timeoutMs: 5_000, what: "socket open" });
    expect(serverSideStates(serverPort, clientPort)).toEqual([ESTABLISHED]);

    // Flood the session until the server gives up on the reader.
    const chunk = "x".repeat(64 * 1024);
    let published = 0;
    while (t.app.stream.size > base && published < 2000) {
      for (let i = 0; i < 16; i++, published++) hub.publish(sid, { type: "task:token", task_id: "task_x", text: chunk });
      await Bun.sleep(5);
    }
    expect(t.app.stream.size).toBe(base);
    const gaveUpAt = performance.now();

    // Released within a few seconds: the server holds no established connection to it.
    await waitFor(() => !serverSideStates(serverPort, clientPort).includes(ESTABLISHED), { timeoutMs: 8_000, intervalMs: 100, what: "connection released" });
    const releasedAfter = performance.now() - gaveUpAt;
    expect(releasedAfter).toBeLessThan(8_000);
    sock.destroy();
  }, 60_000);
});
