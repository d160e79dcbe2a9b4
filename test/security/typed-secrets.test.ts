/**
 * A vault secret the user types — pasted into a prompt or an answer to the agent's question — is
 * scrubbed like one a command prints: the task, its session's title, the transcript, the events and
 * the model's requests hold the placeholder, never the value (security.md: "every current value is
 * scrubbed from … events"). End to end: API → orchestrator → agent loop → mock model.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SCRUBBED } from "../../src/agents/scrub.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlAll } from "../helpers/db.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const VALUE = "typed-tok-6f1e0c93b7a2";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  expect((await api(t, "PUT", "/v1/secrets/TYPED", user.bearer, { value: VALUE })).status).toBe(204);
  profileId = await createProfile(t, user, { mock });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

test("a secret pasted into a prompt and into an answer is stored, streamed and sent to the model as the placeholder", async () => {
  const questions = [{ question: "Which token?", header: "Token", options: [{ label: "a" }, { label: "b" }], multiSelect: false }];
  mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions } }] }, { text: "Done." });
  const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: `deploy with ${VALUE} please` });
  await waitTask(t, user, task_id, ["waiting_input"]);
  expect((await api(t, "POST", `/v1/tasks/${task_id}/answer`, user.bearer, { answer: `use ${VALUE}` })).status).toBe(202);
  const task = await waitTask(t, user, task_id);
  expect(task.status).toBe("completed");

  expect(task.prompt).toBe(`deploy with ${SCRUBBED} please`);
  const frames = await sessionFrames(t, user, session_id);
  expect(frames.find((f) => f.type === "task:tool_result")).toMatchObject({ tool: "AskUserQuestion", output: `use ${SCRUBBED}` });
  const session = await api(t, "GET", `/v1/sessions/${session_id}`, user.bearer);
  // The model was sent the placeholder both times.
  const first = JSON.stringify(mock.requests[0]!.body.messages);
  expect(first).toContain(`deploy with ${SCRUBBED} please`);
  expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toBe(`use ${SCRUBBED}`);
  // Nowhere in the answers or the database.
  for (const seen of [JSON.stringify(frames), JSON.stringify(task), JSON.stringify(session.body), JSON.stringify(mock.requests.map((r) => r.body))]) expect(seen).not.toContain(VALUE);
  for (const table of ["tasks", "messages", "events", "sessions"]) {
    const rows = await sqlAll(t, `SELECT * FROM ${table}`);
    expect(JSON.stringify(rows), table).not.toContain(VALUE);
  }
});
