/**
 * `kill -9` of the server while a tool call's command runs: Docker runs the command on. The
 * resumed task kills what is left of it before telling the model the call was interrupted, so it
 * has no effect after that (and a retry does not run beside it).
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
const resultsOf = (req: any) => ((req.body.messages.at(-1)?.content ?? []) as any[]).filter((b) => b.type === "tool_result");

test("a command running at a kill -9 is killed when the task resumes: its later effects never happen", async () => {
  const dataDir = tempDir();
  const db = await databaseArgs(dataDir);
  await runCli(["admin", "create-user", "--data-dir", dataDir, ...db, "--email", "left@example.com", "--password-stdin"], { stdin: "correct horse battery" });
  const tok = await runCli(["token", "create", "--data-dir", dataDir, ...db, "--email", "left@example.com", "--name", "left"]);
  const token = /rc_[0-9a-f]{64}/.exec(tok.stdout)?.[0]!;
  expect(token, tok.stdout + tok.stderr).toBeDefined();

  let server = await spawnServer({ dataDir });
  const profile = await (
    await fetch(server.url + "/v1/profiles", {
      method: "POST",
      headers: json(token),
      body: JSON.stringify({ name: "left", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    })
  ).json();

  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 20; echo done > /workspace/marker" } }] });
  const sub = await (await fetch(server.url + "/v1/tasks", { method: "POST", headers: json(token), body: JSON.stringify({ profile_id: profile.id, prompt: "slow" }) })).json();
  expect(sub.task_id).toMatch(/^task_/);
  // The command runs (its tool_use frame is stored before it starts), then the server dies.
  await waitFor(async () => {
    const frames = (await (await fetch(`${server.url}/v1/sessions/${sub.session_id}/events?limit=100`, { headers: json(token) })).json()).data as any[];
    return frames.some((f) => f.type === "task:tool_use") || null;
  }, { timeoutMs: 30_000, what: "the command started" });
  await Bun.sleep(2000);
  expect(await server.kill("SIGKILL")).not.toBe(0);

  // After the restart: the interrupted call's result, then a look (past the 20 s) at what the
  // leftover command would have done by now.
  let interrupted = "";
  mock.script((req) => {
    const results = resultsOf(req);
    const text = JSON.stringify(results[0]?.content ?? "");
    if (text.includes("interrupted")) {
      interrupted = text;
      return { toolCalls: [{ name: "Bash", input: { command: "sleep 21; ls /workspace/marker 2>&1; echo running: $(ps | grep -c '[s]leep 20')" } }] };
    }
    return { text: "Look: " + text };
  });
  server = await spawnServer({ dataDir });
  try {
    const task = await waitFor(async () => {
      const r = await (await fetch(`${server.url}/v1/tasks/${sub.task_id}`, { headers: json(token) })).json();
      return ["completed", "failed", "cancelled"].includes(r.status) ? r : null;
    }, { timeoutMs: 60_000, what: "recovered task" });
    expect(task.status).toBe("completed");
    expect(task.result_text).toContain("No such file");
    expect(task.result_text).toContain("running: 0");
    expect(interrupted).toContain("was stopped");
  } finally {
    await fetch(`${server.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: json(token) });
    await server.kill("SIGTERM");
    await dropDatabaseFor(dataDir);
  }
}, 150_000);
