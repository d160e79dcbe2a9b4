/**
 * `kill -9` of the server in the middle of a task: after a restart the task continues from its
 * last completed step — finished tool calls are not run again, the one in flight is reported to
 * the model as interrupted — and completes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { startDockerProxy } from "../helpers/docker-proxy.ts";
import { spawnedAgent } from "../helpers/spawned-agent.ts";

const mock = startMockAnthropic();
afterAll(() => mock.stop());

test("a task survives kill -9 of the server and completes without re-running finished tools", async () => {
  const a = await spawnedAgent("k9", { modelUrl: mock.url });
  mock.enqueue(
    { toolCalls: [{ name: "Bash", input: { command: "echo ran >> /workspace/count.txt" } }] },
    { toolCalls: [{ name: "Bash", input: { command: "echo slow >> /workspace/count.txt; sleep 30" } }] },
  );
  const sub = await a.submit("count");

  // Wait until the second tool call is running, then kill the server outright.
  await mock.waitForRequests(2, 20_000);
  await Bun.sleep(800);
  expect(await a.kill("SIGKILL")).not.toBe(0);

  // After the restart the model is told the in-flight call was interrupted; then it finishes.
  let sawInterrupted = false;
  mock.script((req) => {
    const last = req.body.messages.at(-1);
    const results = (last.content ?? []).filter((b: any) => b.type === "tool_result");
    if (results.some((r: any) => JSON.stringify(r.content).includes("interrupted"))) {
      sawInterrupted = true;
      return { toolCalls: [{ name: "Bash", input: { command: "cat /workspace/count.txt" } }] };
    }
    return { text: "Recovered: " + JSON.stringify(results[0]?.content ?? "") };
  });
  await a.restart();
  try {
    const task = await a.finished(sub.task_id, { what: "recovered task" });
    expect(task.status).toBe("completed");
    expect(sawInterrupted).toBe(true);
    // The first tool ran once, the interrupted one had started once; neither ran again.
    expect(task.result_text).toContain("ran\\nslow\\n");
    expect(task.result_text).not.toContain("ran\\nslow\\nran");
    expect(task.turns).toBe(4);
    const frames = await a.events(sub.session_id);
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
    expect(frames.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
  } finally {
    await a.close(sub.session_id);
  }
}, 120_000);

// The text streamed by a model request the server was stopped in (kill -9 or SIGTERM) is removed
// from the log when the resumed task makes that request again: a replay shows the answer once.
test.each(["SIGKILL", "SIGTERM"] as const)("after a %s mid-answer the re-requested answer's text is in the log once, numbered above the removed frames", async (signal) => {
  const a = await spawnedAgent(`cut-${signal.toLowerCase()}`, { modelUrl: mock.url });
  const text = (fs: any[]) => fs.filter((f) => f.type === "task:token").map((f) => f.text).join("");
  const pieces = Array.from({ length: 30 }, (_, i) => `t${i} `);
  mock.reset();
  mock.enqueue({ text: pieces, usage: { input_tokens: 10, output_tokens: 30 }, hangAfter: 16 });
  const sub = await a.submit("SLOW");
  // Stored (the read flushes the log), then the server stops mid-answer.
  const before = await waitFor(async () => {
    const fs = await a.events(sub.session_id);
    return text(fs) === pieces.slice(0, 16).join("") ? fs : null;
  }, { timeoutMs: 20_000, what: "16 pieces streamed" });
  const cutSeqs = before.filter((f) => f.type === "task:token").map((f) => f.seq);
  await a.kill(signal);

  mock.enqueue({ text: pieces, usage: { input_tokens: 10, output_tokens: 30 } });
  await a.restart();
  try {
    const task = await a.finished(sub.task_id, { what: "resumed task" });
    expect(task.status).toBe("completed");
    expect(task.result_text).toBe(pieces.join("").trim());
    // The cut request's input was written when message_start came, even before a kill -9.
    expect(task.input_tokens).toBe(20);
    const after = await a.events(sub.session_id);
    expect(text(after)).toBe(pieces.join(""));
    const seqs = after.map((f) => f.seq);
    expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
    // No seq of a removed frame is given again.
    const newTokens = after.filter((f) => f.type === "task:token").map((f) => f.seq);
    expect(Math.min(...newTokens)).toBeGreaterThan(Math.max(...cutSeqs));
    expect(after.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
    // Removed before the restarted server listened: no client resuming in its first milliseconds
    // replays the cut text and then gets the answer again. (On PostgreSQL a stopping replica
    // releases its leases: the task is then whichever replica's takes it, and is prepared as it resumes.)
    const log = a.server.output();
    const removed = log.indexOf("streamed text of an interrupted model request removed");
    expect(removed).toBeGreaterThanOrEqual(0);
    if (!(process.env.RUNCELL_TEST_POSTGRES && signal === "SIGTERM")) expect(removed).toBeLessThan(log.indexOf("runcell listening"));
  } finally {
    await a.close(sub.session_id);
  }
}, 120_000);

// The request under way when the server stopped is the same turn when it is made again: a task
// killed mid-answer in its last allowed turn (max_turns 1) is asked again and completes, instead
// of failing a limit only the crash made it reach. A budget its cut-off input alone reached is
// spent, though: that task fails BUDGET_EXCEEDED without paying for the request twice.
test.each([
  ["max_turns", { max_turns: 1 }],
  ["max_budget_usd", { max_budget_usd: 0.3 }],
] as const)("a task killed mid-answer in its last allowed turn: %s", async (limit, limits) => {
  const a = await spawnedAgent(`last-${limit}`, { modelUrl: mock.url });
  mock.reset();
  // 100,000 input tokens of claude-sonnet-4-6 cost $0.30: the cut request alone reaches a $0.30 budget.
  const usage = { input_tokens: 100_000, output_tokens: 10 };
  mock.enqueue({ text: ["Half ", "an ", "answer"], usage, hangAfter: 2 });
  const sub = await a.submit("one turn", limits);
  // Mid-answer, with the cut request's input charged: turns 1, cost $0.30.
  await waitFor(async () => {
    const t = await a.get(`/v1/tasks/${sub.task_id}`);
    return t.status === "running" && t.turns === 1 && t.cost_usd >= 0.3 ? t : null;
  }, { timeoutMs: 20_000, what: "the cut request charged" });
  expect(await a.kill("SIGKILL")).not.toBe(0);

  mock.enqueue({ text: ["The ", "answer"], usage });
  await a.restart();
  try {
    const task = await a.finished(sub.task_id, { what: "resumed task" });
    if (limit === "max_budget_usd") {
      expect([task.status, task.error?.code]).toEqual(["failed", "BUDGET_EXCEEDED"]);
      expect(mock.requests.length).toBe(1);
      expect([task.turns, task.input_tokens]).toEqual([1, 100_000]);
      return;
    }
    expect(task.error).toBeNull();
    expect(task.status).toBe("completed");
    expect(task.result_text).toBe("The answer");
    expect(mock.requests.length).toBe(2);
    // Still one turn; both requests are paid for (the cut one's input, the repeated one in full).
    expect(task.turns).toBe(1);
    expect(task.input_tokens).toBe(200_000);
    expect(task.cost_usd).toBeGreaterThan(0.6);
  } finally {
    await a.close(sub.session_id);
  }
}, 120_000);

// A server that dies in the same answer every time: the request of a turn is made again after a
// restart at most twice (MAX_TURN_REPEATS), then the task fails instead of repeating it forever.
// The count is stored with the task (it outlives each kill -9) and starts again with each new turn.
test("a turn whose model request restarts cut off three times fails INTERNAL_ERROR; each new turn gets its own repeats", async () => {
  const a = await spawnedAgent("repeats", { modelUrl: mock.url });
  mock.reset();
  const hang = { text: ["Half ", "an ", "answer"], usage: { input_tokens: 10, output_tokens: 3 }, hangAfter: 1 };
  // Turn 1: cut twice, answered (a tool call) at its second repeat. Turn 2: cut three times. A
  // last answer is queued that must never be asked for.
  mock.enqueue(hang, hang, { toolCalls: [{ name: "Bash", input: { command: "true" } }] }, hang, hang, hang, { text: "Never asked." });
  const sub = await a.submit("crash me", { max_turns: 5 });
  // Each server is killed once its request hangs mid-answer: after 1, 2, 4 (turn 2's first), 5 and 6 requests.
  for (const n of [1, 2, 4, 5, 6]) {
    await mock.waitForRequests(n, 30_000);
    expect(await a.kill("SIGKILL")).not.toBe(0);
    await a.restart();
  }
  try {
    const task = await a.finished(sub.task_id, { what: "the task after its last restart" });
    expect(task.status, JSON.stringify(task)).toBe("failed");
    expect(task.error).toEqual({ code: "INTERNAL_ERROR", message: expect.stringContaining("turn 2 was cut off by server restarts 3 times") });
    // Not asked a seventh time; still two turns, whatever the repeats.
    expect(mock.requests.length).toBe(6);
    expect(task.turns).toBe(2);
    expect(a.server.output()).toContain("model request cut off by restarts too many times");
  } finally {
    await a.close(sub.session_id);
  }
}, 180_000);

// A new session's workspace start cut off by kill -9 (the engine's container create held by a
// proxy): the session was never announced. Its workspace is started again when its task runs
// after the restart, and session.ready is published then — once, not again on later turns.
describe("a session whose workspace start a kill -9 cut off", () => {
  const proxy = startDockerProxy();
  afterAll(() => proxy.stop());

  async function setup(name: string) {
    const a = await spawnedAgent(name, { modelUrl: mock.url, flags: ["--docker-host", proxy.host] });
    /** Sends `path` while container creation is held, and kills the server -9 once it is. */
    const killDuringStart = async (path: string, body: unknown) => {
      proxy.hold = true;
      const held = proxy.held;
      void fetch(a.server.url + path, { method: "POST", headers: a.headers, body: JSON.stringify(body) }).catch(() => {});
      await waitFor(async () => proxy.held > held, { timeoutMs: 20_000, what: "container create held" });
      expect(await a.kill("SIGKILL")).not.toBe(0);
      proxy.hold = false;
      await a.restart();
    };
    const types = async (sid: string) => (await a.events(sid)).map((f) => f.type);
    const ready = async (sid: string) => (await a.events(sid)).filter((f) => f.type === "session.ready");
    return { profile: a.profile, call: a.call, finished: (taskId: string) => a.finished(taskId), killDuringStart, types, ready, done: (sid: string | undefined) => a.close(sid) };
  }

  test("a task's new session is announced with session.ready when its recovered task starts the workspace", async () => {
    const t = await setup("ready-task");
    let sid: string | undefined;
    try {
      mock.reset();
      mock.enqueue({ text: "first" }, { text: "second" });
      await t.killDuringStart("/v1/tasks", { profile_id: t.profile.id, prompt: "hi" });
      const [task] = (await t.call("GET", "/v1/tasks")).data;
      sid = task.session_id;
      expect((await t.finished(task.id)).status).toBe("completed");
      const session = await t.call("GET", `/v1/sessions/${sid}`);
      const [frame, ...more] = await t.ready(sid!);
      expect(more).toEqual([]);
      expect(frame).toMatchObject({ container_id: session.container_id, profile_id: t.profile.id });
      expect(frame.container_name).toEqual(expect.any(String));
      expect(await t.types(sid!)).toEqual(["session.ready", "task:token", "turn.done", "task:done"]);
      // A later turn does not announce the session again.
      const next = await t.call("POST", "/v1/tasks", { session_id: sid, prompt: "again" });
      expect((await t.finished(next.task_id)).status).toBe("completed");
      expect(await t.ready(sid!)).toHaveLength(1);
    } finally {
      await t.done(sid);
    }
  }, 120_000);

  test("POST /v1/sessions cut off: the session stays with its workspace stopped, and is announced when a task starts it", async () => {
    const t = await setup("ready-session");
    let sid: string | undefined;
    try {
      mock.reset();
      mock.enqueue({ text: "started" });
      await t.killDuringStart("/v1/sessions", { profile_id: t.profile.id });
      [{ id: sid }] = (await t.call("GET", "/v1/sessions")).data;
      const ws = (await t.call("GET", "/v1/workspaces")).data.find((w: any) => w.session_id === sid);
      // On PostgreSQL a `starting` row this young may be another replica's start (reconcile.ts STARTING_GRACE_MS).
      if (process.env.RUNCELL_TEST_POSTGRES) expect(ws.status).toBe("starting");
      else expect(ws).toMatchObject({ status: "stopped", error: "start was interrupted" });
      expect(await t.types(sid!)).toEqual([]);
      const task = await t.call("POST", "/v1/tasks", { session_id: sid, prompt: "hi" });
      expect((await t.finished(task.task_id)).status).toBe("completed");
      expect(await t.ready(sid!)).toHaveLength(1);
    } finally {
      await t.done(sid);
    }
  }, 120_000);
});
