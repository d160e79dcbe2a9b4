/**
 * Playbook runs in the agent runtime, with a scripted model (a local Anthropic-format server) and
 * real workspaces: multi-chain continuation (turn.continuing numbered in order, a fresh model
 * context, the run ending when continuations run out, limits across chains), unattended questions
 * notified and resumed by an answer, answer timeouts, and the notification at the end of a run.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CONTINUE_TOOL } from "../../src/agents/chains.ts";
import { createProfile, sessionFrames, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { type Receiver, startReceiver } from "../notifications/receiver.ts";

let t: TestApp;
let mock: MockProviderServer;
let receiver: Receiver;
let alice: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  receiver = startReceiver();
  alice = await createUser(t);
  profileId = await createProfile(t, alice, { mock });
  expect((await api(t, "POST", "/v1/integrations", alice.bearer, { type: "webhook", config: { url: receiver.url } })).status).toBe(201);
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
  receiver.stop();
});

async function playbook(over: Record<string, unknown> = {}, profile = profileId) {
  const r = await api(t, "POST", "/v1/playbooks", alice.bearer, { name: "long job", profile_id: profile, prompt: "Migrate the repository.", ...over });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; trigger_url: string };
}
const run = async (id: string, input?: unknown) => {
  const r = await api(t, "POST", `/v1/playbooks/${id}/run`, alice.bearer, input === undefined ? undefined : { input });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body as { task_id: string; session_id: string };
};
const cont = (handoff: string) => ({ toolCalls: [{ name: CONTINUE_TOOL, input: { handoff } }] });
const toolNames = (body: any): string[] => (body.tools ?? []).map((x: { name: string }) => x.name);
const received = (pred: (p: any) => boolean) => receiver.received.map((r) => JSON.parse(r.body)).filter(pred);

describe("multi-chain runs", () => {
  test("asked to continue three times with max_continuations = 2: two turn.continuing frames, numbered 1 and 2, then the run ends saying so", async () => {
    const pb = await playbook({ max_continuations: 2 });
    mock.reset();
    mock.enqueue({ text: "Step one done. ", ...cont("did A; B is next") }, cont("did B; C is next"), cont("did C; D would be next"));
    const { task_id, session_id } = await run(pb.id);
    const task = await waitTask(t, alice, task_id);
    expect(task.status).toBe("completed");
    expect(task.result_text).toContain("did C; D would be next");
    expect(task.result_text).toContain("2 continuations are used up");
    // The run ended on the model's last ContinueInNewChain call: its answer stopped for a tool.
    expect(task.stop_reason).toBe("tool_use");

    const frames = await sessionFrames(t, alice, session_id);
    const continuing = frames.filter((f) => f.type === "turn.continuing");
    expect(continuing.map((f) => [f.continuation, f.max_continuations, f.task_id])).toEqual([
      [1, 2, task_id],
      [2, 2, task_id],
    ]);
    // In order in the transcript: each marker after its chain's tool result, one turn.done at the end.
    const types = frames.map((f) => f.type);
    expect(types.filter((x) => x === "turn.done")).toHaveLength(1);
    expect(frames.find((f) => f.type === "turn.done")!.stop_reason).toBe("tool_use");
    expect(types.indexOf("turn.continuing")).toBeLessThan(types.lastIndexOf("turn.continuing"));
    expect(types.lastIndexOf("turn.continuing")).toBeLessThan(types.indexOf("turn.done"));

    const reqs = mock.requests.map((r) => r.body as any);
    expect(reqs).toHaveLength(3);
    // Offered while continuations are left, not after.
    expect(reqs.map((b) => toolNames(b).includes(CONTINUE_TOOL))).toEqual([true, true, false]);
    // Each new chain is a fresh context: the prompt and the previous hand-off note only.
    expect(reqs[1].messages).toHaveLength(1);
    const second = JSON.stringify(reqs[1].messages);
    expect(second).toContain("Migrate the repository.");
    expect(second).toContain("did A; B is next");
    expect(second).not.toContain("Step one done");
    const third = JSON.stringify(reqs[2].messages);
    expect(third).toContain("did B; C is next");
    expect(third).not.toContain("did A; B is next");
  });

  test("the budget limit stops a run across chains", async () => {
    const priced = await createProfile(t, alice, { mock, pricing: { input_per_mtok: 10_000, output_per_mtok: 0 } });
    // Each request costs input_tokens × $0.01: 300 tokens → $3; the run may spend $5.
    const pb = await playbook({ max_continuations: 5, max_budget_usd: 5 }, priced);
    mock.reset();
    mock.enqueue({ ...cont("one"), usage: { input_tokens: 300, output_tokens: 1 } }, { ...cont("two"), usage: { input_tokens: 300, output_tokens: 1 } }, { text: "never asked for" });
    const { task_id, session_id } = await run(pb.id);
    const task = await waitTask(t, alice, task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("BUDGET_EXCEEDED");
    expect(mock.requests).toHaveLength(2);
    expect((await sessionFrames(t, alice, session_id)).filter((f) => f.type === "turn.continuing")).toHaveLength(2);
  });

  test("a task outside a playbook is never offered the tool, and calling it is refused like any disabled tool", async () => {
    mock.reset();
    mock.enqueue(cont("nope"), { text: "fine" });
    const r = await api(t, "POST", "/v1/tasks", alice.bearer, { profile_id: profileId, prompt: "hi" });
    const task = await waitTask(t, alice, r.body.task_id);
    expect(task.status).toBe("completed");
    expect(toolNames(mock.requests[0]!.body)).not.toContain(CONTINUE_TOOL);
    expect(JSON.stringify(mock.requests[1]!.body)).toContain("is not enabled");
  });
});

describe("unattended questions", () => {
  const ask = { toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Deploy to production?", options: [{ label: "yes" }, { label: "no" }] }] } }] };

  test("a triggered run that asks notifies the owner's webhook, waits, and resumes on the answer; its end is notified too", async () => {
    const pb = await playbook();
    mock.reset();
    mock.enqueue(ask, { text: "Deployed." });
    const r = await api(t, "POST", new URL(pb.trigger_url).pathname, {}, { input: "v1.2" });
    expect(r.status).toBe(202);
    await waitTask(t, alice, r.body.task_id, ["waiting_input"]);
    const asked = await waitFor(() => received((p) => p.task_id === r.body.task_id && p.urgency === "high")[0], { what: "question notification" });
    expect(asked).toMatchObject({ channel: "webhook", source: "platform", playbook_id: pb.id, task_id: r.body.task_id });
    expect(asked.message).toContain("Deploy to production?");
    expect((await api(t, "POST", `/v1/tasks/${r.body.task_id}/answer`, alice.bearer, { answer: "yes" })).status).toBe(202);
    expect((await waitTask(t, alice, r.body.task_id)).status).toBe("completed");
    const ended = await waitFor(() => received((p) => p.task_id === r.body.task_id && /run completed/.test(p.message))[0], { what: "end notification" });
    expect(ended).toMatchObject({ source: "platform", urgency: "normal", playbook_id: pb.id });
    expect(ended.message).toContain('"long job"');
    // The cost and turns as the ending transaction read them (the run asked, then answered: two requests).
    expect(ended.message).toMatch(/cost \$[0-9.]+, 2 model requests\)?$/);
  });

  test("a manual run that asks does not notify (someone is watching)", async () => {
    const pb = await playbook();
    mock.reset();
    mock.enqueue(ask, { text: "ok" });
    const { task_id } = await run(pb.id);
    await waitTask(t, alice, task_id, ["waiting_input"]);
    await Bun.sleep(200);
    expect(received((p) => p.task_id === task_id)).toEqual([]);
    await api(t, "POST", `/v1/tasks/${task_id}/answer`, alice.bearer, { answer: "no" });
    await waitTask(t, alice, task_id);
  });

  test("answer_timeout ends an unanswered run as failed with a clear error (and notifies)", async () => {
    const pb = await playbook({ answer_timeout: 1 });
    mock.reset();
    mock.enqueue(ask);
    const { task_id, session_id } = await run(pb.id);
    const task = await waitTask(t, alice, task_id, ["failed"], 15_000);
    expect(task.error.code).toBe("TURN_LIMIT_EXCEEDED");
    expect(task.error.message).toContain("answer_timeout (1 s)");
    const frames = await sessionFrames(t, alice, session_id);
    expect(frames.find((f) => f.type === "task:tool_result" && f.tool === "AskUserQuestion")?.is_error).toBe(true);
    expect(frames.at(-1)).toMatchObject({ type: "task:failed", code: "TURN_LIMIT_EXCEEDED" });
    await waitFor(() => received((p) => p.task_id === task_id && /run failed/.test(p.message))[0], { what: "failure notification" });
    expect((await api(t, "POST", `/v1/tasks/${task_id}/answer`, alice.bearer, { answer: "late" })).status).toBe(400);
  });

  test("an answer in time clears the deadline", async () => {
    const pb = await playbook({ answer_timeout: 2 });
    mock.reset();
    mock.enqueue(ask, { text: "ok" });
    const { task_id } = await run(pb.id);
    await waitTask(t, alice, task_id, ["waiting_input"]);
    await api(t, "POST", `/v1/tasks/${task_id}/answer`, alice.bearer, { answer: "yes" });
    await waitTask(t, alice, task_id);
    await Bun.sleep(2500);
    expect((await api(t, "GET", `/v1/tasks/${task_id}`, alice.bearer)).body.status).toBe("completed");
  });
});

test("a failed run notifies once, as the playbook's run (not also as a plain task failure)", async () => {
  const pb = await playbook();
  mock.reset();
  mock.enqueue({ error: { status: 400, type: "invalid_request_error", message: "bad request from the test" } });
  const { task_id } = await run(pb.id);
  expect((await waitTask(t, alice, task_id)).status).toBe("failed");
  await waitFor(() => received((p) => p.task_id === task_id)[0], { what: "notification" });
  await Bun.sleep(200);
  const mine = received((p) => p.task_id === task_id);
  expect(mine).toHaveLength(1);
  expect(mine[0]).toMatchObject({ playbook_id: pb.id, urgency: "high" });
  expect(mine[0].message).toContain("MODEL_ERROR");
});
