/**
 * A token deleted behind this server — by another replica, whose bus message may not have arrived
 * yet, or another process on the same database — is refused on the very next request, not after
 * the 60 s verification cache: the caller is read by token (src/auth/authenticate.ts), and its
 * open socket is closed 4001 once the server has seen it gone. Runs on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlRun } from "../helpers/db.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let user: TestUser;
beforeAll(async () => {
  t = await startTestApp();
  user = await createUser(t);
});
afterAll(() => t?.stop());

test("a token whose row is deleted behind the server: 401 on the next request, its socket closed 4001, other tokens unaffected", async () => {
  const made = await api(t, "POST", "/v1/api-tokens", user.bearer, { name: "elsewhere" });
  expect(made.status).toBe(201);
  const bearer = { authorization: `Bearer ${made.body.token}` };
  expect((await api(t, "GET", "/v1/me", bearer)).status).toBe(200); // verified and cached
  const ws = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${made.body.token}`] });
  expect(await sqlRun(t, "DELETE FROM api_tokens WHERE id = ?", [made.body.id])).toBe(1);
  expect((await api(t, "GET", "/v1/me", bearer)).status).toBe(401);
  expect((await ws.waitClose(5_000)).code).toBe(4001);
  expect((await api(t, "GET", "/v1/me", user.bearer)).status).toBe(200);
});
