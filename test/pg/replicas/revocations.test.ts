/**
 * A credential revoked on one replica stops working on every replica at once: a token deleted
 * through replica A is refused by replica B on its next request (B had it cached), and the socket
 * it opened on B is closed with 4001; a sign-out through A — or its session expiring — closes the
 * cookie's socket on B.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import { WsClient } from "../../helpers/ws-client.ts";

const wsUrl = (url: string) => `${url.replace(/^http/, "ws")}/v1/stream`;

describe.skipIf(!PG_SERVER)("replicas: revocations", () => {
  let r: ReplicaSet;
  beforeAll(async () => {
    r = await startReplicas(2);
  }, 60_000);
  afterAll(() => r?.stop());

  test("a token deleted through A: refused by B at once (B had it cached), its socket on B closed 4001", async () => {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    const made = await (await fetch(a.url + "/v1/api-tokens", { method: "POST", headers: r.headers, body: JSON.stringify({ name: "short-lived" }) })).json();
    const bearer = { authorization: `Bearer ${made.token}` };
    // Verified (and cached) on B; a socket opened with it on B.
    expect((await fetch(b.url + "/v1/me", { headers: bearer })).status).toBe(200);
    const ws = await WsClient.connect(wsUrl(b.url), { protocols: [`Bearer.${made.token}`] });
    expect((await fetch(a.url + `/v1/api-tokens/${made.id}`, { method: "DELETE", headers: r.headers })).status).toBe(204);
    expect((await ws.waitClose(5_000)).code).toBe(4001);
    expect((await fetch(b.url + "/v1/me", { headers: bearer })).status).toBe(401);
    // The replica's own token still works there.
    expect((await fetch(b.url + "/v1/me", { headers: r.headers })).status).toBe(200);
  });

  test("a sign-out through A closes the cookie's socket on B", async () => {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    const signIn = await fetch(a.url + "/api/auth/sign-in/email", {
      method: "POST",
      headers: { "content-type": "application/json", origin: a.url },
      body: JSON.stringify({ email: r.email, password: "correct horse battery" }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const ws = await WsClient.connect(wsUrl(b.url), { headers: { cookie, origin: b.url } });
    await Bun.sleep(200);
    expect(ws.closed).toBeNull();
    const out = await fetch(a.url + "/api/auth/sign-out", { method: "POST", headers: { cookie, origin: a.url } });
    expect(out.status).toBe(200);
    expect((await ws.waitClose(5_000)).code).toBe(4001);
    expect((await fetch(b.url + "/v1/me", { headers: { cookie } })).status).toBe(401);
  });

  test("a session found expired through A (deleted on sight) closes the cookie's socket on B", async () => {
    const [a, b] = r.servers as [(typeof r.servers)[0], (typeof r.servers)[0]];
    const signIn = await fetch(a.url + "/api/auth/sign-in/email", {
      method: "POST",
      headers: { "content-type": "application/json", origin: a.url },
      body: JSON.stringify({ email: r.email, password: "correct horse battery", rememberMe: false }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const { token } = await signIn.json();
    const ws = await WsClient.connect(wsUrl(b.url), { headers: { cookie, origin: b.url } });
    await Bun.sleep(200);
    expect(ws.closed).toBeNull();
    const hash = new Bun.CryptoHasher("sha256").update(token).digest("hex");
    await r.sql`UPDATE login_sessions SET expires_at = 1, absolute_expires_at = 1 WHERE token_hash = ${hash}`;
    expect((await fetch(a.url + "/v1/me", { headers: { cookie } })).status).toBe(401);
    expect(await ws.waitClose(5_000)).toMatchObject({ code: 4001, reason: "authentication failed: the sign-in session expired" });
  });
});
