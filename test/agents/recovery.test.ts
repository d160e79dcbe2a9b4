/**
 * `kill -9` of the server in the middle of a task: after a restart the task continues from its
 * last completed step — finished tool calls are not run again, the one in flight is reported to
 * the model as interrupted — and completes.
 */
import { afterAll, expect, test } from "bun:test";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { tempDir } from "../helpers/app.ts";
import { spawnServer } from "../helpers/server-process.ts";
import { waitFor } from "../helpers/net.ts";
import { runCli } from "../helpers/cli.ts";
import { databaseArgs, dropDatabaseFor } from "../helpers/pg.ts";

const mock = startMockAnthropic();
afterAll(() => mock.stop());

const json = (token: string) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" });

test("a task survives kill -9 of the server and completes without re-running finished tools", async () => {
  const dataDir = tempDir();
  // The PostgreSQL pass: the CLI works on the database spawnServer's server uses.
  const db = await databaseArgs(dataDir);
  await runCli(["admin", "create-user", "--data-dir", dataDir, ...db, "--email", "k9@example.com", "--password-stdin"], { stdin: "correct horse battery" });
  const tok = await runCli(["token", "create", "--data-dir", dataDir, ...db, "--email", "k9@example.com", "--name", "k9"]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0];
  expect(token, tok.stdout + tok.stderr).toBeDefined();

  let server = await spawnServer({ dataDir });
  const profile = await (
    await fetch(server.url + "/v1/profiles", {
      method: "POST",
      headers: json(token!),
      body: JSON.stringify({ name: "k9", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    })
  ).json();

  mock.enqueue(
    { toolCalls: [{ name: "Bash", input: { command: "echo ran >> /workspace/count.txt" } }] },
    { toolCalls: [{ name: "Bash", input: { command: "echo slow >> /workspace/count.txt; sleep 30" } }] },
  );
  const sub = await (await fetch(server.url + "/v1/tasks", { method: "POST", headers: json(token!), body: JSON.stringify({ profile_id: profile.id, prompt: "count" }) })).json();
  expect(sub.task_id).toMatch(/^task_/);

  // Wait until the second tool call is running, then kill the server outright.
  await mock.waitForRequests(2, 20_000);
  await Bun.sleep(800);
  expect(await server.kill("SIGKILL")).not.toBe(0);

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
  server = await spawnServer({ dataDir });
  try {
    const task = await waitFor(async () => {
      const r = await (await fetch(`${server.url}/v1/tasks/${sub.task_id}`, { headers: json(token!) })).json();
      return ["completed", "failed", "cancelled"].includes(r.status) ? r : null;
    }, { timeoutMs: 30_000, what: "recovered task" });
    expect(task.status).toBe("completed");
    expect(sawInterrupted).toBe(true);
    // The first tool ran once, the interrupted one had started once; neither ran again.
    expect(task.result_text).toContain("ran\\nslow\\n");
    expect(task.result_text).not.toContain("ran\\nslow\\nran");
    expect(task.turns).toBe(4);
    const frames = (await (await fetch(`${server.url}/v1/sessions/${sub.session_id}/events?limit=1000`, { headers: json(token!) })).json()).data;
    expect(frames.map((f: any) => f.seq)).toEqual(frames.map((_: any, i: number) => i + 1));
    expect(frames.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
  } finally {
    await fetch(`${server.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: json(token!) });
    await server.kill("SIGTERM");
    await dropDatabaseFor(dataDir);
  }
}, 120_000);

// The text streamed by a model request the server was stopped in (kill -9 or SIGTERM) is removed
// from the log when the resumed task makes that request again: a replay shows the answer once.
test.each(["SIGKILL", "SIGTERM"] as const)("after a %s mid-answer the re-requested answer's text is in the log once, numbered above the removed frames", async (signal) => {
  const dataDir = tempDir();
  const db = await databaseArgs(dataDir);
  const email = `cut-${signal.toLowerCase()}@example.com`;
  await runCli(["admin", "create-user", "--data-dir", dataDir, ...db, "--email", email, "--password-stdin"], { stdin: "correct horse battery" });
  const tok = await runCli(["token", "create", "--data-dir", dataDir, ...db, "--email", email, "--name", "cut"]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0]!;
  expect(token, tok.stdout + tok.stderr).toBeDefined();
  let server = await spawnServer({ dataDir });
  const get = async (path: string) => (await fetch(server.url + path, { headers: json(token) })).json();
  const frames = async (sid: string) => (await get(`/v1/sessions/${sid}/events?limit=1000`)).data as any[];
  const text = (fs: any[]) => fs.filter((f) => f.type === "task:token").map((f) => f.text).join("");
  const pieces = Array.from({ length: 30 }, (_, i) => `t${i} `);
  const profile = await (
    await fetch(server.url + "/v1/profiles", {
      method: "POST",
      headers: json(token),
      body: JSON.stringify({ name: "cut", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    })
  ).json();
  mock.reset();
  mock.enqueue({ text: pieces, usage: { input_tokens: 10, output_tokens: 30 }, hangAfter: 16 });
  const sub = await (await fetch(server.url + "/v1/tasks", { method: "POST", headers: json(token), body: JSON.stringify({ profile_id: profile.id, prompt: "SLOW" }) })).json();
  // Stored (the read flushes the log), then the server stops mid-answer.
  const before = await waitFor(async () => {
    const fs = await frames(sub.session_id);
    return text(fs) === pieces.slice(0, 16).join("") ? fs : null;
  }, { timeoutMs: 20_000, what: "16 pieces streamed" });
  const cutSeqs = before.filter((f) => f.type === "task:token").map((f) => f.seq);
  await server.kill(signal);

  mock.enqueue({ text: pieces, usage: { input_tokens: 10, output_tokens: 30 } });
  server = await spawnServer({ dataDir });
  try {
    const task = await waitFor(async () => {
      const r = await get(`/v1/tasks/${sub.task_id}`);
      return ["completed", "failed", "cancelled"].includes(r.status) ? r : null;
    }, { timeoutMs: 30_000, what: "resumed task" });
    expect(task.status).toBe("completed");
    expect(task.result_text).toBe(pieces.join("").trim());
    // The cut request's input was written when message_start came, even before a kill -9.
    expect(task.input_tokens).toBe(20);
    const after = await frames(sub.session_id);
    expect(text(after)).toBe(pieces.join(""));
    const seqs = after.map((f) => f.seq);
    expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
    // No seq of a removed frame is given again.
    const newTokens = after.filter((f) => f.type === "task:token").map((f) => f.seq);
    expect(Math.min(...newTokens)).toBeGreaterThan(Math.max(...cutSeqs));
    expect(after.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
  } finally {
    await fetch(`${server.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: json(token) });
    await server.kill("SIGTERM");
    await dropDatabaseFor(dataDir);
  }
}, 120_000);

// The request under way when the server stopped is the same turn when it is made again: a task
// killed mid-answer in its last allowed turn (max_turns 1, or a budget its cut-off input alone
// reached) is asked again and completes, instead of failing a limit only the crash made it reach.
test.each([
  ["max_turns", { max_turns: 1 }],
  ["max_budget_usd", { max_budget_usd: 0.3 }],
] as const)("a task killed mid-answer in its last allowed turn is asked again, not failed for %s", async (limit, limits) => {
  const dataDir = tempDir();
  const db = await databaseArgs(dataDir);
  await runCli(["admin", "create-user", "--data-dir", dataDir, ...db, "--email", `last-${limit}@example.com`, "--password-stdin"], { stdin: "correct horse battery" });
  const tok = await runCli(["token", "create", "--data-dir", dataDir, ...db, "--email", `last-${limit}@example.com`, "--name", "last"]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0]!;
  expect(token, tok.stdout + tok.stderr).toBeDefined();
  let server = await spawnServer({ dataDir });
  const get = async (path: string) => (await fetch(server.url + path, { headers: json(token) })).json();
  const profile = await (
    await fetch(server.url + "/v1/profiles", {
      method: "POST",
      headers: json(token),
      body: JSON.stringify({ name: "last", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    })
  ).json();
  mock.reset();
  // 100,000 input tokens of claude-sonnet-4-6 cost $0.30: the cut request alone reaches a $0.30 budget.
  const usage = { input_tokens: 100_000, output_tokens: 10 };
  mock.enqueue({ text: ["Half ", "an ", "answer"], usage, hangAfter: 2 });
  const sub = await (
    await fetch(server.url + "/v1/tasks", { method: "POST", headers: json(token), body: JSON.stringify({ profile_id: profile.id, prompt: "one turn", ...limits }) })
  ).json();
  expect(sub.task_id, JSON.stringify(sub)).toMatch(/^task_/);
  // Mid-answer, with the cut request's input charged: turns 1, cost $0.30.
  await waitFor(async () => {
    const t = await get(`/v1/tasks/${sub.task_id}`);
    return t.status === "running" && t.turns === 1 && t.cost_usd >= 0.3 ? t : null;
  }, { timeoutMs: 20_000, what: "the cut request charged" });
  expect(await server.kill("SIGKILL")).not.toBe(0);

  mock.enqueue({ text: ["The ", "answer"], usage });
  server = await spawnServer({ dataDir });
  try {
    const task = await waitFor(async () => {
      const r = await get(`/v1/tasks/${sub.task_id}`);
      return ["completed", "failed", "cancelled"].includes(r.status) ? r : null;
    }, { timeoutMs: 30_000, what: "resumed task" });
    expect(task.error).toBeNull();
    expect(task.status).toBe("completed");
    expect(task.result_text).toBe("The answer");
    expect(mock.requests.length).toBe(2);
    // Still one turn; both requests are paid for (the cut one's input, the repeated one in full).
    expect(task.turns).toBe(1);
    expect(task.input_tokens).toBe(200_000);
    expect(task.cost_usd).toBeGreaterThan(0.6);
  } finally {
    await fetch(`${server.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: json(token) });
    await server.kill("SIGTERM");
    await dropDatabaseFor(dataDir);
  }
}, 120_000);
