/**
 * U+0000 (src/lib/json-input.ts, src/db/pg/storable.ts). PostgreSQL cannot store it, SQLite can: a NUL in
 * a request used to be stored on one database and a 500 on the other (a prompt, a playbook, an
 * email at sign-up, a list filter), and a model's text or a command's output holding one failed the
 * turn with INTERNAL_ERROR on PostgreSQL. Requests holding it are now 400 naming the field on both
 * (a path: 404); what comes from elsewhere is kept (U+FFFD where PostgreSQL stores it). This file
 * runs on SQLite and again on PostgreSQL (.ci/run).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createProfile, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp({ flags: ["--signup", "open"] });
  mock = startMockAnthropic();
  user = await createUser(t);
  profileId = await createProfile(t, user, { mock, tools: ["Bash"] });
});
afterAll(async () => {
  await t?.stop();
  await mock?.stop();
});

const noErrorLogs = (from: number) => expect(t.logs.slice(from).filter((l) => JSON.parse(l).level === "error")).toEqual([]);

describe("a request holding U+0000", () => {
  const bodies: [string, string, () => Record<string, unknown>, string][] = [
    ["POST", "/v1/tasks", () => ({ profile_id: profileId, prompt: "a\u0000b" }), "prompt"],
    ["POST", "/v1/playbooks", () => ({ name: "nightly", profile_id: profileId, prompt: "a\u0000b" }), "prompt"],
    ["POST", "/v1/profiles", () => ({ name: "p", env: { A: "x", B: "y\u0000" } }), "env.B"],
    ["POST", "/v1/profiles", () => ({ name: "p", repositories: [{ url: "https://example.com/a\u0000.git" }] }), "repositories[0].url"],
    ["POST", "/v1/notifications", () => ({ message: "hi", ["k\u0000"]: 1 }), "k\u0000"],
  ];
  test.each(bodies)("%s %s → 400 naming the field", async (method, path, body, field) => {
    const from = t.logs.length;
    const r = await api(t, method, path, user.bearer, body());
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field, reason: "NUL character" } });
    expect(r.body.error).toContain("must not contain NUL (U+0000) characters");
    noErrorLogs(from);
  });

  test("sign-up and sign-in with a NUL in the email or name → 400, no account", async () => {
    const from = t.logs.length;
    for (const [path, body, field] of [
      ["/api/auth/sign-up/email", { name: "n", email: "nu\u0000l@example.com", password: "long enough 1" }, "email"],
      ["/api/auth/sign-up/email", { name: "a\u0000b", email: "nul-name@example.com", password: "long enough 1" }, "name"],
      ["/api/auth/sign-in/email", { email: "nu\u0000l@example.com", password: "long enough 1" }, "email"],
    ] as const) {
      const r = await fetch(`${t.url}${path}`, { method: "POST", headers: { "content-type": "application/json", origin: t.url }, body: JSON.stringify(body) });
      expect(r.status).toBe(400);
      expect((await r.json()).details.field).toBe(field);
    }
    const ok = await fetch(`${t.url}/api/auth/sign-up/email`, { method: "POST", headers: { "content-type": "application/json", origin: t.url }, body: JSON.stringify({ name: "n", email: "nul-name@example.com", password: "long enough 1" }) });
    expect(ok.status).toBe(200);
    noErrorLogs(from);
  });

  test("a query parameter → 400 naming it; a path → 404; the same without the NUL answers", async () => {
    const from = t.logs.length;
    for (const q of ["session_id=a%00b", "status=%00", "limit=5&cursor=%00"]) {
      const r = await api(t, "GET", `/v1/tasks?${q}`, user.bearer);
      expect(r.status, q).toBe(400);
      expect(r.body.details.reason).toBe("NUL character");
    }
    expect((await api(t, "GET", `/v1/tasks?session_id=a%00b`, user.bearer)).body.details.field).toBe("session_id");
    expect((await api(t, "GET", "/v1/profiles/prof_a%00b", user.bearer)).status).toBe(404);
    expect((await api(t, "GET", "/v1/sessions/%00", user.bearer)).status).toBe(404);
    // The credential still comes first.
    expect((await api(t, "GET", "/v1/tasks?session_id=a%00b")).status).toBe(401);
    expect((await api(t, "GET", "/v1/tasks?limit=5", user.bearer)).status).toBe(200);
    noErrorLogs(from);
  });

  test("a stream frame → error frame VALIDATION_FAILED naming the field; the socket stays open", async () => {
    const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
    c.send({ type: "task.submit", mode: "session", profile_id: profileId, prompt: "a\u0000b", request_id: "n1" });
    expect(await c.waitFor((f) => f.type === "error" && f.request_id === "n1")).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "prompt" } });
    c.send({ type: "session.resume", session_id: "sess_nope", request_id: "n2" });
    expect(await c.waitFor((f) => f.type === "error" && f.request_id === "n2")).toMatchObject({ code: "NOT_FOUND" });
    expect(c.closed).toBeNull();
    c.close();
  });
});

test("a model's text and a command's output holding U+0000: the turn completes, every frame kept", async () => {
  mock.reset();
  mock.enqueue({ text: "before\u0000after", toolCalls: [{ name: "Bash", input: { command: "printf 'x\\000y'" } }] }, { text: "done\u0000!" });
  const from = t.logs.length;
  const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "go" });
  const task = await waitTask(t, user, task_id);
  expect(task.status, JSON.stringify(task.error)).toBe("completed");
  expect(["done\u0000!", "done\uFFFD!"]).toContain(task.result_text);
  const frames = await sessionFrames(t, user, session_id);
  expect(frames.find((f) => f.type === "task:tool_result")?.output).toStartWith("x\u0000y");
  expect(frames.find((f) => f.type === "turn.done")?.result_text).toBe("done\u0000!");
  // The transcript went back to the model with the output in it.
  expect(JSON.stringify(mock.requests[1]!.body)).toMatch(/x(\\u0000|\uFFFD)y/);
  noErrorLogs(from);
});

describe("other JSON a client may not send (src/lib/json-input.ts)", () => {
  const deep = (n: number) => `{"profile_id":"x","prompt":"p","extra":${"[".repeat(n)}${"]".repeat(n)}}`;
  test("nesting deeper than 64 levels: 400 before it is parsed, in a body and a stream message; 64 levels are read", async () => {
    const from = t.logs.length;
    for (const n of [65, 30_000, 400_000]) {
      const r = await t.fetch("/v1/tasks", { method: "POST", headers: { ...user.bearer, "content-type": "application/json" }, body: deep(n) });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { details: { reason: string } }).details.reason).toBe("too deep");
    }
    const ok = await t.fetch("/v1/tasks", { method: "POST", headers: { ...user.bearer, "content-type": "application/json" }, body: deep(63) });
    expect(((await ok.json()) as { details: { field: string } }).details.field).toBe("extra"); // read, then refused as an unknown field
    const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
    c.send(`{"type":"task.cancel","task_id":"task_x","request_id":"d1","x":${"[".repeat(100_000)}"\\u0000"${"]".repeat(100_000)}}`);
    expect(await c.waitFor((f) => f.type === "error" && f.request_id === "d1")).toMatchObject({ code: "VALIDATION_FAILED", details: { reason: "too deep" } });
    c.close();
    noErrorLogs(from);
  });

  test("a lone surrogate or a __proto__ key: 400 naming the field, not stored changed or dropped", async () => {
    const r = await api(t, "POST", "/v1/api-tokens", user.bearer, '{"name":"a\\ud800b"}');
    expect(r.status).toBe(400);
    expect(r.body.details).toMatchObject({ field: "name", reason: "lone surrogate" });
    const p = await api(t, "POST", "/v1/profiles", user.bearer, '{"name":"p","env":{"__proto__":"x"}}');
    expect(p.status).toBe(400);
    expect(p.body.details).toMatchObject({ field: "env.__proto__", reason: "__proto__ key" });
    // Also spelled with an escape.
    const escaped = await api(t, "POST", "/v1/profiles", user.bearer, '{"name":"p","env":{"\\u005f_proto__":"x"}}');
    expect(escaped.status).toBe(400);
    expect(escaped.body.details).toMatchObject({ field: "env.__proto__", reason: "__proto__ key" });
    // A well-formed pair is a character like any other.
    expect((await api(t, "POST", "/v1/api-tokens", user.bearer, { name: "emoji 😀" })).status).toBe(201);
  });

  test("a compressed body (Content-Encoding) is 400, not read as JSON", async () => {
    const body = Bun.gzipSync(JSON.stringify({ name: "zipped" }));
    const r = await t.fetch("/v1/api-tokens", { method: "POST", headers: { ...user.bearer, "content-type": "application/json", "content-encoding": "gzip" }, body });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { details: { field: string } }).details.field).toBe("content-encoding");
  });
});
