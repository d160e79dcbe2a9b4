/**
 * The runtime's notifications reach the user's webhook, signed: the agent's Notify tool
 * (source agent) and the platform's notice when a task fails (source platform, written in the
 * transaction that fails the task).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { createProfile, lastToolResults, submit, waitTask } from "../helpers/agent.ts";
import { waitFor } from "../helpers/net.ts";
import { type Receiver, startReceiver } from "../notifications/receiver.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let receiver: Receiver;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  receiver = startReceiver({ secret: "whsec_runtime" });
  profileId = await createProfile(t, user, { mock });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
  receiver.stop();
});

test("without a webhook, the Notify tool tells the model how to configure one", async () => {
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "Notify", input: { message: "done!" } }] }, { text: "ok" });
  const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "notify" });
  await waitTask(t, user, task_id);
  const [r] = lastToolResults(mock.requests[1]!.body);
  expect(r).toMatchObject({ is_error: true });
  expect(r!.content).toContain("POST /v1/integrations");
});

test("Notify (source agent) and a failed task (source platform) are delivered, signed", async () => {
  const integ = await api(t, "POST", "/v1/integrations", user.bearer, { type: "webhook", config: { url: receiver.url, secret: "whsec_runtime" } });
  expect(integ.status).toBe(201);
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "Notify", input: { message: "Report is ready", urgency: "high" } }] }, { text: "Sent." });
  const ok = await submit(t, user, { profile_id: profileId, prompt: "notify" });
  await waitTask(t, user, ok.task_id);
  expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toMatch(/^Notification queued \(ntf_/);

  mock.enqueue({ error: { status: 400, message: "prompt is too long" } });
  const bad = await submit(t, user, { session_id: ok.session_id, prompt: "fail please" });
  expect((await waitTask(t, user, bad.task_id)).status).toBe("failed");

  const got = await waitFor(() => (receiver.received.length >= 2 ? receiver.received : null), { timeoutMs: 15_000, what: "two deliveries" });
  const bodies = got.map((r) => JSON.parse(r.body));
  const agent = bodies.find((b) => b.source === "agent");
  const platform = bodies.find((b) => b.source === "platform");
  expect(agent).toMatchObject({ channel: "webhook", urgency: "high", message: "Report is ready", task_id: ok.task_id });
  expect(platform).toMatchObject({ channel: "webhook", source: "platform", task_id: bad.task_id });
  expect(platform.message).toContain("MODEL_ERROR");
  expect(platform.message).toContain("HTTP 400");
  for (const r of got) {
    expect(r.hmacOk).toBe(true);
    expect(r.stripeOk).toBe(true);
  }
});

test("Notify inside a playbook run carries the playbook's id, as the platform's notices of that run do", async () => {
  const pb = await api(t, "POST", "/v1/playbooks", user.bearer, { name: "nightly report", profile_id: profileId, prompt: "Report." });
  expect(pb.status, JSON.stringify(pb.body)).toBe(201);
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "Notify", input: { message: "Nightly report is ready" } }] }, { text: "Sent." });
  const run = await api(t, "POST", `/v1/playbooks/${pb.body.id}/run`, user.bearer);
  expect(run.status, JSON.stringify(run.body)).toBe(202);
  const taskId = run.body.task_id as string;
  expect((await waitTask(t, user, taskId)).status).toBe("completed");

  const fromAgent = await waitFor(
    () => receiver.received.map((r) => JSON.parse(r.body)).find((b) => b.source === "agent" && b.task_id === taskId),
    { timeoutMs: 15_000, what: "the agent's notification" },
  );
  expect(fromAgent).toMatchObject({ urgency: "normal", message: "Nightly report is ready", task_id: taskId, playbook_id: pb.body.id });
  // Keys in the interface's order, playbook_id last.
  expect(Object.keys(fromAgent)).toEqual(["channel", "urgency", "message", "source", "sent_at", "task_id", "playbook_id"]);
  const ended = await waitFor(() => receiver.received.map((r) => JSON.parse(r.body)).find((b) => b.source === "platform" && b.task_id === taskId), { what: "the run's end notice" });
  expect(ended.playbook_id).toBe(pb.body.id);

  // Outside a playbook run there is no playbook_id at all.
  const plain = receiver.received.map((r) => JSON.parse(r.body)).find((b) => b.source === "agent" && b.message === "Report is ready");
  expect(plain).toBeDefined();
  expect("playbook_id" in plain).toBe(false);
});
