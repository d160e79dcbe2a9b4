/**
 * A model request costs what the provider processed even when its answer never finished: a
 * cancelled, failed or cut-off request is charged to the task and session (and so to
 * max_budget_usd and the monthly spend) — the input tokens as soon as message_start reports them,
 * the output as the provider counted it or, not counted yet, estimated from what streamed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { setRetryPolicy } from "../../src/agents/providers/index.ts";
import { CHARS_PER_TOKEN } from "../../src/agents/providers/usage-meter.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../helpers/mock-openai.ts";
import type { MockProviderServer } from "../helpers/mock-provider.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, api, type TestUser } from "../helpers/users.ts";
import { createProfile, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { waitFor } from "../helpers/net.ts";

let t: TestApp;
let anthropic: MockProviderServer;
let openai: MockProviderServer;
let user: TestUser;

// $0.01 a token either way: every token shows in cost_usd.
const PRICING = { input_per_mtok: 10_000, output_per_mtok: 10_000 };
const PIECES = Array.from({ length: 30 }, (_, i) => `t${i} `);
const streamed = (n: number) => PIECES.slice(0, n).join("").length;

beforeAll(async () => {
  setRetryPolicy({ retries: 0 });
  t = await startTestApp();
  anthropic = startMockAnthropic();
  openai = startMockOpenAI();
  user = await createUser(t);
});
afterAll(async () => {
  setRetryPolicy({ retries: 3 });
  await t.stop();
  await anthropic.stop();
  await openai.stop();
});

const task = async (id: string) => (await api(t, "GET", `/v1/tasks/${id}`, user.bearer)).body;
const session = async (id: string) => (await api(t, "GET", `/v1/sessions/${id}`, user.bearer)).body;
const tokensSeen = async (sessionId: string, n: number) =>
  waitFor(async () => (await sessionFrames(t, user, sessionId)).filter((f) => f.type === "task:token").map((f) => f.text).join("").length >= n, { what: `${n} characters streamed` });

describe("a model request that does not finish is still charged", () => {
  test("cancelled mid-answer (Anthropic): the reported input from message_start, the output estimated from the streamed text", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: PIECES, usage: { input_tokens: 10, output_tokens: 500 }, hangAfter: 16 });
    const pid = await createProfile(t, user, { mock: anthropic, pricing: PRICING });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "SLOW" });
    await tokensSeen(session_id, streamed(16));
    // The input is on the task while the answer still streams (a kill -9 now would keep it).
    expect(await task(task_id)).toMatchObject({ status: "running", input_tokens: 10, output_tokens: 1 }); // message_start's own count
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    const done = await waitTask(t, user, task_id);
    const output = Math.ceil(streamed(16) / CHARS_PER_TOKEN);
    expect(done).toMatchObject({ status: "cancelled", input_tokens: 10, output_tokens: output });
    expect(done.cost_usd).toBeCloseTo((10 + output) * 0.01, 6);
    expect(await session(session_id)).toMatchObject({ input_tokens: 10, output_tokens: output });
    expect((await session(session_id)).cost_usd).toBeCloseTo(done.cost_usd, 6);
  });

  test("a stream that fails after its text (in-stream error): charged the same way, the task fails", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: PIECES, usage: { input_tokens: 7, output_tokens: 500 }, failAfter: 5 });
    const pid = await createProfile(t, user, { mock: anthropic, pricing: PRICING });
    const { task_id } = await submit(t, user, { profile_id: pid, prompt: "FAIL" });
    const done = await waitTask(t, user, task_id);
    expect(done).toMatchObject({ status: "failed", error: { code: "MODEL_ERROR" }, input_tokens: 7, output_tokens: Math.ceil(streamed(5) / CHARS_PER_TOKEN) });
    expect(done.cost_usd).toBeGreaterThan(0);
  });

  test("a finished answer is charged the provider's own figures, once", async () => {
    anthropic.reset();
    anthropic.enqueue({ text: PIECES, usage: { input_tokens: 12, output_tokens: 3 } });
    const pid = await createProfile(t, user, { mock: anthropic, pricing: PRICING });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "DONE" });
    const done = await waitTask(t, user, task_id);
    expect(done).toMatchObject({ status: "completed", input_tokens: 12, output_tokens: 3 });
    expect(done.cost_usd).toBeCloseTo(0.15, 6);
    const last = (await sessionFrames(t, user, session_id)).find((f) => f.type === "turn.done");
    expect(last).toMatchObject({ input_tokens: 12, output_tokens: 3, cost_usd: 0.15 });
  });

  test("cancelled mid-answer (OpenAI): its usage chunk comes last, so its input is estimated from the request (not 0) and its output from what arrived", async () => {
    openai.reset();
    openai.enqueue({ text: PIECES, usage: { input_tokens: 10, output_tokens: 500 }, hangAfter: 8 });
    const pid = await createProfile(t, user, { mock: openai, provider: "openai", pricing: PRICING });
    const { task_id, session_id } = await submit(t, user, { profile_id: pid, prompt: "SLOW" });
    await tokensSeen(session_id, streamed(8));
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    const done = await waitTask(t, user, task_id);
    const output = Math.ceil(streamed(8) / CHARS_PER_TOKEN);
    // One token per 3 characters of the request's messages and tools, as sent.
    const sent = openai.requests[0]!.body;
    const input = Math.ceil((JSON.stringify(sent.messages).length + (sent.tools ? JSON.stringify(sent.tools).length : 0)) / CHARS_PER_TOKEN);
    expect(input).toBeGreaterThan(10);
    expect(done).toMatchObject({ status: "cancelled", input_tokens: input, output_tokens: output });
    const price = PRICING as { input_per_mtok: number; output_per_mtok: number };
    expect(done.cost_usd).toBeCloseTo((input * price.input_per_mtok + output * price.output_per_mtok) / 1e6, 6);
  });
});
