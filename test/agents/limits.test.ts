/**
 * Limits and failures of the runtime: turn and budget limits, cancel within 2 s, a container
 * killed mid-task, provider errors after retries, the per-profile concurrency race, and secrets
 * that reach the container but never logs, events or the model.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { setRetryPolicy } from "../../src/agents/providers/index.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, api, type TestUser } from "../helpers/users.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { waitFor } from "../helpers/net.ts";
import { ADMIN_PASSWORD } from "../helpers/scenarios.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;

beforeAll(async () => {
  setRetryPolicy({ retries: 2, baseDelayMs: 5, maxDelayMs: 20 });
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
});
afterAll(async () => {
  setRetryPolicy({ retries: 3, baseDelayMs: 1000, maxDelayMs: 16_000 });
  await t.stop();
  await mock.stop();
});

const docker = (...args: string[]) => Bun.spawnSync(["docker", ...args], { stdout: "pipe", stderr: "pipe" });

/** The session's frames once its task has called a tool (the command then runs in the workspace). */
const framesAtToolUse = (sessionId: string) =>
  waitFor(
    async () => {
      const f = await sessionFrames(t, user, sessionId);
      return f.some((x) => x.type === "task:tool_use") ? f : null;
    },
    { what: "tool_use" },
  );

describe("limits", () => {
  test("max_turns stops the task before the next model request", async () => {
    mock.reset();
    mock.script(() => ({ toolCalls: [{ name: "Bash", input: { command: "true" } }] }));
    const pid = await createProfile(t, user, { mock, limits: { max_turns: 2 } });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "loop forever" });
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "failed", turns: 2, error: { code: "TURN_LIMIT_EXCEEDED" } });
    expect(mock.requests.length).toBe(2);
    const last = (await sessionFrames(t, user, session_id)).at(-1);
    expect(last).toMatchObject({ type: "task:failed", task_id, code: "TURN_LIMIT_EXCEEDED", error: expect.stringContaining("max_turns") });
  });

  test("max_budget_usd stops the task once the cost reaches it; a per-task override works", async () => {
    mock.reset();
    mock.script(() => ({ toolCalls: [{ name: "Bash", input: { command: "true" } }], usage: { input_tokens: 1000, output_tokens: 0 } }));
    // $1 per 1,000 input tokens: every request costs $1.
    const pid = await createProfile(t, user, { mock, pricing: { input_per_mtok: 1000, output_per_mtok: 0 } });
    const { task_id } = await submit(t, user, { profile_id: pid, prompt: "spend", max_budget_usd: 2.5 });
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "failed", error: { code: "BUDGET_EXCEEDED" }, turns: 3, max_budget_usd: 2.5 });
    expect(task.cost_usd).toBeCloseTo(3, 6);
    expect(mock.requests.length).toBe(3);
  });

  test("max_budget_usd is reached when the cost adds up to it, though its float sum falls a hair short (0.7 + 0.1)", async () => {
    mock.reset();
    const inputs = [700_000, 100_000, 100_000];
    mock.script((req) => ({ toolCalls: [{ name: "Bash", input: { command: "true" } }], usage: { input_tokens: inputs[req.index] ?? 100_000, output_tokens: 0 } }));
    // $1 per million input tokens: $0.70, then $0.10 — 0.7 + 0.1 is 0.7999999999999999 in binary floating point.
    const pid = await createProfile(t, user, { mock, pricing: { input_per_mtok: 1, output_per_mtok: 0 } });
    const { task_id } = await submit(t, user, { profile_id: pid, prompt: "spend", max_budget_usd: 0.8 });
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "failed", error: { code: "BUDGET_EXCEEDED" }, turns: 2, cost_usd: 0.8 });
    expect(mock.requests.length).toBe(2);
  });

  test("a final answer whose cost reaches max_budget_usd ends the task failed BUDGET_EXCEEDED: its answer is kept and shown, task:failed follows turn.done", async () => {
    mock.reset();
    mock.enqueue({ text: "All done.", usage: { input_tokens: 1000, output_tokens: 0 } });
    // $1 per 1,000 input tokens: the one request costs $1, over the $0.5 budget.
    const pid = await createProfile(t, user, { mock, pricing: { input_per_mtok: 1000, output_per_mtok: 0 } });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "one answer", max_budget_usd: 0.5 });
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "failed", error: { code: "BUDGET_EXCEEDED" }, turns: 1, result_text: "All done.", max_budget_usd: 0.5 });
    expect(task.cost_usd).toBeCloseTo(1, 6);
    expect(mock.requests.length).toBe(1);
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.slice(-2).map((f: { type: string }) => f.type)).toEqual(["turn.done", "task:failed"]);
    expect(frames.at(-1)).toMatchObject({ code: "BUDGET_EXCEEDED" });
  });

  test("a profile deleted while its task runs: the task's next command does not run without the profile's environment; the task ends NOT_FOUND", async () => {
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: "echo V=$V; sleep 2" } }] },
      { toolCalls: [{ name: "Bash", input: { command: "echo V=$V > /workspace/after.txt" } }] },
      { text: "never asked" },
    );
    const pid = await createProfile(t, user, { mock, env: { V: "one" } });
    const { task_id } = await submit(t, user, { profile_id: pid, prompt: "two commands" });
    await waitFor(() => mock.requests.length >= 1 || null, { what: "the first command" });
    await Bun.sleep(500);
    expect((await api(t, "DELETE", `/v1/profiles/${pid}`, user.bearer)).status).toBe(204);
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "failed", error: { code: "NOT_FOUND", message: `Profile ${pid} no longer exists` } });
    // The first command ran with its environment; the model was not asked again after the second was refused.
    expect(JSON.stringify(lastToolResults(mock.requests[1]!.body))).toContain("V=one");
    expect(mock.requests.length).toBe(2);
  });

  test("a spent limit is refused at submit: max_turns 0 → 422, max_budget_usd 0 → 402", async () => {
    const pid = await createProfile(t, user, { mock });
    const turns = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: pid, prompt: "x", max_turns: 0 });
    expect(turns.status).toBe(422);
    expect(turns.body.code).toBe("TURN_LIMIT_EXCEEDED");
    const budget = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: pid, prompt: "x", max_budget_usd: 0 });
    expect(budget.status).toBe(402);
    expect(budget.body.code).toBe("BUDGET_EXCEEDED");
  });

  // The local server is on loopback: its answer is not echoed (test/security/model-ssrf.test.ts).
  test("provider 500s are retried, then the task fails with MODEL_ERROR and the status (a private host's answer is not shown)", async () => {
    mock.reset();
    for (let i = 0; i < 3; i++) mock.enqueue({ error: { status: 500, message: "upstream exploded" } });
    const pid = await createProfile(t, user, { mock });
    const { task_id } = await submit(t, user, { profile_id: pid, prompt: "x" });
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(task.error.message).toContain("HTTP 500");
    expect(task.error.message).not.toContain("upstream exploded");
    expect(mock.requests.length).toBe(3);
  });
});

describe("stopping work", () => {
  test("cancel during `sleep 60` ends the task within 2 s and kills the process", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 60" } }] });
    const pid = await createProfile(t, user, { mock });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "sleep" });
    await framesAtToolUse(session_id);
    await Bun.sleep(200);
    const started = performance.now();
    const r = await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer);
    // Answered once the loop has ended it: a crash after the 202 cannot lose the cancel.
    expect([r.status, r.body.status]).toEqual([202, "cancelled"]);
    const task = await waitTask(t, user, task_id, ["cancelled", "failed", "completed"], 5000);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(task.status).toBe("cancelled");
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.find((f) => f.type === "task:tool_result")?.output).toContain("[cancelled by the user]");
    expect(frames.at(-1)).toMatchObject({ type: "task:done", status: "cancelled" });
    const ws = (await api(t, "GET", `/v1/workspaces/${frames[0].container_id}`, user.bearer)).body;
    const ps = docker("exec", ws.name, "ps");
    expect(ps.stdout.toString()).not.toContain("sleep 60");
    // Idempotent.
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).body.status).toBe("cancelled");
  });

  // The interface: task:done "fires alongside turn.done" for session tasks, and a client replaces
  // what it streamed with turn.done's result_text — a cancelled turn's is what it had streamed.
  test("a cancelled turn ends with turn.done (result_text: what it had streamed) then task:done; a queued one with an empty result", async () => {
    mock.reset();
    mock.enqueue({ text: ["Half ", "an ", "answer ", "and more"], usage: { input_tokens: 12, output_tokens: 4 }, hangAfter: 3 });
    const pid = await createProfile(t, user, { mock });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "stream" });
    const queued = await submit(t, user, { session_id, prompt: "after it" });
    const streamed = async () => (await sessionFrames(t, user, session_id)).filter((f) => f.type === "task:token").map((f) => f.text).join("");
    for (let i = 0; i < 100 && (await streamed()) !== "Half an answer "; i++) await Bun.sleep(50);
    expect((await api(t, "POST", `/v1/tasks/${queued.task_id}/cancel`, user.bearer)).status).toBe(202);
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    const frames = await sessionFrames(t, user, session_id);
    const ofTask = (id: string) => frames.filter((f) => f.task_id === id && (f.type === "turn.done" || f.type === "task:done"));
    const task = await waitTask(t, user, task_id, ["cancelled"]);
    expect(ofTask(task_id)).toEqual([
      expect.objectContaining({ type: "turn.done", result_text: "Half an answer ", input_tokens: task.input_tokens, output_tokens: task.output_tokens, cost_usd: task.cost_usd }),
      expect.objectContaining({ type: "task:done", status: "cancelled" }),
    ]);
    expect(task.result_text).toBe("Half an answer ");
    expect(ofTask(queued.task_id)).toEqual([
      expect.objectContaining({ type: "turn.done", result_text: "", input_tokens: 0, output_tokens: 0, cost_usd: 0 }),
      expect.objectContaining({ type: "task:done", status: "cancelled" }),
    ]);
    // Every token of the turn came before its turn.done.
    const doneAt = frames.findIndex((f) => f.task_id === task_id && f.type === "turn.done");
    expect(frames.findLastIndex((f) => f.task_id === task_id && f.type === "task:token")).toBeLessThan(doneAt);

    // The session's next turn: the model sees the cancelled answer as far as it went, marked, after
    // its prompt (the queued task, cancelled before it ran, left nothing in the conversation).
    mock.reset();
    mock.enqueue({ text: "Fine." });
    const next = await submit(t, user, { session_id, prompt: "go on" });
    expect((await waitTask(t, user, next.task_id)).status).toBe("completed");
    expect(mock.requests[0]!.body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "stream" }] },
      { role: "assistant", content: [{ type: "text", text: "Half an answer \n\n[the user cancelled this answer here]" }] },
      { role: "user", content: [{ type: "text", text: "go on" }] },
    ]);
  });

  // Removing the workspace stops its session's running task the way deleting the session does:
  // cancelled, its frames ending with task:done — nothing left running, the session kept.
  const removals = [
    { who: "an admin", remove: (ctr: string) => api(t, "DELETE", `/admin/workspaces/${ctr}`, { authorization: `Bearer ${ADMIN_PASSWORD}` }) },
    { who: "its owner", remove: (ctr: string) => api(t, "DELETE", `/v1/workspaces/${ctr}`, user.bearer) },
  ];
  for (const { who, remove } of removals) {
    test(`${who} removing the workspace during \`sleep 60\` ends the task cancelled within 2 s`, async () => {
      await t.app.services.adminPassword.set(ADMIN_PASSWORD);
      mock.reset();
      mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 60" } }] }, { text: "never" });
      const pid = await createProfile(t, user, { mock });
      const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "sleep" });
      const frames0 = await framesAtToolUse(session_id);
      await Bun.sleep(200);
      const ws = (await api(t, "GET", `/v1/workspaces/${frames0[0].container_id}`, user.bearer)).body;
      const started = performance.now();
      expect((await remove(ws.id)).status).toBe(204);
      const task = await waitTask(t, user, task_id, ["cancelled", "failed", "completed"], 5000);
      expect(performance.now() - started).toBeLessThan(2000);
      expect(task.status).toBe("cancelled");
      expect(docker("inspect", ws.name).exitCode).not.toBe(0);
      const frames = await sessionFrames(t, user, session_id);
      expect(frames.find((f) => f.type === "task:tool_result")?.output).toContain("[cancelled by the user]");
      expect(frames.at(-1)).toMatchObject({ type: "task:done", task_id, status: "cancelled" });
      expect(mock.requests.length).toBe(1);
      // The session goes on with a fresh workspace.
      mock.reset();
      mock.enqueue({ text: "again" });
      const next = await submit(t, user, { session_id, prompt: "still there?" });
      expect((await waitTask(t, user, next.task_id)).status).toBe("completed");
      await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer);
    });
  }

  // The session's next task, queued behind the running one, does not start on the workspace being
  // removed (it failed CONTAINER_FAILED there): it waits for the removal and runs on a fresh one.
  for (const { who, remove } of removals) {
    test(`${who} removing the workspace: the running task is cancelled, the queued one runs afterwards on a fresh workspace`, async () => {
      await t.app.services.adminPassword.set(ADMIN_PASSWORD);
      mock.reset();
      mock.enqueue(
        { toolCalls: [{ name: "Bash", input: { command: "echo old > /workspace/mark; sleep 60" } }] },
        { toolCalls: [{ name: "Bash", input: { command: "ls /workspace; echo QUEUED-RAN" } }] },
        { text: "done" },
      );
      const pid = await createProfile(t, user, { mock });
      const first = await submit(t, user, { profile_id: pid, prompt: "sleep" });
      const { session_id } = first;
      const frames0 = await framesAtToolUse(session_id);
      const queued = await submit(t, user, { session_id, prompt: "then this" });
      expect((await api(t, "GET", `/v1/tasks/${queued.task_id}`, user.bearer)).body.status).toBe("queued");
      await Bun.sleep(200);
      const old = (await api(t, "GET", `/v1/workspaces/${frames0[0].container_id}`, user.bearer)).body;
      expect((await remove(old.id)).status).toBe(204);
      expect((await waitTask(t, user, first.task_id, ["cancelled", "failed", "completed"], 5000)).status).toBe("cancelled");
      const next = await waitTask(t, user, queued.task_id, ["cancelled", "failed", "completed"], 30_000);
      expect(next).toMatchObject({ status: "completed", error: null, result_text: "done" });
      const [result] = lastToolResults(mock.requests[2]!.body);
      expect(result!.content).toContain("QUEUED-RAN");
      expect(result!.content).not.toContain("mark");
      // A new workspace, the old one gone.
      const now = (await api(t, "GET", `/v1/sessions/${session_id}`, user.bearer)).body.container_id;
      expect(now).toBeTruthy();
      expect(now).not.toBe(old.id);
      expect((await api(t, "GET", `/v1/workspaces/${old.id}`, user.bearer)).status).toBe(404);
      expect(docker("inspect", old.name).exitCode).not.toBe(0);
      await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer);
    });
  }

  // Deleting the session: its queued task must not start in between (on the workspace being
  // removed, or on a new one made for a session about to vanish) — it goes with the session.
  test("deleting a session with a task running and one queued: the queued one never starts, no container is left", async () => {
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: "sleep 60" } }] },
      { toolCalls: [{ name: "Bash", input: { command: "echo QUEUED-RAN" } }] },
      { text: "never" },
    );
    const pid = await createProfile(t, user, { mock });
    const first = await submit(t, user, { profile_id: pid, prompt: "sleep" });
    const { session_id } = first;
    await framesAtToolUse(session_id);
    const queued = await submit(t, user, { session_id, prompt: "then this" });
    expect((await api(t, "GET", `/v1/tasks/${queued.task_id}`, user.bearer)).body.status).toBe("queued");
    await Bun.sleep(200);
    const logged = t.logs.length;
    expect((await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer)).status).toBe(204);
    await Bun.sleep(1500);
    // Nothing of the queued task after the delete (it emitted session.ready into the vanished session).
    expect(t.logs.slice(logged).filter((l) => l.includes(session_id) && !l.includes('"msg":"request"') && !l.includes('"msg":"workspace removed"'))).toEqual([]);
    expect(mock.requests).toHaveLength(1);
    const left = docker("ps", "-aq", "--filter", `label=runcell.session=${session_id}`).stdout.toString().trim();
    expect(left).toBe("");
    expect((await api(t, "GET", `/v1/tasks/${queued.task_id}`, user.bearer)).status).toBe(404);
  });

  test("an admin removing the workspace during the model's stream ends the task cancelled", async () => {
    await t.app.services.adminPassword.set(ADMIN_PASSWORD);
    mock.reset();
    mock.enqueue({ text: "a long answer that never ends", hangAfter: 2 });
    const pid = await createProfile(t, user, { mock });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "talk" });
    await waitFor(() => mock.requests.length > 0 || null, { what: "the model request" });
    await Bun.sleep(300);
    const ctr = (await api(t, "GET", `/v1/sessions/${session_id}`, user.bearer)).body.container_id;
    const started = performance.now();
    const r = await api(t, "DELETE", `/admin/workspaces/${ctr}`, { authorization: `Bearer ${ADMIN_PASSWORD}` });
    expect(r.status).toBe(204);
    const task = await waitTask(t, user, task_id, ["cancelled", "failed", "completed"], 5000);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(task.status).toBe("cancelled");
    expect((await sessionFrames(t, user, session_id)).at(-1)).toMatchObject({ type: "task:done", task_id, status: "cancelled" });
    expect((await api(t, "GET", `/v1/workspaces/${ctr}`, user.bearer)).status).toBe(404);
    await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer);
  });

  test("a container killed mid-task fails it with CONTAINER_FAILED", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] }, { text: "never" });
    const pid = await createProfile(t, user, { mock });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "sleep" });
    const frames0 = await framesAtToolUse(session_id);
    await Bun.sleep(200);
    const ws = (await api(t, "GET", `/v1/workspaces/${frames0[0].container_id}`, user.bearer)).body;
    expect(docker("kill", ws.name).exitCode).toBe(0);
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("CONTAINER_FAILED");
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.at(-1)).toMatchObject({ type: "task:failed", code: "CONTAINER_FAILED" });
    // The next turn tells the model the command was interrupted — it had started — not that it never ran.
    mock.reset();
    mock.enqueue({ text: "noted" });
    const next = await submit(t, user, { session_id, prompt: "what happened?" });
    expect((await waitTask(t, user, next.task_id)).status).toBe("completed");
    const result = lastToolResults(mock.requests[0]!.body).find((r) => r.tool_use_id === frames.find((f) => f.type === "task:tool_use").tool_use_id)!;
    expect(result.is_error).toBe(true);
    expect(result.content).toStartWith("[interrupted: the task failed while this tool was running (CONTAINER_FAILED:");
    expect(result.content).not.toContain("not run");
  });

  test("deleting a session removes its container, volume and records", async () => {
    mock.reset();
    mock.enqueue({ text: "hi" });
    const pid = await createProfile(t, user, { mock });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "x" });
    await waitTask(t, user, task_id);
    const ctr = (await api(t, "GET", `/v1/sessions/${session_id}`, user.bearer)).body.container_id;
    const ws = (await api(t, "GET", `/v1/workspaces/${ctr}`, user.bearer)).body;
    expect((await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer)).status).toBe(204);
    expect(docker("inspect", ws.name).exitCode).not.toBe(0);
    expect((await api(t, "GET", `/v1/sessions/${session_id}`, user.bearer)).status).toBe(404);
    expect((await api(t, "GET", `/v1/tasks/${task_id}`, user.bearer)).status).toBe(404);
    expect((await api(t, "DELETE", `/v1/sessions/${session_id}`, user.bearer)).status).toBe(404);
  });
});

describe("concurrency", () => {
  test("20 parallel new sessions on one profile: exactly 5 start, 15 get 429 CONCURRENCY_LIMIT", async () => {
    mock.reset();
    mock.script(() => ({ text: "ok" }));
    const pid = await createProfile(t, user, { mock, limits: { max_concurrency: 5 } });
    const results = await Promise.all(Array.from({ length: 20 }, () => api(t, "POST", "/v1/tasks", user.bearer, { profile_id: pid, prompt: "go" })));
    const ok = results.filter((r) => r.status === 202);
    const limited = results.filter((r) => r.status === 429);
    expect(ok.length).toBe(5);
    expect(limited.length).toBe(15);
    for (const r of limited) {
      expect(r.body.code).toBe("CONCURRENCY_LIMIT");
      // The limit named like every other refusal's; when to try again, in the header and in details.
      expect(r.body.details).toEqual({ limit: "max_concurrency", profile_id: pid, max_concurrency: 5, retry_after: 10 });
      expect(r.headers.get("retry-after")).toBe("10");
    }
    const sessions = (await api(t, "GET", "/v1/sessions?limit=100", user.bearer)).body.data.filter((s: any) => s.profile_id === pid);
    expect(sessions.length).toBe(5);
    for (const r of ok) await waitTask(t, user, r.body.task_id);
    await Promise.all(ok.map((r) => api(t, "DELETE", `/v1/sessions/${r.body.session_id}`, user.bearer)));
  }, 120_000);
});

describe("secrets", () => {
  test("a vault secret reaches the container env, and never the logs, events, transcript or model", async () => {
    const value = "sup3r-s3cret-v4lue-" + crypto.randomUUID();
    expect((await api(t, "PUT", "/v1/secrets/DEPLOY_TOKEN", user.bearer, { value })).status).toBe(204);
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: 'printf %s "$DEPLOY_TOKEN" | wc -c; echo "token=$DEPLOY_TOKEN"' } }] }, { text: "done" });
    const pid = await createProfile(t, user, { mock, env: { DEPLOY_TOKEN: { secret: "DEPLOY_TOKEN" }, PLAIN: "literal" } });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "use the token" });
    await waitTask(t, user, task_id);
    const [result] = lastToolResults(mock.requests[1]!.body);
    expect(result!.content).toContain(`${value.length}\n`);
    expect(result!.content).toContain("token=[redacted secret]");
    const everything = [JSON.stringify(await sessionFrames(t, user, session_id)), JSON.stringify(mock.requests.map((r) => r.body)), t.logs.join("\n")].join("\n");
    expect(everything).not.toContain(value);
  });
});

describe("images", () => {
  test("an image that cannot be had fails the task with CONTAINER_FAILED naming the image and the fix", async () => {
    const r = await api(t, "POST", "/v1/profiles", user.bearer, { name: "missing image", model: { provider: "demo", name: "demo" }, image: "runcell-test/does-not-exist:latest", network: "none" });
    expect(r.status).toBe(201);
    const submitted = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: r.body.id, prompt: "x" });
    // Answered as the error (API.md: a 202 is a task queued), naming the records it left.
    expect([submitted.status, submitted.body.code]).toEqual([502, "CONTAINER_FAILED"]);
    expect(submitted.body.error).toContain("runcell-test/does-not-exist:latest");
    const sub = { body: submitted.body.details as { task_id: string; session_id: string } };
    const task = await waitTask(t, user, sub.body.task_id);
    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("CONTAINER_FAILED");
    expect(task.error.message).toContain("runcell-test/does-not-exist:latest");
    expect(task.error.message).toMatch(/runcell image build|--workspace-image/);
    const frames = await sessionFrames(t, user, sub.body.session_id);
    expect(frames.at(-1)).toMatchObject({ type: "task:failed", code: "CONTAINER_FAILED" });
    // The task came without a session: the new session is announced before its task fails.
    const workspace = (await api(t, "GET", "/v1/workspaces", user.bearer)).body.data.find((w: { session_id: string }) => w.session_id === sub.body.session_id);
    expect(frames.map((f) => f.type)).toEqual(["session.ready", "task:failed"]);
    expect(frames[0]).toMatchObject({ session_id: sub.body.session_id, container_id: workspace.id, container_name: workspace.name, profile_id: r.body.id });
    expect(workspace.status).toBe("failed");
  });
});
