/**
 * The agent loop (src/agents/loop.ts) with the model's answers coming from local servers speaking
 * the real wire formats: what it does with a tool call cut off by the output token limit, and how
 * a failed model request is reported (the task's message, the server's log).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { setRetryPolicy, DEFAULT_RETRY_POLICY } from "../../src/agents/providers/index.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI, toolMessages } from "../helpers/mock-openai.ts";
import type { MockProviderServer } from "../helpers/mock-provider.ts";
import { createUser, type TestUser } from "../helpers/users.ts";

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
