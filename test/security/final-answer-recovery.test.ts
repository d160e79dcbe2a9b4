/**
 * A server stopped between storing a task's final assistant answer and marking the task completed
 * does not pay for a second model call on recovery: the task completes from the stored answer.
 *
 * The crash state is built with the real components: a task runs against a local Anthropic-speaking
 * server that stalls mid-answer; the server shuts down (the task stays `running`, its transcript
 * ends with the user prompt); before the next start's recovery the final assistant message is
 * stored through the Transcript service (and, before it, why that answer stopped) — exactly what
 * the loop stores just before the window. The restarted server completes the task with the stored
 * text and stop reason and makes zero model requests.
 */
import { afterAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { type App, createApp } from "../../src/app.ts";
import { createLogger } from "../../src/log.ts";
import { taskRecord } from "../../src/agents/tasks.ts";
import { createProfile, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { removeInstanceWorkspaces, startTestApp, type TestApp, tempDir, testConfig } from "../helpers/app.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { databaseFor, dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";
import { createUser } from "../helpers/users.ts";

const mock: MockProviderServer = startMockAnthropic();
const dataDir = tempDir();
let first: TestApp | null = null;
let second: App | null = null;

afterAll(async () => {
  // One data dir, one instance id: removing it once cleans up after both servers.
  const instance = (second ?? first?.app)?.services.workspaces.instanceId;
  if (second) await second.stop();
  else await first?.app.stop();
  if (instance) removeInstanceWorkspaces(instance);
  await mock.stop();
  rmSync(dataDir, { recursive: true, force: true });
  await dropDatabaseFor(dataDir);
});

test("a running task whose transcript ends with its final answer completes on recovery from the stored text, with no model request", async () => {
  // 1. A task whose model request is in flight when the server shuts down.
  first = await startTestApp({ dataDir, keepDataDir: true });
  const user = await createUser(first);
  const profileId = await createProfile(first, user, { mock });
  mock.enqueue({ text: "thinking about it", hangAfter: 1 });
  const { task_id, session_id } = await submit(first, user, { profile_id: profileId, prompt: "Summarise" });
  await mock.waitForRequests(1, 20_000);
  await Bun.sleep(200);
  await first.app.stop();
  const requestsBefore = mock.requests.length;
  expect(requestsBefore).toBe(1);

  // 2. The crash window: the final assistant answer is stored, the task is still `running`.
  const config = testConfig({ port: await freePort(), dataDir, database: PG_SERVER ? await databaseFor(dataDir) : null });
  second = await createApp(config, { logger: createLogger({ level: "warn", sink: () => {} }) });
  const s = second.services;
  expect(await s.tasks.byId(task_id)).toMatchObject({ status: "running", result_text: null });
  const answer = "All done.   \n\n\n\nThe ![chart](out/chart.png) shows it.";
  // (An answer cut off by the output token limit: the stop reason is stored first.)
  await s.tasks.update(task_id, { stop_reason: "max_tokens" });
  // The record shows no stop reason while the task is not completed.
  expect(taskRecord((await s.tasks.byId(task_id))!).stop_reason).toBeNull();
  await s.transcript.addAssistant(session_id, task_id, [{ type: "text", text: answer }]);
  const steps = (await s.transcript.steps(session_id)).filter((x) => x.task_id === task_id);
  expect(steps.map((x) => x.role)).toEqual(["user", "assistant"]);

  // Only an answer without tool calls, as the task's last step, counts as final.
  const step = (id: number, task: string, role: "user" | "assistant" | "tool_result" | "chain", content: unknown) => ({ id, task_id: task, role, content });
  const prompt = step(1, "task_a", "user", [{ type: "text", text: "go" }]);
  const withTool = step(2, "task_a", "assistant", [{ type: "text", text: "let me look" }, { type: "tool_use", id: "tu_1", name: "Bash", input: {} }]);
  const final = step(4, "task_a", "assistant", [{ type: "text", text: "done " }, { type: "text", text: "here" }]);
  expect(s.transcript.finalAnswer([prompt], "task_a")).toBeNull();
  expect(s.transcript.finalAnswer([prompt, withTool], "task_a")).toBeNull();
  expect(s.transcript.finalAnswer([prompt, withTool, step(3, "task_a", "tool_result", { type: "tool_result", tool_use_id: "tu_1", content: "x" })], "task_a")).toBeNull();
  expect(s.transcript.finalAnswer([prompt, final], "task_a")).toBe("done here");
  expect(s.transcript.finalAnswer([prompt, final, step(5, "task_b", "user", [{ type: "text", text: "next" }])], "task_a")).toBe("done here");
  expect(s.transcript.finalAnswer([prompt, final, step(5, "task_b", "user", [{ type: "text", text: "next" }])], "task_b")).toBeNull();
  expect(s.transcript.finalAnswer([prompt, final, step(6, "task_a", "chain", { text: "continue" })], "task_a")).toBeNull();

  // 3. Recovery completes it from the stored answer without asking the model again.
  await second.start();
  const done = await waitFor(async () => {
    const row = (await s.tasks.byId(task_id))!;
    return ["completed", "failed", "cancelled"].includes(row.status) ? row : null;
  }, { timeoutMs: 30_000, what: "recovered task" });
  expect(done.error_message).toBeNull();
  expect(done.status).toBe("completed");
  expect(mock.requests.length).toBe(requestsBefore);
  expect(done.result_text).toMatch(/^All done\.\n\nThe !\[chart\]\(http:\/\/127\.0\.0\.1:\d+\/files\/ctr_[^/]+\/out\/chart\.png\?exp=\d+&sig=[0-9a-f]+\) shows it\.$/);
  expect(done.turns).toBe(1);
  expect(done.stop_reason).toBe("max_tokens");

  // Seen from the API like any completed task: turn.done with the text, then task:done.
  const view = { url: second.url, fetch: (p: string, i?: RequestInit) => fetch(second!.url + p, i) } as unknown as TestApp;
  const task = await waitTask(view, user, task_id);
  expect(task.result_text).toBe(done.result_text);
  expect(task.stop_reason).toBe("max_tokens");
  const frames = await sessionFrames(view, user, session_id);
  expect(frames.filter((f) => f.type === "turn.done" && f.task_id === task_id).map((f) => [f.result_text, f.stop_reason])).toEqual([[done.result_text, "max_tokens"]]);
  expect(frames.at(-1)).toMatchObject({ type: "task:done", task_id, status: "completed" });
}, 120_000);
