/**
 * Cookie-session lifetime on a server whose clock the test moves: idle expiry after 7 days,
 * refreshed at most once a day while used, absolute expiry after 30 days whatever the use; the
 * WebSockets a session opened close (4001) when it expires.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";
import { count } from "drizzle-orm";
import { first } from "../../src/db/client.ts";
import { loginSessions } from "../../src/db/tables.ts";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse("2026-01-01T00:00:00.000Z");
let clock = T0;
let t: TestApp;
let user: TestUser;

beforeAll(async () => {
  t = await startTestApp({ now: () => clock });
  user = await createUser(t);
});
afterAll(() => t.stop());

async function signIn(): Promise<{ cookie: string; at: number }> {
  const r = await api(t, "POST", "/api/auth/sign-in/email", {}, { email: user.email, password: user.password });
  expect(r.status).toBe(200);
  return { cookie: `runcell.session_token=${r.body.token}`, at: clock };
}
const session = async (cookie: string) => (await api(t, "GET", "/api/auth/get-session", { cookie })).body;
// Both dialects (the test also runs on PostgreSQL).
const rows = async () => Number((await first(t.app.services.db.select({ n: count() }).from(loginSessions)))!.n);

test("idle expiry: a session unused for 7 days is refused and its row deleted", async () => {
  clock = T0;
  const s = await signIn();
  const before = await rows();
  clock = s.at + 7 * DAY;
  expect(await session(s.cookie)).toBeNull();
  expect(await rows()).toBe(before - 1);
  expect((await api(t, "GET", "/v1/api-tokens", { cookie: s.cookie })).status).toBe(401);
});

test("the idle expiry moves forward at most once a day while the session is used", async () => {
  clock = T0 + 100 * DAY;
  const s = await signIn();
  const initial = new Date(s.at + 7 * DAY).toISOString();
  clock = s.at + 12 * HOUR;
  expect((await session(s.cookie)).session.expires_at).toBe(initial);
  clock = s.at + DAY - 1;
  expect((await session(s.cookie)).session.expires_at).toBe(initial);
  clock = s.at + DAY;
  expect((await session(s.cookie)).session.expires_at).toBe(new Date(s.at + 8 * DAY).toISOString());
  clock = s.at + DAY + 20 * HOUR;
  expect((await session(s.cookie)).session.expires_at).toBe(new Date(s.at + 8 * DAY).toISOString());
  // Used within the window, it outlives the original 7 days.
  clock = s.at + 7 * DAY + HOUR;
  expect(await session(s.cookie)).not.toBeNull();
});

test("absolute expiry: 30 days after sign-in, even when used every few days", async () => {
  clock = T0 + 200 * DAY;
  const s = await signIn();
  for (const d of [6, 12, 18, 24, 29]) {
    clock = s.at + d * DAY;
    const cur = await session(s.cookie);
    expect(cur).not.toBeNull();
    expect(Date.parse(cur.session.expires_at)).toBeLessThanOrEqual(s.at + 30 * DAY);
  }
  clock = s.at + 30 * DAY - 1;
  expect(await session(s.cookie)).not.toBeNull();
  clock = s.at + 30 * DAY;
  expect(await session(s.cookie)).toBeNull();
  expect((await api(t, "GET", "/v1/api-tokens", { cookie: s.cookie })).status).toBe(401);
});

test("the hourly purge removes expired rows only", async () => {
  clock = T0 + 400 * DAY;
  const live = await signIn();
  clock = T0 + 300 * DAY;
  await signIn();
  clock = T0 + 400 * DAY + HOUR;
  const purged = await t.app.services.loginSessions.purgeExpired();
  expect(purged).toBeGreaterThanOrEqual(1);
  expect(await session(live.cookie)).not.toBeNull();
});

describe("an expired session's open sockets close with 4001, like at sign-out", () => {
  const EXPIRED = "authentication failed: the sign-in session expired";
  const signInShort = async (): Promise<{ cookie: string; at: number }> => {
    const r = await api(t, "POST", "/api/auth/sign-in/email", {}, { email: user.email, password: user.password, rememberMe: false });
    expect(r.status).toBe(200);
    return { cookie: `runcell.session_token=${r.body.token}`, at: clock };
  };
  const openWith = (cookie: string) => WsClient.connect(`${t.wsUrl}/v1/stream`, { headers: { cookie, origin: t.url } });
  /** A message the socket answers while signed in (a session that is not there: NOT_FOUND). */
  const ask = (c: WsClient, id: string) => c.send({ type: "session.resume", session_id: "sess_nope", request_id: id });

  test("a request finding it expired (deleted on sight) closes its socket", async () => {
    clock = T0 + 500 * DAY;
    const s = await signInShort();
    const c = await openWith(s.cookie);
    ask(c, "a");
    expect(await c.waitFor((f) => f.request_id === "a")).toMatchObject({ code: "NOT_FOUND" });
    clock = s.at + DAY;
    expect((await api(t, "GET", "/v1/me", { cookie: s.cookie })).status).toBe(401);
    expect(await c.waitClose()).toMatchObject({ code: 4001, reason: EXPIRED });
  });

  test("the purge removing it closes its socket", async () => {
    clock = T0 + 600 * DAY;
    const s = await signIn();
    const c = await openWith(s.cookie);
    clock = s.at + 8 * DAY;
    expect(await t.app.services.loginSessions.purgeExpired()).toBeGreaterThanOrEqual(1);
    expect(await c.waitClose()).toMatchObject({ code: 4001, reason: EXPIRED });
  });

  test("before either, the socket's next message past the expiry is refused with 4001 (nothing handled)", async () => {
    clock = T0 + 700 * DAY;
    const s = await signInShort();
    const c = await openWith(s.cookie);
    clock = s.at + DAY;
    ask(c, "late");
    expect(await c.waitClose()).toMatchObject({ code: 4001, reason: EXPIRED });
    expect(c.frames.some((f) => f.request_id === "late")).toBe(false);
    expect(await session(s.cookie)).toBeNull();
  });

  test("a session kept alive by use elsewhere keeps its socket past the expiry the socket first saw", async () => {
    clock = T0 + 800 * DAY;
    const s = await signIn();
    const c = await openWith(s.cookie);
    // Used a day later: its idle expiry moves from +7 to +8 days.
    clock = s.at + DAY;
    expect(await session(s.cookie)).not.toBeNull();
    clock = s.at + 7 * DAY + HOUR;
    ask(c, "b");
    expect(await c.waitFor((f) => f.request_id === "b")).toMatchObject({ code: "NOT_FOUND" });
    // Past the moved expiry too: refused.
    clock = s.at + 8 * DAY;
    ask(c, "c");
    expect(await c.waitClose()).toMatchObject({ code: 4001, reason: EXPIRED });
    expect(c.frames.some((f) => f.request_id === "c")).toBe(false);
  });

  test("a sign-out, unlike an expiry, closes its socket as revoked", async () => {
    clock = T0 + 900 * DAY;
    const s = await signIn();
    const c = await openWith(s.cookie);
    expect((await api(t, "POST", "/api/auth/sign-out", { cookie: s.cookie, origin: t.url })).status).toBe(200);
    expect(await c.waitClose()).toMatchObject({ code: 4001, reason: "credential revoked" });
  });
});
