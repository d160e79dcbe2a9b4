/**
 * /v1/stream with a real client library on a real port: each way to authenticate and each
 * refusal, every client message and error frame, isolation between users, fan-out, and
 * revocation of credentials on open sockets.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { createProfile, waitTask } from "../helpers/agent.ts";
import { WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let mock: MockProviderServer;
let alice: TestUser;
let bob: TestUser;
let profileId: string;
let stream: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  mock.script(() => ({ text: "scripted reply" }));
  alice = await createUser(t);
  bob = await createUser(t);
  profileId = await createProfile(t, alice, { mock });
  stream = `${t.wsUrl}/v1/stream`;
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

const open = (u: TestUser) => WsClient.connect(stream, { protocols: [`Bearer.${u.token}`] });

describe("authentication", () => {
  test("subprotocol Bearer.<token>: the server selects that protocol", async () => {
    const c = await open(alice);
    expect(c.ws.protocol).toBe(`Bearer.${alice.token}`);
    c.send({ type: "session.resume", session_id: "sess_nope", request_id: "r1" });
    expect(await c.waitFor((f) => f.type === "error")).toMatchObject({ code: "NOT_FOUND", request_id: "r1" });
    c.close();
  });

  test("the 101 answer carries X-Request-Id (a sane given one kept), RateLimit-* and X-Runcell-Replica, like every answer", async () => {
    const { connect } = await import("node:net");
    const url = new URL(t.url);
    const head = await new Promise<string>((resolve, reject) => {
      const sock = connect(Number(url.port), url.hostname, () => {
        sock.write(
          "GET /v1/stream HTTP/1.1\r\n" +
            `Host: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n` +
            `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: Bearer.${alice.token}\r\nX-Request-Id: ws-upgrade-1\r\n\r\n`,
        );
      });
      let got = "";
      sock.on("data", (b) => {
        got += b.toString("latin1");
        if (got.includes("\r\n\r\n")) {
          sock.destroy();
          resolve(got.slice(0, got.indexOf("\r\n\r\n")));
        }
      });
      sock.on("error", reject);
    });
    expect(head).toStartWith("HTTP/1.1 101");
    expect(head.toLowerCase()).toContain("x-request-id: ws-upgrade-1");
    expect(head.toLowerCase()).toContain(`x-runcell-replica: ${t.app.services.replicas.id}`.toLowerCase());
    expect(head.toLowerCase()).toContain(`sec-websocket-protocol: bearer.${alice.token}`.toLowerCase());
    for (const h of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(head.toLowerCase()).toMatch(new RegExp(`\\r\\n${h}: \\d+`));
  });

  test("?token= query parameter, never logged", async () => {
    const c = await WsClient.connect(`${stream}?token=${alice.token}`);
    c.send({ type: "session.resume", session_id: "sess_nope" });
    expect((await c.waitFor((f) => f.type === "error")).code).toBe("NOT_FOUND");
    c.close();
    expect(t.logs.join("\n")).not.toContain(alice.token);
  });

  test("session cookie from our own origin, and an Authorization header", async () => {
    const c = await WsClient.connect(stream, { headers: { cookie: alice.cookie, origin: t.url } });
    c.send({ type: "session.resume", session_id: "sess_nope" });
    expect((await c.waitFor((f) => f.type === "error")).code).toBe("NOT_FOUND");
    c.close();
    const h = await WsClient.connect(stream, { headers: { authorization: `Bearer ${alice.token}` } });
    h.send({ type: "session.resume", session_id: "sess_nope" });
    expect((await h.waitFor((f) => f.type === "error")).code).toBe("NOT_FOUND");
    h.close();
  });

  test.each([
    ["no credential", {}],
    ["a malformed token (subprotocol)", { protocols: ["Bearer.rc_nothex"] }],
    ["an unknown well-formed token (query)", { query: "rc_" + "0".repeat(56) + "7a5bc1f0" }],
    ["a bad cookie", { headers: { cookie: "runcell.session_token=forged" } }],
  ])("%s → closed with 4001 before any data frame", async (_n, o: { protocols?: string[]; query?: string; headers?: Record<string, string> }) => {
    const c = await WsClient.connect(stream + (o.query ? `?token=${o.query}` : ""), { protocols: o.protocols, headers: o.headers });
    const closed = await c.waitClose();
    expect(closed.code).toBe(4001);
    expect(c.frames).toEqual([]);
  });

  test("a cookie-authenticated upgrade from a foreign Origin is refused", async () => {
    const err = await WsClient.connect(stream, { headers: { cookie: alice.cookie, origin: "https://evil.example" } }).catch((e) => e);
    expect(err.status).toBe(403);
    expect(JSON.parse(err.body).code).toBe("FORBIDDEN");
    // A token is not an ambient credential: any origin may use it.
    const ok = await WsClient.connect(stream, { protocols: [`Bearer.${alice.token}`], headers: { origin: "https://other.example" } });
    ok.close();
  });

  test("a plain HTTP request (no Upgrade) is an HTTP answer: 401 without a credential, else 400; every header", async () => {
    const anonymous = await t.fetch("/v1/stream");
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { code: string }).code).toBe("UNAUTHORIZED");
    const garbage = await t.fetch("/v1/stream", { headers: { authorization: "Bearer rc_nope" } });
    expect(garbage.status).toBe(401);
    const plain = await t.fetch("/v1/stream", { headers: { authorization: `Bearer ${alice.token}` } });
    expect(plain.status).toBe(400);
    expect(plain.headers.get("upgrade")).toBe("websocket");
    expect(await plain.json()).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "upgrade" } });
    for (const r of [anonymous, garbage, plain]) {
      expect(r.headers.get("x-request-id")).toMatch(/^req_/);
      expect(r.headers.get("x-content-type-options")).toBe("nosniff");
      for (const h of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(r.headers.get(h), h).toMatch(/^\d+$/);
    }
    // A refused handshake carries them too.
    const err = await WsClient.connect(stream, { headers: { cookie: alice.cookie, origin: "https://evil.example" } }).catch((e) => e);
    expect(err.status).toBe(403);
    expect(err.headers["ratelimit-limit"]).toMatch(/^\d+$/);
  });

  test("deleting the token closes its open sockets with 4001; other credentials stay", async () => {
    const extra = await api(t, "POST", "/v1/api-tokens", alice.bearer, { name: "doomed" });
    const doomed = await WsClient.connect(stream, { protocols: [`Bearer.${extra.body.token}`] });
    const other = await open(alice);
    expect((await api(t, "DELETE", `/v1/api-tokens/${extra.body.id}`, alice.bearer)).status).toBe(204);
    expect((await doomed.waitClose()).code).toBe(4001);
    await Bun.sleep(50);
    expect(other.closed).toBeNull();
    other.close();
  });

  test("disabling the user closes all of their sockets with 4001", async () => {
    const carol = await createUser(t);
    const a = await open(carol);
    const b = await WsClient.connect(stream, { headers: { cookie: carol.cookie, origin: t.url } });
    await t.app.services.users.adminPatch(carol.id, { disabled: true });
    expect((await a.waitClose()).code).toBe(4001);
    expect((await b.waitClose()).code).toBe(4001);
    const refused = await open(carol);
    expect((await refused.waitClose()).code).toBe(4001);
  });
});

describe("client messages and error frames", () => {
  test.each([
    ["bad JSON", "{nope", "frame"],
    ["bad JSON that names its request", '{"type":"task.submit","request_id":"q",', "frame"],
    ["a type that is not a string", JSON.stringify({ type: 5, request_id: "q" }), "type"],
    ["not an object", "[1,2]", "frame"],
    ["bad JSON around an unquoted secret (not echoed)", '{"type":"task.submit","request_id":"q","prompt":sk_live_abcdef123}', "frame"],
    ["missing type", JSON.stringify({ session_id: "x", request_id: "q" }), "type"],
    ["unknown type", JSON.stringify({ type: "task.explode", request_id: "q" }), "type"],
    ["task.submit without prompt", JSON.stringify({ type: "task.submit", profile_id: "prof_x", request_id: "q" }), "prompt"],
    ["task.cancel without task_id", JSON.stringify({ type: "task.cancel", request_id: "q" }), "task_id"],
    ["task.answer with a number", JSON.stringify({ type: "task.answer", task_id: "task_x", answer: 5, request_id: "q" }), "answer"],
    ["session.start without profile_id", JSON.stringify({ type: "session.start", request_id: "q" }), "profile_id"],
    ["session.resume with a negative after", JSON.stringify({ type: "session.resume", session_id: "s", after: -1, request_id: "q" }), "after"],
    ["session.turn without session_id", JSON.stringify({ type: "session.turn", prompt: "hi", request_id: "q" }), "session_id"],
    ["task.answer with a blank answer", JSON.stringify({ type: "task.answer", task_id: "task_x", answer: "  ", request_id: "q" }), "answer"],
    ["session.turn with a blank prompt", JSON.stringify({ type: "session.turn", session_id: "s", prompt: " \n ", request_id: "q" }), "prompt"],
  ])("%s → VALIDATION_FAILED on %p, socket stays open", async (_n, raw, field) => {
    const c = await open(alice);
    c.send(raw);
    const err = await c.waitFor((f) => f.type === "error");
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.details?.field).toBe(field);
    expect(typeof err.message).toBe("string");
    expect(JSON.stringify(err)).not.toContain("sk_live");
    if (raw.includes('"request_id":"q"')) expect(err.request_id).toBe("q");
    c.send({ type: "session.resume", session_id: "sess_nope", request_id: "still-open" });
    expect((await c.waitFor((f) => f.request_id === "still-open")).code).toBe("NOT_FOUND");
    c.close();
  });

  test("a message over 16 MiB is not buffered: the socket closes with 1009", async () => {
    const c = await open(alice);
    c.send("x".repeat(16 * 1024 * 1024 + 10));
    expect((await c.waitClose()).code).toBe(1009);
  });

  test("a frame over 1 MiB is refused with VALIDATION_FAILED and the socket stays open", async () => {
    const c = await open(alice);
    c.send({ type: "task.submit", profile_id: profileId, prompt: "x".repeat(1024 * 1024 + 10), request_id: "big" });
    expect(await c.waitFor((f) => f.type === "error")).toMatchObject({ code: "VALIDATION_FAILED", request_id: "big" });
    expect(c.closed).toBeNull();
    c.close();
  });

  test("session.start → session.ready; session.turn streams the answer; task.submit without a session creates one", async () => {
    const c = await open(alice);
    c.send({ type: "session.start", profile_id: profileId });
    const ready = await c.waitFor((f) => f.type === "session.ready");
    // (Checked field by field: Bun's toMatchObject with asymmetric matchers rewrites the object it checks.)
    expect(ready.session_id).toMatch(/^sess_/);
    expect(ready.container_id).toMatch(/^ctr_/);
    expect(typeof ready.container_name).toBe("string");
    expect([ready.profile_id, ready.seq]).toEqual([profileId, 1]);
    c.send({ type: "session.turn", session_id: ready.session_id, prompt: "hello" });
    const done = await c.waitFor((f) => f.type === "task:done");
    expect(done).toMatchObject({ session_id: ready.session_id, status: "completed", task_id: expect.stringMatching(/^task_/) });
    const turn = c.frames.find((f) => f.type === "turn.done");
    expect(turn).toMatchObject({ result_text: "scripted reply", input_tokens: expect.any(Number), output_tokens: expect.any(Number), cost_usd: expect.any(Number) });

    const from = c.frames.length;
    c.send({ type: "task.submit", mode: "session", profile_id: profileId, prompt: "new one" });
    const ready2 = await c.waitFor((f) => f.type === "session.ready", 15_000, from);
    expect(ready2.session_id).not.toBe(ready.session_id);
    await c.waitFor((f) => f.type === "task:done" && f.session_id === ready2.session_id);
    c.close();
  });

  test("task.cancel and task.answer over the socket", async () => {
    mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Go?", options: [{ label: "yes" }, { label: "no" }] }] } }] }, { text: "went" });
    const c = await open(alice);
    c.send({ type: "task.submit", profile_id: profileId, prompt: "ask" });
    const ask = await c.waitFor((f) => f.type === "task:ask_user");
    expect(ask.questions).toEqual([{ question: "Go?", options: [{ label: "yes" }, { label: "no" }] }]);
    c.send({ type: "task.answer", task_id: ask.task_id, answer: "yes" });
    await c.waitFor((f) => f.type === "task:done" && f.task_id === ask.task_id);
    expect(c.frames.find((f) => f.type === "task:tool_result" && f.task_id === ask.task_id)?.output).toBe("yes");

    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] });
    c.send({ type: "session.turn", session_id: ask.session_id, prompt: "sleep" });
    const use = await c.waitFor((f) => f.type === "task:tool_use" && f.tool === "Bash");
    c.send({ type: "task.cancel", task_id: use.task_id });
    expect(await c.waitFor((f) => f.type === "task:done" && f.task_id === use.task_id)).toMatchObject({ status: "cancelled" });
    c.close();
  });

  test("someone else's records answer NOT_FOUND frames", async () => {
    const a = await open(alice);
    a.send({ type: "session.start", profile_id: profileId });
    const ready = await a.waitFor((f) => f.type === "session.ready");
    a.send({ type: "session.turn", session_id: ready.session_id, prompt: "hi" });
    const done = await a.waitFor((f) => f.type === "task:done");
    const b = await open(bob);
    const cases = [
      { type: "session.resume", session_id: ready.session_id },
      { type: "session.turn", session_id: ready.session_id, prompt: "hijack" },
      { type: "task.submit", session_id: ready.session_id, prompt: "hijack" },
      { type: "task.submit", profile_id: profileId, prompt: "hijack" },
      { type: "session.start", profile_id: profileId },
      { type: "task.cancel", task_id: done.task_id },
      { type: "task.answer", task_id: done.task_id, answer: "x" },
    ];
    for (const [i, m] of cases.entries()) {
      b.send({ ...m, request_id: `c${i}` });
      expect((await b.waitFor((f) => f.request_id === `c${i}`)).code).toBe("NOT_FOUND");
    }
    // Bob never saw a frame of Alice's session.
    expect(b.frames.every((f) => f.type === "error")).toBe(true);
    a.close();
    b.close();
  });

  test("limits answer CONCURRENCY_LIMIT, BUDGET_EXCEEDED and TURN_LIMIT_EXCEEDED frames", async () => {
    const dave = await createUser(t);
    const pid = await createProfile(t, dave, { mock, limits: { max_concurrency: 1 } });
    const c = await open(dave);
    c.send({ type: "session.start", profile_id: pid });
    await c.waitFor((f) => f.type === "session.ready");
    c.send({ type: "session.start", profile_id: pid, request_id: "second" });
    const limited = await c.waitFor((f) => f.request_id === "second");
    expect(limited.code).toBe("CONCURRENCY_LIMIT");
    // A frame has no headers: when to try again is in details, as on REST.
    expect(limited.details).toEqual({ limit: "max_concurrency", profile_id: pid, max_concurrency: 1, retry_after: 10 });
    c.send({ type: "task.submit", profile_id: pid, prompt: "x", max_budget_usd: 0, request_id: "budget" });
    expect((await c.waitFor((f) => f.request_id === "budget")).code).toBe("BUDGET_EXCEEDED");
    c.send({ type: "task.submit", profile_id: pid, prompt: "x", max_turns: 0, request_id: "turns" });
    expect((await c.waitFor((f) => f.request_id === "turns")).code).toBe("TURN_LIMIT_EXCEEDED");
    c.close();
  });
});

test("task.submit with null in its optional fields (every field sent) starts a new session, as without them", async () => {
  const c = await open(alice);
  c.send({ type: "task.submit", mode: "session", profile_id: profileId, session_id: null, prompt: "nulls", max_turns: null, max_budget_usd: null, request_id: "n" });
  const ready = await c.waitFor((f) => f.type === "session.ready");
  expect(ready.session_id).toMatch(/^sess_/);
  await c.waitFor((f) => f.type === "task:done");
  expect(c.frames.some((f) => f.type === "error")).toBe(false);
  c.close();
});

describe("fan-out", () => {
  test("two sockets of the same user on one session both get every live event; admins also get the system prompt", async () => {
    const admin = await createUser(t, { role: "admin" });
    const pid = await createProfile(t, admin, { mock, system_prompt: "Top secret system prompt" });
    const a = await open(admin);
    a.send({ type: "session.start", profile_id: pid });
    const ready = await a.waitFor((f) => f.type === "session.ready");
    const b = await open(admin);
    b.send({ type: "session.resume", session_id: ready.session_id });
    await b.waitFor((f) => f.type === "session.replay_end");
    a.send({ type: "session.turn", session_id: ready.session_id, prompt: "both of you" });
    await a.waitFor((f) => f.type === "task:done");
    await b.waitFor((f) => f.type === "task:done");
    const live = (c: WsClient) => c.frames.filter((f) => !["session.ready", "session.replay_start", "session.replay_end"].includes(f.type));
    expect(live(b)).toEqual(live(a));
    expect(live(a).find((f) => f.type === "task:system_prompt")).toMatchObject({ system_prompt: "Top secret system prompt" });
    // Every session frame carries seq, the system prompt too (API.md), in one sequence.
    const seqs = a.frames.filter((f) => f.session_id && !f.type.startsWith("session.replay")).map((f) => f.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    // The transcript pages hold at most `limit` frames, the system prompt counted, and chain without a gap or a repeat.
    const pages: any[][] = [];
    for (let after = 0; ; ) {
      const page = await api(t, "GET", `/v1/sessions/${ready.session_id}/events?limit=2&after=${after}`, admin.bearer);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      pages.push(page.body.data);
      if (!page.body.next_cursor) break;
      after = Number(page.body.next_cursor);
    }
    expect(pages.flat().map((f) => f.seq)).toEqual(seqs);
    a.close();
    b.close();
    // A non-admin never receives it, live or replayed.
    const c = await open(alice);
    c.send({ type: "session.start", profile_id: profileId });
    const r2 = await c.waitFor((f) => f.type === "session.ready");
    c.send({ type: "session.turn", session_id: r2.session_id, prompt: "hi" });
    await c.waitFor((f) => f.type === "task:done");
    c.send({ type: "session.resume", session_id: r2.session_id });
    await c.waitFor((f) => f.type === "session.replay_end");
    expect(c.frames.some((f) => f.type === "task:system_prompt")).toBe(false);
    c.close();
  });

  test("a role change reconnects the user's sockets (1012): a demoted admin's resumed socket no longer gets the system prompt", async () => {
    const u = await createUser(t, { role: "admin" });
    const pid = await createProfile(t, u, { mock, system_prompt: "Admins only prompt" });
    const a = await open(u);
    a.send({ type: "session.start", profile_id: pid });
    const ready = await a.waitFor((f) => f.type === "session.ready");
    await t.app.services.users.adminPatch(u.id, { role: "user" });
    expect((await a.waitClose(5_000)).code).toBe(1012);
    // The credential still holds: reconnect and resume, now as a user.
    const b = await open(u);
    b.send({ type: "session.resume", session_id: ready.session_id });
    await b.waitFor((f) => f.type === "session.replay_end");
    b.send({ type: "session.turn", session_id: ready.session_id, prompt: "after the demotion" });
    await b.waitFor((f) => f.type === "task:done");
    expect(b.frames.some((f) => f.type === "task:system_prompt")).toBe(false);
    b.close();
    // Disabling closes with 4001, not 1012, also when the role changes in the same patch.
    const c = await open(u);
    await t.app.services.users.adminPatch(u.id, { role: "admin", disabled: true });
    expect((await c.waitClose(5_000)).code).toBe(4001);
  });

  test("a disconnect never stops the task", async () => {
    mock.enqueue({ text: "slow answer", chunks: 10, delayMs: 50 });
    const c = await open(alice);
    c.send({ type: "task.submit", profile_id: profileId, prompt: "x" });
    const first = await c.waitFor((f) => f.type === "task:token");
    c.close();
    const task = await waitTask(t, alice, first.task_id);
    expect(task.status).toBe("completed");
  });
});
