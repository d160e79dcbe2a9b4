/**
 * Cookie-session lifetime on a server whose clock the test moves: idle expiry after 7 days,
 * refreshed at most once a day while used, absolute expiry after 30 days whatever the use.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

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
const rows = () => t.app.services.sqlite!.query<{ n: number }, []>("SELECT count(*) AS n FROM login_sessions").get()!.n;

test("idle expiry: a session unused for 7 days is refused and its row deleted", async () => {
  clock = T0;
  const s = await signIn();
  const before = rows();
  clock = s.at + 7 * DAY;
  expect(await session(s.cookie)).toBeNull();
  expect(rows()).toBe(before - 1);
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
