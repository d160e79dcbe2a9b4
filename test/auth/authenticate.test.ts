/**
 * src/auth/authenticate.ts and tokens.ts: the usual authenticated request (a token verified
 * before, its user unchanged) is answered without a promise; a first use, a cookie and a user
 * changed since are read (awaited) — and a disabled user is refused, never a truthy promise.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let alice: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  alice = await createUser(t);
});
afterAll(() => t.stop());

const request = (headers: Record<string, string>) => new Request(`${t.url}/v1/profiles`, { headers });

describe("the authenticated request's hot path", () => {
  test("a token's first use awaits; once verified and its user memoized, no promise", async () => {
    const a = t.app.services.authenticator;
    const req = () => request({ authorization: `Bearer ${alice.token}` });
    const first = a.authenticate(req(), "/v1/profiles", {});
    expect(first).toBeInstanceOf(Promise);
    expect((await first).principal?.user.id).toBe(alice.id);
    const hit = a.authenticate(req(), "/v1/profiles", {});
    expect(hit).not.toBeInstanceOf(Promise);
    expect((hit as Awaited<typeof hit>).principal?.user.id).toBe(alice.id);
  });

  test("a cookie is read behind a promise", async () => {
    const r = t.app.services.authenticator.authenticate(request({ cookie: alice.cookie }), "/v1/profiles", {});
    expect(r).toBeInstanceOf(Promise);
    expect((await r).principal?.via).toBe("cookie");
  });

  test("a user disabled since: the cached token's caller is read again and refused", async () => {
    const a = t.app.services.authenticator;
    const req = () => request({ authorization: `Bearer ${alice.token}` });
    await a.authenticate(req(), "/v1/profiles", {});
    await t.app.services.users.update(alice.id, { disabled: true });
    try {
      const r = await a.authenticate(req(), "/v1/profiles", {});
      expect(r).toEqual({ principal: null, error: "invalid" });
    } finally {
      await t.app.services.users.update(alice.id, { disabled: false });
    }
    expect((await a.authenticate(req(), "/v1/profiles", {})).principal?.user.id).toBe(alice.id);
  });
});
