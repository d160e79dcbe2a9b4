/**
 * /v1/tasks: the route scenario table (credentials, someone else's task, bad input, success), on a
 * real app with a local Anthropic-format model server and real workspaces.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { newId } from "../../../src/db/ids.ts";
import { sessions, tasks } from "../../../src/db/tables.ts";
import { createProfile, waitTask } from "../../helpers/agent.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let a: Actors;
const profiles = new Map<string, string>();

beforeAll(async () => {
  t = await startTestApp();
  // Queued turns first (a question), else a plain answer.
  mock = startMockAnthropic().script(() => ({ text: "ok" }));
  a = await actors(t);
  for (const u of [a.owner, a.other]) profiles.set(u.id, await createProfile(t, u, { mock }));
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

/** A finished task of `user` (rows only: the routes read and refuse, nothing runs). */
async function finishedTask(_a: Actors, user: TestUser): Promise<string> {
  const now = Date.now();
  const sessionId = newId("session");
  const id = newId("task");
  const { db } = t.app.services;
  await db.insert(sessions).values({ id: sessionId, user_id: user.id, profile_id: profiles.get(user.id)!, created_at: now, updated_at: now });
  await db.insert(tasks).values({ id, user_id: user.id, session_id: sessionId, profile_id: profiles.get(user.id)!, prompt: "p", status: "completed", max_turns: 5, max_budget_usd: 1, created_at: now, finished_at: now });
  return id;
}

/** A task of `user` waiting for the answer to a question (a real run). */
async function waitingTask(_a: Actors, user: TestUser): Promise<string> {
  mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Go?", options: [{ label: "yes" }] }] } }] }, { text: "went" });
  const r = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: profiles.get(user.id), prompt: "ask me" });
  await waitTask(t, user, r.body.task_id, ["waiting_input"]);
  return r.body.task_id;
}

const submit = (prompt = "hello") => () => ({ profile_id: profiles.get(a.owner.id), prompt });

routeTable("/v1/tasks", () => a, [
  {
    route: "POST /v1/tasks",
    body: submit(),
    invalid: [
      { name: "no prompt", body: { profile_id: "prof_x" }, field: "prompt" },
      { name: "an empty prompt", body: { profile_id: "prof_x", prompt: "" }, field: "prompt" },
      { name: "a prompt of only whitespace (a model refuses it)", body: { profile_id: "prof_x", prompt: " \n\t " }, field: "prompt" },
      { name: "a negative max_turns", body: { profile_id: "prof_x", prompt: "p", max_turns: -1 }, field: "max_turns" },
      { name: "an unknown field", body: { profile_id: "prof_x", prompt: "p", priority: 1 }, field: "priority" },
      { name: "neither profile_id nor session_id", body: { prompt: "p" }, field: "profile_id" },
      { name: "a mode other than session", body: { mode: "batch", profile_id: "prof_x", prompt: "p" }, field: "mode" },
    ],
    success: 202,
    check: async (r) => {
      expect(r.body.task_id).toMatch(/^task_/);
      expect(r.body.session_id).toMatch(/^sess_/);
      expect(r.body.status).toBe("queued");
      expect((await waitTask(t, a.owner, r.body.task_id)).status).toBe("completed");
    },
  },
  {
    route: "GET /v1/tasks",
    query: "limit=5",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=1e1 (decimal digits only)", query: "limit=1e1", field: "limit" },
      { name: "limit=0x10", query: "limit=0x10", field: "limit" },
      { name: "limit=%201", query: "limit=%201", field: "limit" },
      { name: "limit given twice", query: "limit=500&limit=1", field: "limit" },
      { name: "cursor given twice", query: `limit=5&cursor=task_${"0".repeat(26)}&cursor=task_${"z".repeat(26)}`, field: "cursor" },
      { name: "an unknown status", query: "status=sleeping", field: "status" },
    ],
    success: 200,
    check: (r) => {
      expect(Array.isArray(r.body.data)).toBe(true);
      expect(r.body).toHaveProperty("next_cursor");
    },
  },
  { route: "GET /v1/tasks/:id", record: finishedTask, success: 200, check: (r, _a, id) => expect(r.body).toMatchObject({ id, status: "completed", error: null }) },
  {
    route: "POST /v1/tasks/:id/cancel",
    record: finishedTask,
    invalid: [{ name: "a body (the route takes none)", body: { reason: "x", force: true }, field: "reason" }],
    success: 202,
    viaCookie: true,
    check: (r) => expect(r.body.status).toBe("completed"),
  },
  {
    route: "POST /v1/tasks/:id/answer",
    record: finishedTask,
    successRecord: waitingTask,
    body: () => ({ answer: "yes" }),
    invalid: [
      { name: "an empty answer", body: { answer: "" }, field: "answer" },
      { name: "a blank answer", body: { answer: " \n " }, field: "answer" },
      { name: "no answer", body: {}, field: "answer" },
      { name: "a task that is not waiting", body: { answer: "yes" }, field: "task_id" },
    ],
    success: 202,
    check: async (r, _a, id) => {
      expect(r.body.status).toBe("running");
      expect((await waitTask(t, a.owner, id!)).status).toBe("completed");
    },
  },
]);

test("POST /v1/tasks with someone else's profile or session → 404, like a missing one", async () => {
  const theirs = await api(t, "POST", "/v1/tasks", a.other.bearer, { profile_id: profiles.get(a.other.id), prompt: "mine" });
  expect(theirs.status).toBe(202);
  for (const body of [{ profile_id: profiles.get(a.other.id), prompt: "x" }, { session_id: theirs.body.session_id, prompt: "x" }]) {
    const r = await api(t, "POST", "/v1/tasks", a.owner.bearer, body);
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("NOT_FOUND");
  }
  await waitTask(t, a.other, theirs.body.task_id);
});

test("POST /v1/tasks takes null in an optional field as absent (a client that sends every field); a null prompt is still refused", async () => {
  const body = { mode: null, profile_id: profiles.get(a.owner.id), session_id: null, prompt: "nulls", max_turns: null, max_budget_usd: null, repositories: null };
  const r = await api(t, "POST", "/v1/tasks", a.owner.bearer, body);
  expect(r.status).toBe(202);
  const task = await waitTask(t, a.owner, r.body.task_id);
  // The profile's limits, as when the fields are left out.
  expect(task).toMatchObject({ status: "completed", session_id: r.body.session_id });
  expect(task.max_turns).toBeGreaterThan(0);
  const bad = await api(t, "POST", "/v1/tasks", a.owner.bearer, { ...body, prompt: null });
  expect([bad.status, bad.body.details?.field]).toEqual([400, "prompt"]);
});
