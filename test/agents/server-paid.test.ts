/**
 * The monthly spend cap on the server's own provider keys (docs/security.md), decided by the key
 * each model request actually goes out with: a task counts toward the spend once one of its
 * requests used the server's key, and the cap is checked before every such request — whatever the
 * profile said when the task was submitted. The server's key reaches a local Anthropic server the
 * way an operator's gateway does (ANTHROPIC_BASE_URL, a profile without base_url).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tasks } from "../../src/db/tables.ts";
import { eq } from "drizzle-orm";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { submit, waitTask } from "../helpers/agent.ts";

const SERVER_KEY = "sk-ant-server-paid-test";
const USER_KEY = "sk-ant-users-own-key";
const saved = { key: process.env.ANTHROPIC_API_KEY, base: process.env.ANTHROPIC_BASE_URL };

let t: TestApp;
let mock: MockProviderServer;

beforeAll(async () => {
  mock = startMockAnthropic();
  process.env.ANTHROPIC_API_KEY = SERVER_KEY;
  process.env.ANTHROPIC_BASE_URL = mock.url;
  t = await startTestApp({ flags: ["--monthly-spend-usd", "0.01"] });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
  for (const [k, v] of [["ANTHROPIC_API_KEY", saved.key], ["ANTHROPIC_BASE_URL", saved.base]] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const keyOf = (i: number) => mock.requests[i]!.headers["x-api-key"] ?? mock.requests[i]!.headers.authorization?.replace(/^Bearer /, "");
const monthSpend = async (u: TestUser) => (await api(t, "GET", "/v1/me", u.bearer)).body.usage.month_spend_usd as number;
const serverPaidRow = async (taskId: string) => (await t.app.services.db.select({ v: tasks.server_paid }).from(tasks).where(eq(tasks.id, taskId)))[0]!.v;

/** A user with their own key in the vault, and a profile using it ($0.001 per input token). */
async function userWithOwnKey(): Promise<{ u: TestUser; profileId: string }> {
  const u = await createUser(t);
  expect((await api(t, "PUT", "/v1/secrets/MY_KEY", u.bearer, { value: USER_KEY })).status).toBeLessThan(300);
  const r = await api(t, "POST", "/v1/profiles", u.bearer, {
    name: "gateway",
    model: { provider: "anthropic", name: "claude-sonnet-4-6", api_key_secret: "MY_KEY", pricing: { input_per_mtok: 1000, output_per_mtok: 0 } },
    image: t.config.workspaceImage,
    network: "none",
    limits: { max_turns: 5, max_budget_usd: 5, max_concurrency: 5, memory_mb: 256, cpus: 0.5, pids: 128 },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { u, profileId: r.body.id };
}

const dropOwnKey = async (u: TestUser, profileId: string) =>
  expect((await api(t, "PATCH", `/v1/profiles/${profileId}`, u.bearer, { model: { api_key_secret: null } })).status).toBe(200);

/**
 * Task 1 of a new session is held by the model until `release`; task 2 is queued behind it.
 * Meanwhile the profile loses its own key: task 2 runs (or would run) on the server's.
 */
async function switchWhileQueued(u: TestUser, profileId: string) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const first = mock.requests.length;
  mock.script(async (req) => {
    if (req.index === first) await gate;
    return { text: "done", usage: { input_tokens: req.index === first ? 1000 : 4500, output_tokens: 1 } };
  });
  const t1 = await submit(t, u, { profile_id: profileId, prompt: "one" });
  await mock.waitForRequests(first + 1);
  const t2 = await submit(t, u, { session_id: t1.session_id, prompt: "two" });
  await dropOwnKey(u, profileId);
  release();
  return { t1, t2, first };
}

describe("the monthly spend cap follows the key a request is sent with", () => {
  test("a queued task that runs on the server's key after the profile lost its own counts toward the spend; the next submission is refused", async () => {
    mock.reset();
    const { u, profileId } = await userWithOwnKey();
    const { t1, t2, first } = await switchWhileQueued(u, profileId);
    expect(await waitTask(t, u, t1.task_id)).toMatchObject({ status: "completed", cost_usd: 1 });
    const done = await waitTask(t, u, t2.task_id);
    expect(done).toMatchObject({ status: "completed", cost_usd: 4.5, turns: 1 });
    expect([keyOf(first), keyOf(first + 1)]).toEqual([USER_KEY, SERVER_KEY]);
    expect([await serverPaidRow(t1.task_id), await serverPaidRow(t2.task_id)]).toEqual([false, true]);
    // Only the request on the server's key counts.
    expect(await monthSpend(u)).toBe(4.5);
    const refused = await api(t, "POST", "/v1/tasks", u.bearer, { session_id: t1.session_id, prompt: "three" });
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.details).toMatchObject({ limit: "monthly_spend_usd", spent: 4.5 });
  });

  test("with the cap reached, a queued task that would run on the server's key fails before its model request", async () => {
    mock.reset();
    const { u, profileId } = await userWithOwnKey();
    // The cap reached on the server's key (the first test's way).
    const { t1: a1, t2: a2 } = await switchWhileQueued(u, profileId);
    await waitTask(t, u, a1.task_id);
    await waitTask(t, u, a2.task_id);
    expect(await monthSpend(u)).toBe(4.5);
    expect((await api(t, "PATCH", `/v1/profiles/${profileId}`, u.bearer, { model: { api_key_secret: "MY_KEY" } })).status).toBe(200);
    const before = mock.requests.length;
    const { t1, t2 } = await switchWhileQueued(u, profileId);
    expect(await waitTask(t, u, t1.task_id)).toMatchObject({ status: "completed" });
    const failed = await waitTask(t, u, t2.task_id);
    expect(failed).toMatchObject({ status: "failed", turns: 0, cost_usd: 0, error: { code: "BUDGET_EXCEEDED" } });
    expect(failed.error.message).toContain("monthly_spend_usd");
    expect(mock.requests.length).toBe(before + 1);
    expect(await monthSpend(u)).toBe(4.5);
  });

  test("a profile whose base_url is the provider's own API gets the server's key: capped at submit like one without base_url", async () => {
    mock.reset();
    const { u, profileId } = await userWithOwnKey();
    const { t1, t2 } = await switchWhileQueued(u, profileId);
    await waitTask(t, u, t1.task_id);
    await waitTask(t, u, t2.task_id);
    expect(await monthSpend(u)).toBe(4.5);
    for (const base_url of ["https://api.anthropic.com", null]) {
      const p = await api(t, "POST", "/v1/profiles", u.bearer, { name: "official", model: { provider: "anthropic", name: "claude-sonnet-4-6", ...(base_url ? { base_url } : {}) }, image: t.config.workspaceImage });
      expect(p.status, JSON.stringify(p.body)).toBe(201);
      const r = await api(t, "POST", "/v1/tasks", u.bearer, { profile_id: p.body.id, prompt: "x" });
      expect([r.status, r.body.details?.limit], String(base_url)).toEqual([402, "monthly_spend_usd"]);
    }
    // The user's own key is not the server's: not capped.
    expect((await api(t, "PATCH", `/v1/profiles/${profileId}`, u.bearer, { model: { api_key_secret: "MY_KEY" } })).status).toBe(200);
    const own = await submit(t, u, { profile_id: profileId, prompt: "mine" });
    expect(own.status).toBe("queued");
  });
});
