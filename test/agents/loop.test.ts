/**
 * The agent loop (src/agents/loop.ts) with the model's answers coming from local servers speaking
 * the real wire formats: what it does with a tool call cut off by the output token limit, how an
 * answer cut off by that limit (or refused) is made visible, and how a failed model request is
 * reported (the task's message, the server's log).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { setRetryPolicy, DEFAULT_RETRY_POLICY } from "../../src/agents/providers/index.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI, toolMessages } from "../helpers/mock-openai.ts";
import type { MockProviderServer } from "../helpers/mock-provider.ts";
import { freePort } from "../helpers/net.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { WsClient } from "../helpers/ws-client.ts";

let t: TestApp;
let user: TestUser;
let anthropic: MockProviderServer;
let openai: MockProviderServer;

beforeAll(async () => {
  setRetryPolicy({ retries: 2, baseDelayMs: 5, maxDelayMs: 20 });
  t = await startTestApp();
  user = await createUser(t);
  anthropic = startMockAnthropic();
  openai = startMockOpenAI();
});
afterAll(async () => {
  setRetryPolicy(DEFAULT_RETRY_POLICY);
  await t.stop();
  await anthropic.stop();
  await openai.stop();
});

describe("a final answer with no text of its own", () => {
  test("reports the task's last text as result_text (turn.done and the record), not an empty one that would blank what clients streamed", async () => {
    for (const [mock, provider] of [[anthropic, "anthropic"], [openai, "openai"]] as const) {
      mock.reset();
      mock.enqueue({ text: "Writing the file now.", toolCalls: [{ name: "Bash", input: { command: "true" } }] }, { text: "" });
      const profileId = await createProfile(t, user, { mock, provider });
      const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "write it" });
      const task = await waitTask(t, user, task_id);
      expect([provider, task.status, task.result_text]).toEqual([provider, "completed", "Writing the file now."]);
      const done = (await sessionFrames(t, user, session_id)).find((f) => f.type === "turn.done");
      expect(done.result_text).toBe("Writing the file now.");
      // A task with no text at all has an empty result.
      mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "true" } }] }, { text: "" });
      const bare = await submit(t, user, { session_id, prompt: "again" });
      expect((await waitTask(t, user, bare.task_id)).result_text).toBe("");
    }
  });
});

describe("a tool call cut off by the output token limit", () => {
  test("anthropic (stop_reason max_tokens): the cut call is not run, it gets an error result saying so; the complete call before it runs", async () => {
    anthropic.reset();
    anthropic.enqueue(
      {
        toolCalls: [
          { id: "toolu_whole", name: "Bash", input: { command: "echo FIRST-RAN" } },
          // Arguments that happen to parse: the call would run as it stands.
          { id: "toolu_cut", name: "Bash", input: {}, rawArguments: ['{"command":"echo CUT-', 'RAN"}'] },
        ],
        stopReason: "max_tokens",
      },
      { text: "I will try a smaller call." },
    );
    const profileId = await createProfile(t, user, { mock: anthropic });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "write a big file" });
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("completed");
    const results = lastToolResults(anthropic.requests[1]!.body);
    expect(results.find((r) => r.tool_use_id === "toolu_whole")).toMatchObject({ content: expect.stringContaining("FIRST-RAN") });
    const cut = results.find((r) => r.tool_use_id === "toolu_cut")!;
    expect(cut.is_error).toBe(true);
    expect(cut.content).toContain("cut off at the output token limit");
    expect(cut.content).not.toContain("CUT-RAN");
    // The order of the calls is kept (results and frames).
    expect(results.map((r) => r.tool_use_id)).toEqual(["toolu_whole", "toolu_cut"]);
    const frames = await sessionFrames(t, user, session_id);
    const tools = frames.filter((f) => f.type === "task:tool_use" || f.type === "task:tool_result").map((f) => `${f.type}:${f.tool_use_id}`);
    expect(tools).toEqual(["task:tool_use:toolu_whole", "task:tool_result:toolu_whole", "task:tool_use:toolu_cut", "task:tool_result:toolu_cut"]);
    expect(frames.find((f) => f.type === "task:tool_result" && f.tool_use_id === "toolu_cut")).toMatchObject({ is_error: true });
  });

  test('openai (finish_reason "length"): arguments cut mid-JSON get the cut-off error, not the invalid-input one', async () => {
    openai.reset();
    openai.enqueue({ toolCalls: [{ id: "call_cut", name: "Bash", input: {}, rawArguments: ['{"command":"echo hel', "lo wor"] }], stopReason: "length" }, { text: "ok" });
    const profileId = await createProfile(t, user, { mock: openai, provider: "openai" });
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "go" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const [result] = toolMessages(openai.requests[1]!.body);
    expect(result!.tool_call_id).toBe("call_cut");
    expect(result!.content).toStartWith("Error: ");
    expect(result!.content).toContain("cut off at the output token limit");
  });
});

describe("why the answer that ended a task stopped: turn.done, the task record, the replay, the log", () => {
  const CUT = "The first half of a sentence that never";
  const unfinishedLines = (taskId: string) => t.logs.map((l) => JSON.parse(l)).filter((r) => r.task_id === taskId && r.stop_reason);

  /** Runs one task whose only answer is `reply`; its record, its turn.done frame, its session. */
  async function answered(mock: MockProviderServer, provider: "anthropic" | "openai", reply: { text?: string; refusal?: string; stopReason?: string }) {
    mock.reset();
    mock.enqueue(reply);
    const profileId = await createProfile(t, user, { mock, provider });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "write a long story" });
    const task = await waitTask(t, user, task_id);
    const done = (await sessionFrames(t, user, session_id)).filter((f) => f.type === "turn.done" && f.task_id === task_id);
    expect(done).toHaveLength(1);
    return { task, done: done[0], session_id };
  }

  test("anthropic stop_reason max_tokens: completed with its text as it stands, but stop_reason max_tokens on turn.done, the record, the list; one info line without the text", async () => {
    const { task, done, session_id } = await answered(anthropic, "anthropic", { text: CUT, stopReason: "max_tokens" });
    expect(task).toMatchObject({ status: "completed", result_text: CUT, stop_reason: "max_tokens" });
    expect(done).toMatchObject({ result_text: CUT, stop_reason: "max_tokens" });
    const list = await api(t, "GET", `/v1/tasks?session_id=${session_id}`, user.bearer);
    expect(list.body.data).toMatchObject([{ id: task.id, stop_reason: "max_tokens" }]);
    const lines = unfinishedLines(task.id);
    expect(lines).toEqual([expect.objectContaining({ level: "info", msg: "task answer cut off at the model's output token limit", stop_reason: "max_tokens", provider: "anthropic", model: "claude-sonnet-4-6" })]);
    expect(JSON.stringify(lines)).not.toContain("never");
  });

  test("anthropic stop_reason refusal: stop_reason refusal, logged", async () => {
    const { task, done } = await answered(anthropic, "anthropic", { text: "I can't help with that.", stopReason: "refusal" });
    expect(task).toMatchObject({ status: "completed", stop_reason: "refusal" });
    expect(done.stop_reason).toBe("refusal");
    expect(unfinishedLines(task.id)).toEqual([expect.objectContaining({ level: "info", msg: "task answer refused by the model", stop_reason: "refusal" })]);
  });

  test('openai finish_reason "length" is max_tokens, "content_filter" is refusal, "stop" is end_turn (not logged)', async () => {
    const cut = await answered(openai, "openai", { text: CUT, stopReason: "length" });
    expect(cut.task).toMatchObject({ status: "completed", result_text: CUT, stop_reason: "max_tokens" });
    expect(cut.done.stop_reason).toBe("max_tokens");
    expect(unfinishedLines(cut.task.id)).toMatchObject([{ level: "info", stop_reason: "max_tokens", provider: "openai" }]);
    const filtered = await answered(openai, "openai", { text: "Sorry", stopReason: "content_filter" });
    expect(filtered.task.stop_reason).toBe("refusal");
    expect(filtered.done.stop_reason).toBe("refusal");
    const whole = await answered(openai, "openai", { text: "A whole answer." });
    expect(whole.task.stop_reason).toBe("end_turn");
    expect(whole.done.stop_reason).toBe("end_turn");
    expect(unfinishedLines(whole.task.id)).toEqual([]);
  });

  test("openai delta.refusal: the refusal is the answer (streamed as task:token, result_text) and stop_reason is refusal", async () => {
    const REFUSAL = "I'm sorry, but I can't help with that request.";
    const { task, done, session_id } = await answered(openai, "openai", { refusal: REFUSAL });
    expect(task).toMatchObject({ status: "completed", result_text: REFUSAL, stop_reason: "refusal" });
    expect(done).toMatchObject({ result_text: REFUSAL, stop_reason: "refusal" });
    const tokens = (await sessionFrames(t, user, session_id)).filter((f) => f.type === "task:token" && f.task_id === task.id);
    expect(tokens.map((f) => f.text).join("")).toBe(REFUSAL);
    expect(unfinishedLines(task.id)).toEqual([expect.objectContaining({ level: "info", msg: "task answer refused by the model", stop_reason: "refusal", provider: "openai" })]);
  });

  test("openai delta.refusal: the session's next task sends the refusal back in the assistant message's refusal field, not as its content", async () => {
    const REFUSAL = "I'm sorry, but I can't help with that request.";
    const { session_id } = await answered(openai, "openai", { refusal: REFUSAL });
    openai.enqueue({ text: "Hello." });
    const next = await submit(t, user, { session_id, prompt: "then just say hello" });
    expect((await waitTask(t, user, next.task_id)).status).toBe("completed");
    expect(openai.requests).toHaveLength(2);
    const messages = openai.requests[1]!.body.messages;
    expect(messages.filter((m: { role: string }) => m.role !== "system")).toEqual([
      { role: "user", content: "write a long story" },
      { role: "assistant", content: "", refusal: REFUSAL },
      { role: "user", content: "then just say hello" },
    ]);
  });

  test("a session.resume replays turn.done with its stop_reason, as sent live", async () => {
    const { task, done, session_id } = await answered(anthropic, "anthropic", { text: CUT, stopReason: "max_tokens" });
    const ws = await WsClient.connect(`${t.wsUrl}/v1/stream`, { protocols: [`Bearer.${user.token}`] });
    try {
      ws.send({ type: "session.resume", session_id });
      await ws.waitFor((f) => f.type === "session.replay_end");
      const replayed = ws.frames.find((f) => f.type === "turn.done" && f.task_id === task.id);
      expect(replayed).toEqual(done);
      expect(replayed.stop_reason).toBe("max_tokens");
    } finally {
      ws.close();
    }
  });

  test("null while the task runs, and when no model answer ended it (max_turns, cancel)", async () => {
    anthropic.reset();
    // A first answer asks for a tool (its turn's last answer is tool_use), then max_turns ends the task.
    anthropic.enqueue({ toolCalls: [{ name: "Bash", input: { command: "true" } }] });
    const limited = await createProfile(t, user, { mock: anthropic, limits: { max_turns: 1 } });
    const failed = await waitTask(t, user, (await submit(t, user, { profile_id: limited, prompt: "go" })).task_id);
    expect(failed).toMatchObject({ status: "failed", error: { code: "TURN_LIMIT_EXCEEDED" }, stop_reason: null });

    anthropic.enqueue({ text: "one two three four", hangAfter: 1 });
    const profileId = await createProfile(t, user, { mock: anthropic });
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "go" });
    await anthropic.waitForRequests(2, 20_000);
    expect(await waitTask(t, user, task_id, ["running"])).toMatchObject({ status: "running", stop_reason: null });
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    expect(await waitTask(t, user, task_id)).toMatchObject({ status: "cancelled", stop_reason: null });
    expect(unfinishedLines(task_id)).toEqual([]);
  });
});

describe("a failed model request: the quiet message says what kind of failure, and the server logs it", () => {
  const KEY = "sk-loop-test-KEY-0123456789";
  const failedLines = (taskId: string) => t.logs.map((l) => JSON.parse(l)).filter((r) => r.msg === "model request failed" && r.task_id === taskId);

  async function keyedProfile(): Promise<string> {
    expect((await api(t, "PUT", "/v1/secrets/LOOP_KEY", user.bearer, { value: KEY })).status).toBeLessThan(300);
    return createProfile(t, user, { mock: anthropic, extra: { model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: anthropic.url, api_key_secret: "LOOP_KEY" } } });
  }

  test("an in-stream invalid_request_error (prompt is too long): the message names its type, not the server's text; one warn line", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: "x", failAfter: 0, failWith: { type: "invalid_request_error", message: "prompt is too long: SERVER-TEXT" } });
    const profileId = await keyedProfile();
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "a long prompt" });
    const task = await waitTask(t, user, task_id);
    expect(task.error.code).toBe("MODEL_ERROR");
    expect(task.error.message).toContain("invalid_request_error");
    expect(task.error.message).not.toContain("could not be reached");
    expect(task.error.message).not.toContain("SERVER-TEXT");
    const lines = failedLines(task_id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "warn", provider: "anthropic", type: "invalid_request_error", attempts: 1, after_output: false });
    expect(lines[0].detail).toBeUndefined();
    expect(JSON.stringify(lines[0])).not.toContain("SERVER-TEXT");
    expect(t.logs.join("\n")).not.toContain(KEY);
  });

  test("a connection lost after text: the user is told the connection was lost (no detail), the log line has the reader's words", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: ["First ", "words "], resetAfter: 1 });
    const profileId = await keyedProfile();
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "go" });
    const task = await waitTask(t, user, task_id);
    expect(task.error).toEqual({ code: "MODEL_ERROR", message: "The connection to the model server was lost while its answer streamed (details are not shown for servers on private networks)" });
    const lines = failedLines(task_id);
    expect(lines).toMatchObject([{ level: "warn", type: "connection_lost", after_output: true, detail: expect.stringContaining("was lost while its answer streamed") }]);
  });

  test("a server that cannot be reached: the user sees no detail, the operator's log line says why", async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const profileId = await createProfile(t, user, { mock: { url: closed } as MockProviderServer });
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "hi" });
    const task = await waitTask(t, user, task_id);
    expect(task.error.message).toContain("could not be reached");
    expect(task.error.message).not.toContain("127.0.0.1");
    const lines = failedLines(task_id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "warn", provider: "anthropic", attempts: 3, detail: expect.stringContaining(`Cannot reach ${closed}`) });
  });

  test("an overloaded_error after output: its type in the message; an HTTP error: its status and type in the log, not its body", async () => {
    anthropic.reset();
    // The answer so far ends in what could begin the vault's key ("sk-"): the scrubber holds it back.
    anthropic.enqueue({ text: ["partial answer ", "ending sk-"], failAfter: 2, failWith: { type: "overloaded_error", message: "Overloaded SERVER-TEXT" } });
    const profileId = await keyedProfile();
    const first = await submit(t, user, { profile_id: profileId, prompt: "go" });
    const task = await waitTask(t, user, first.task_id);
    expect(task.error.message).toContain("overloaded_error");
    expect(failedLines(first.task_id)).toMatchObject([{ type: "overloaded_error", after_output: true }]);
    // Every character streamed before the failure reaches the client, the scrubber's held-back
    // tail too (no more text is coming: it is no secret's beginning).
    const streamed = (await sessionFrames(t, user, first.session_id)).filter((f) => f.type === "task:token").map((f) => f.text).join("");
    expect(streamed).toBe("partial answer ending sk-");

    anthropic.script(() => ({ error: { status: 529, message: "SERVER-TEXT busy" } }));
    const second = await submit(t, user, { profile_id: profileId, prompt: "again" });
    const failed = await waitTask(t, user, second.task_id);
    expect(failed.error.message).toBe("The model server answered HTTP 529 (overloaded_error) (its answer is not shown for servers on private networks)");
    const lines = failedLines(second.task_id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "warn", provider: "anthropic", status: 529, type: "overloaded_error", attempts: 3 });
    expect(t.logs.join("\n")).not.toContain("SERVER-TEXT");
    expect(t.logs.join("\n")).not.toContain(KEY);
  });
});
