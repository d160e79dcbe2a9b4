/**
 * The agent runtime end to end: real dockerd (busybox test image), real SQLite, a local server
 * speaking Anthropic's (or OpenAI's) streaming wire format, the real HTTP API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../helpers/mock-openai.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, api, type TestUser } from "../helpers/users.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let profileId: string;

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  profileId = await createProfile(t, user, { mock });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

function checkOrdering(frames: any[]) {
  // seq is gap-free from 1; every tool_use is followed by exactly one matching result (or task:failed).
  expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i + 1));
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i];
    if (f.type !== "task:tool_use") continue;
    const rest = frames.slice(i + 1);
    const results = rest.filter((r) => r.type === "task:tool_result" && r.tool_use_id === f.tool_use_id);
    const failed = rest.find((r) => r.type === "task:failed" && r.task_id === f.task_id);
    expect(results.length === 1 || (results.length === 0 && !!failed)).toBe(true);
  }
}

describe("agent runtime", () => {
  test("plain answer: tokens stream, turn.done carries result, usage and cost, task:done follows", async () => {
    mock.reset();
    // Paced like a model: each delta arrives in a read of its own, so each leaves as a frame of its own.
    mock.enqueue({ text: "Hello there, friend.", delayMs: 30, usage: { input_tokens: 100, output_tokens: 20 } });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "Say hello" });
    const task = await waitTask(t, user, task_id);
    expect(task).toMatchObject({ status: "completed", result_text: "Hello there, friend.", input_tokens: 100, output_tokens: 20, turns: 1, error: null });
    expect(task.cost_usd).toBeGreaterThan(0);
    const frames = await sessionFrames(t, user, session_id);
    checkOrdering(frames);
    expect(frames[0]).toMatchObject({ type: "session.ready", session_id, container_id: expect.stringMatching(/^ctr_/), container_name: expect.any(String), profile_id: profileId });
    const types = frames.map((f) => f.type);
    expect(types.filter((x) => x === "task:token").length).toBeGreaterThan(1);
    expect(types.slice(-2)).toEqual(["turn.done", "task:done"]);
    expect(types).not.toContain("task:system_prompt"); // not an admin
    const tokens = frames.filter((f) => f.type === "task:token").map((f) => f.text).join("");
    expect(tokens).toBe("Hello there, friend.");
    expect(frames.at(-2)).toMatchObject({ result_text: "Hello there, friend.", input_tokens: 100, output_tokens: 20, cost_usd: task.cost_usd, task_id });
    expect(frames.at(-1)).toMatchObject({ type: "task:done", task_id, session_id, status: "completed" });
    // The system prompt and the user prompt reached the provider.
    expect(mock.requests[0]!.body.system).toContain("You are a test agent.");
    expect(JSON.stringify(mock.requests[0]!.body.messages)).toContain("Say hello");
  });

  test("deltas that arrive together leave as one frame; the text is whole and in order", async () => {
    mock.reset();
    const words = Array.from({ length: 200 }, (_, i) => `w${i} `);
    mock.enqueue({ text: words, usage: { input_tokens: 10, output_tokens: 200 } });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "Many deltas at once" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const frames = await sessionFrames(t, user, session_id);
    checkOrdering(frames);
    const tokens = frames.filter((f) => f.type === "task:token");
    expect(tokens.map((f) => f.text).join("")).toBe(words.join(""));
    // 200 deltas written without a pause: far fewer frames than deltas.
    expect(tokens.length).toBeLessThan(20);
  });

  test("Bash round trip: output and exit code go back to the model", async () => {
    mock.reset();
    mock.enqueue({ text: "Running.", toolCalls: [{ name: "Bash", input: { command: "echo from-container; pwd; exit 3" } }] }, { text: "It printed." });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "run it" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const [result] = lastToolResults(mock.requests[1]!.body);
    expect(result!.content).toContain("from-container\n/workspace\n");
    expect(result!.content).toContain("[exit code: 3]");
    const frames = await sessionFrames(t, user, session_id);
    checkOrdering(frames);
    const use = frames.find((f) => f.type === "task:tool_use");
    expect(use).toMatchObject({ tool: "Bash", input: { command: "echo from-container; pwd; exit 3" }, task_id });
    expect(frames.find((f) => f.type === "task:tool_result")).toMatchObject({ tool: "Bash", tool_use_id: use.tool_use_id, output: result!.content });
  });

  test("Write then Read; Edit refuses a non-unique old_string; the session keeps its conversation", async () => {
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Write", input: { file_path: "notes/a.txt", content: "alpha\nbeta\nbeta\n" } }, { name: "Read", input: { file_path: "/workspace/notes/a.txt" } }] },
      { toolCalls: [{ name: "Edit", input: { file_path: "notes/a.txt", old_string: "beta", new_string: "gamma" } }] },
      { toolCalls: [{ name: "Edit", input: { file_path: "notes/a.txt", old_string: "alpha", new_string: "ALPHA" } }, { name: "Read", input: { file_path: "notes/a.txt", offset: 1, limit: 1 } }] },
      { text: "Edited." },
    );
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "files" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const [write, read] = lastToolResults(mock.requests[1]!.body);
    expect(write!.content).toBe("Wrote 16 bytes to /workspace/notes/a.txt");
    expect(read!.content).toBe("     1\talpha\n     2\tbeta\n     3\tbeta");
    const [edit] = lastToolResults(mock.requests[2]!.body);
    expect(edit).toMatchObject({ is_error: true });
    expect(edit!.content).toContain("not unique");
    expect(edit!.content).toContain("2 occurrences");
    const [edit2, read2] = lastToolResults(mock.requests[3]!.body);
    expect(edit2!.content).toContain("replaced 1 occurrence");
    expect(read2!.content).toContain("     1\tALPHA\n[2 more lines");

    // A second task in the same session sees the whole conversation so far.
    mock.enqueue({ text: "Still here." });
    const second = await submit(t, user, { session_id, prompt: "and now?" });
    expect(second.session_id).toBe(session_id);
    expect((await waitTask(t, user, second.task_id)).status).toBe("completed");
    const msgs = mock.requests[4]!.body.messages;
    expect(msgs.length).toBe(9);
    expect(JSON.stringify(msgs[0])).toContain("files");
    expect(JSON.stringify(msgs.at(-1))).toContain("and now?");
  });

  test("a symlink loop, a path through a file or a name over 255 bytes is a tool error the model sees; the task goes on", async () => {
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: "ln -s loop2 loop1; ln -s loop1 loop2; echo hi > a.txt" } }] },
      {
        toolCalls: [
          { name: "Read", input: { file_path: "loop1" } },
          { name: "Read", input: { file_path: "a.txt/x" } },
          { name: "Write", input: { file_path: "a.txt/x", content: "no" } },
          { name: "Read", input: { file_path: "a.txt/" } },
          { name: "Write", input: { file_path: "c".repeat(300), content: "x" } },
        ],
      },
      { text: "Noted." },
    );
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "odd paths" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const [loop, through, write, slash, long] = lastToolResults(mock.requests[2]!.body);
    // A name no file can have (over 255 bytes) is the model's mistake too.
    expect(long).toMatchObject({ is_error: true });
    expect(long!.content).toContain("at most 255 bytes");
    expect(loop).toMatchObject({ is_error: true });
    expect(loop!.content).toContain("/workspace/loop1 is or leads into a symlink loop");
    for (const r of [through, write, slash]) {
      expect(r).toMatchObject({ is_error: true });
      expect(r!.content).toContain("/workspace/a.txt is not a directory");
    }
  });

  test("AskUserQuestion: task:ask_user, waiting_input, the answer becomes the tool result", async () => {
    mock.reset();
    const questions = [{ question: "Which colour?", header: "Colour", options: [{ label: "red", description: "warm" }, { label: "blue" }], multiSelect: false }];
    mock.enqueue({ toolCalls: [{ name: "AskUserQuestion", input: { questions } }] }, { text: "Blue it is." });
    const { task_id, session_id } = await submit(t, user, { profile_id: profileId, prompt: "ask me" });
    await waitTask(t, user, task_id, ["waiting_input"]);
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.find((f) => f.type === "task:tool_use")).toMatchObject({ tool: "AskUserQuestion", input: { questions } });
    expect(frames.find((f) => f.type === "task:ask_user")).toMatchObject({ task_id, session_id, questions: [{ question: "Which colour?", options: [{ label: "red" }, { label: "blue" }] }] });
    const wrong = await api(t, "POST", `/v1/tasks/${task_id}/answer`, user.bearer, {});
    expect(wrong.status).toBe(400);
    const answered = await api(t, "POST", `/v1/tasks/${task_id}/answer`, user.bearer, { answer: "blue" });
    expect(answered.status).toBe(202);
    expect((await waitTask(t, user, task_id)).result_text).toBe("Blue it is.");
    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toBe("blue");
    const again = await api(t, "POST", `/v1/tasks/${task_id}/answer`, user.bearer, { answer: "red" });
    expect(again.status).toBe(400);
    expect(again.body.code).toBe("VALIDATION_FAILED");
    checkOrdering(await sessionFrames(t, user, session_id));
  });

  test("tasks of one session run one at a time, in order", async () => {
    mock.reset();
    mock.enqueue({ text: "first", delayMs: 30, chunks: 5 }, { text: "second" });
    const a = await submit(t, user, { profile_id: profileId, prompt: "one" });
    const b = await submit(t, user, { session_id: a.session_id, prompt: "two" });
    expect(b.status).toBe("queued");
    const first = await waitTask(t, user, a.task_id);
    const second = await waitTask(t, user, b.task_id);
    expect([first.result_text, second.result_text]).toEqual(["first", "second"]);
    expect(Date.parse(second.started_at)).toBeGreaterThanOrEqual(Date.parse(first.finished_at));
  });

  test("image references to workspace files become signed URLs in result_text", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Write", input: { file_path: "chart.svg", content: "<svg xmlns='http://www.w3.org/2000/svg'/>" } }] }, { text: "See ![chart](chart.svg) and ![x](https://example.com/x.png)\r\n```\nunclosed" });
    const { task_id } = await submit(t, user, { profile_id: profileId, prompt: "chart" });
    const task = await waitTask(t, user, task_id);
    const m = /!\[chart\]\((http[^)]+)\)/.exec(task.result_text);
    expect(m).not.toBeNull();
    expect(m![1]).toContain("/files/ctr_");
    expect(task.result_text).toContain("![x](https://example.com/x.png)");
    expect(task.result_text.endsWith("unclosed\n```")).toBe(true);
    const img = await fetch(m![1]!);
    expect(img.status).toBe(200);
    expect(await img.text()).toContain("<svg");
  });

  test("OpenAI Chat Completions provider: tool call round trip", async () => {
    const oai = startMockOpenAI();
    try {
      const pid = await createProfile(t, user, { mock: oai, provider: "openai" });
      oai.enqueue({ toolCalls: [{ name: "Bash", input: { command: "echo openai-ok" } }] }, { text: "Done via OpenAI." });
      const { task_id } = await submit(t, user, { profile_id: pid, prompt: "go" });
      expect((await waitTask(t, user, task_id)).result_text).toBe("Done via OpenAI.");
      const toolMsg = oai.requests[1]!.body.messages.find((m: any) => m.role === "tool");
      expect(toolMsg.content).toContain("openai-ok");
    } finally {
      await oai.stop();
    }
  });

  test("the demo provider runs the whole pipeline offline", async () => {
    const r = await api(t, "POST", "/v1/profiles", user.bearer, { name: "demo", model: { provider: "demo", name: "demo" }, image: t.config.workspaceImage, network: "none" });
    expect(r.status).toBe(201);
    const { task_id, session_id } = await submit(t, user, { profile_id: r.body.id, prompt: "hello" });
    const task = await waitTask(t, user, task_id);
    expect(task.status).toBe("completed");
    const types = (await sessionFrames(t, user, session_id)).map((f) => f.type);
    expect(types).toContain("task:tool_use");
    expect(types).toContain("task:tool_result");
    expect(types.at(-1)).toBe("task:done");
  });
});

test("POST /v1/tasks answers 202 {task_id, session_id, status: queued}, new session or not", async () => {
  mock.reset();
  mock.script(() => ({ text: "ok" }));
  const first = await api(t, "POST", "/v1/tasks", user.bearer, { mode: "session", profile_id: profileId, prompt: "one" });
  expect(first.status).toBe(202);
  expect(Object.keys(first.body).sort()).toEqual(["session_id", "status", "task_id"]);
  expect(first.body.status).toBe("queued");
  const second = await api(t, "POST", "/v1/tasks", user.bearer, { session_id: first.body.session_id, prompt: "two" });
  expect(second.body).toMatchObject({ session_id: first.body.session_id, status: "queued" });
  await waitTask(t, user, second.body.task_id);
});
