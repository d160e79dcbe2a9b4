/**
 * The stream protocol as data: the AsyncAPI 3 document at /v1/asyncapi.json is valid (AsyncAPI's
 * own parser), public, and lists every client message and server frame; the ServerFrame union
 * refuses malformed frames; and a real session — a tool call, a question, an error frame, a replay
 * — sends only frames the union describes (the test client checks every frame it receives).
 */
import { Parser } from "@asyncapi/parser";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CLIENT_MESSAGES, SERVER_FRAMES, ServerFrame } from "../../src/schema/stream.ts";
import { matches } from "../../src/schema/validate.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createProfile } from "../helpers/agent.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let mock: MockProviderServer;
let alice: TestUser;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  alice = await createUser(t);
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

const typeOf = (s: unknown) => (s as { properties: { type: { const: string } } }).properties.type.const;

describe("GET /v1/asyncapi.json", () => {
  test("is a valid AsyncAPI 3 document, served without a credential", async () => {
    const res = await t.fetch("/v1/asyncapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const text = await res.text();
    const { document, diagnostics } = await new Parser().parse(text);
    const errors = diagnostics.filter((d) => d.severity === 0);
    expect(errors.map((d) => `${d.message} at ${d.path.join(".")}`)).toEqual([]);
    expect(document).toBeDefined();
    expect(document!.version()).toBe("3.0.0");
    const channel = document!.channels().get("stream")!;
    expect(channel.address()).toBe("/v1/stream");
    const names = document!.messages().all().map((m) => m.name());
    expect(names.sort()).toEqual([...Object.keys(CLIENT_MESSAGES), ...SERVER_FRAMES.map(typeOf)].sort());
    const ops = document!.operations().all();
    expect(ops.map((o) => o.action()).sort()).toEqual(["receive", "send"]);
  });

  test("each message's payload is the schema the server uses", async () => {
    const doc = (await (await t.fetch("/v1/asyncapi.json")).json()) as { components: { messages: Record<string, { name: string; payload: unknown }> } };
    const byName = Object.fromEntries(Object.values(doc.components.messages).map((m) => [m.name, m.payload]));
    expect(byName["task.cancel"]).toEqual(JSON.parse(JSON.stringify(CLIENT_MESSAGES["task.cancel"])));
    // A submission's optional fields whose null is taken as absent are documented as nullable.
    const submit = byName["task.submit"] as { properties: Record<string, { type?: unknown; enum?: unknown; description?: string }> };
    expect(submit.properties.session_id!.type).toEqual(["string", "null"]);
    expect(submit.properties.mode!.enum).toEqual(["session", null]);
    expect(submit.properties.max_turns!.description).toEndWith("null is taken as absent");
    expect(submit.properties.prompt!.type).toBe("string");
    expect(JSON.stringify(doc)).not.toContain("x-null-as-absent");
    expect(byName["task:token"]).toEqual(JSON.parse(JSON.stringify(SERVER_FRAMES.find((s) => typeOf(s) === "task:token"))));
  });

  test("the OpenAPI document and /docs point to it", async () => {
    const spec = (await (await t.fetch("/v1/openapi.json")).json()) as { info: { description: string }; paths: Record<string, unknown> };
    expect(spec.info.description).toContain("/v1/asyncapi.json");
    expect(spec.paths["/v1/asyncapi.json"]).toBeUndefined();
    // /docs is a view of the dashboard's app: the link is in its script.
    const page = await (await t.fetch("/docs")).text();
    const script = /<script type="module" src="([^"]+)"/.exec(page)![1]!;
    expect(await (await t.fetch(script)).text()).toContain("/v1/asyncapi.json");
  });
});

describe("the ServerFrame union", () => {
  test.each([
    ["a token without text", { type: "task:token", session_id: "sess_x", task_id: "task_x", seq: 1 }],
    ["an unknown type", { type: "task:telepathy", session_id: "sess_x", seq: 1 }],
    ["a seq of 0", { type: "task:token", session_id: "sess_x", task_id: "task_x", seq: 0, text: "a" }],
    ["task:done with a status it never has", { type: "task:done", session_id: "sess_x", task_id: "task_x", seq: 2, status: "running" }],
    ["an error frame with a code outside the interface's", { type: "error", code: "OOPS", message: "x" }],
  ])("refuses %s", (_name, frame) => {
    expect(matches(ServerFrame, frame)).toBe(false);
  });

  test("accepts the frames of the interface", () => {
    expect(matches(ServerFrame, { type: "task:token", session_id: "sess_x", task_id: "task_x", seq: 3, text: "a" })).toBe(true);
    expect(matches(ServerFrame, { type: "error", code: "NOT_FOUND", message: "x", request_id: "r1" })).toBe(true);
    expect(matches(ServerFrame, { type: "session.replay_end", session_id: "sess_x", last_seq: 0 })).toBe(true);
  });
});

test("a real session sends only frames the union describes", async () => {
  const profileId = await createProfile(t, alice, { mock });
  mock.enqueue(
    { text: "Looking. ", toolCalls: [{ name: "Bash", input: { command: "echo hi" } }] },
    { toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Go on?", options: [{ label: "yes" }] }] } }] },
    { text: "Done." },
  );
  const c = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${alice.token}`] });
  c.send({ type: "session.turn", session_id: "sess_nope", prompt: "x", request_id: "r-404" });
  await c.waitFor((f) => f.type === "error" && f.request_id === "r-404");
  c.send({ type: "task.submit", profile_id: profileId, prompt: "work" });
  const ask = await c.waitFor((f) => f.type === "task:ask_user");
  c.send({ type: "task.answer", task_id: ask.task_id, answer: "yes" });
  const done = await c.waitFor((f) => f.type === "task:done");
  const r = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${alice.token}`] });
  r.send({ type: "session.resume", session_id: done.session_id });
  await r.waitFor((f) => f.type === "session.replay_end");
  for (const client of [c, r]) expect(client.invalid).toEqual([]);
  const seen = new Set([...c.frames, ...r.frames].map((f) => f.type));
  for (const type of ["error", "session.ready", "task:token", "task:tool_use", "task:tool_result", "task:ask_user", "turn.done", "task:done", "session.replay_start", "session.replay_end"]) {
    expect(seen.has(type)).toBe(true);
  }
  c.close();
  r.close();
});
