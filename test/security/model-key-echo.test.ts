/**
 * The operator's own provider key never reaches a user through a model error. With the server's
 * ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL routing every profile without a base_url through a
 * gateway (docs/providers.md), a gateway that repeats the key it was given in its error message
 * must not hand that key to the user: the task's error, task:failed and the stored events show
 * `[redacted key]`. (A user's own vault key is scrubbed by the vault's values; the operator's is
 * not one of them.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

const OPERATOR_KEY = "sk-ant-operator-echo-0123456789abcdef";
const saved = { key: process.env.ANTHROPIC_API_KEY, base: process.env.ANTHROPIC_BASE_URL };
let gateway: ReturnType<typeof Bun.serve>;
let t: TestApp;
let user: TestUser;

beforeAll(async () => {
  // A gateway that answers 401 repeating the key it was sent, in either header.
  gateway = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (r) => {
      const sent = r.headers.get("x-api-key") ?? r.headers.get("authorization")?.replace(/^Bearer /, "");
      // A gateway configured with the operator's key may quote it even for a request that sent another.
      const extra = sent === OPERATOR_KEY ? "" : ` (the gateway's own key is ${OPERATOR_KEY})`;
      return Response.json({ type: "error", error: { type: "authentication_error", message: `invalid x-api-key: ${sent}${extra}` } }, { status: 401 });
    },
  });
  process.env.ANTHROPIC_API_KEY = OPERATOR_KEY;
  process.env.ANTHROPIC_BASE_URL = `http://127.0.0.1:${gateway.port}`;
  t = await startTestApp({ flags: ["--allow-model-hosts", "127.0.0.1"] });
  user = await createUser(t);
});

afterAll(async () => {
  await t.stop();
  gateway.stop(true);
  for (const [name, value] of [["ANTHROPIC_API_KEY", saved.key], ["ANTHROPIC_BASE_URL", saved.base]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

test("a gateway echoing the operator's key: the user sees [redacted key] in the task, task:failed and the replay", async () => {
  const p = await api(t, "POST", "/v1/profiles", user.bearer, {
    name: "through the operator's gateway",
    system_prompt: "x",
    model: { provider: "anthropic", name: "claude-sonnet-4-6" },
    image: t.config.workspaceImage,
    network: "none",
  });
  expect(p.status, JSON.stringify(p.body)).toBe(201);
  const { task_id, session_id } = await submit(t, user, { profile_id: p.body.id, prompt: "hello" });
  const task = await waitTask(t, user, task_id);
  expect(task.status).toBe("failed");
  expect(task.error).toEqual({ code: "MODEL_ERROR", message: "invalid x-api-key: [redacted key]" });
  const frames = await sessionFrames(t, user, session_id);
  const failed = frames.find((f) => f.type === "task:failed");
  expect(failed?.error).toBe("invalid x-api-key: [redacted key]");
  expect(JSON.stringify(frames)).not.toContain(OPERATOR_KEY);
});

test("a user's own key sent through the operator's gateway: neither it nor the operator's key the gateway quotes reaches the user", async () => {
  const USER_KEY = "sk-ant-user-own-key-9876543210";
  expect((await api(t, "PUT", "/v1/secrets/MY_ANTHROPIC_KEY", user.bearer, { value: USER_KEY })).status).toBe(204);
  const p = await api(t, "POST", "/v1/profiles", user.bearer, {
    name: "own key, operator's gateway",
    system_prompt: "x",
    model: { provider: "anthropic", name: "claude-sonnet-4-6", api_key_secret: "MY_ANTHROPIC_KEY" },
    image: t.config.workspaceImage,
    network: "none",
  });
  expect(p.status, JSON.stringify(p.body)).toBe(201);
  const { task_id, session_id } = await submit(t, user, { profile_id: p.body.id, prompt: "hello" });
  const task = await waitTask(t, user, task_id);
  expect(task.error).toEqual({ code: "MODEL_ERROR", message: "invalid x-api-key: [redacted key] (the gateway's own key is [redacted key])" });
  const frames = JSON.stringify(await sessionFrames(t, user, session_id));
  expect(frames).not.toContain(OPERATOR_KEY);
  expect(frames).not.toContain(USER_KEY);
});
