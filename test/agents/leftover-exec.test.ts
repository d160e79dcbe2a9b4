/**
 * `kill -9` of the server while a tool call's command runs: Docker runs the command on. The
 * resumed task kills what is left of it before telling the model the call was interrupted, so it
 * has no effect after that (and a retry does not run beside it). A task that ends without resuming
 * — cancelled first, or failed by its resumed run before it reaches the call — kills it as it ends.
 */
import { afterAll, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { createLogger } from "../../src/log.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { removeInstanceWorkspaces, testConfig } from "../helpers/app.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { databaseFor, dropDatabaseFor, PG_SERVER } from "../helpers/pg.ts";
import { type SpawnedAgent, spawnedAgent } from "../helpers/spawned-agent.ts";

const mock = startMockAnthropic();
afterAll(() => mock.stop());

/** Waits until the session's command has started (its tool_use frame is stored before it starts). */
const commandStarted = (a: SpawnedAgent, sessionId: string) =>
  waitFor(async () => (await a.events(sessionId)).some((f) => f.type === "task:tool_use") || null, { timeoutMs: 30_000, what: "the command started" });
const resultsOf = (req: any) => ((req.body.messages.at(-1)?.content ?? []) as any[]).filter((b) => b.type === "tool_result");

test("a command running at a kill -9 is killed when the task resumes: its later effects never happen", async () => {
  const a = await spawnedAgent("left", { modelUrl: mock.url });
  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 20; echo done > /workspace/marker" } }] });
  const sub = await a.submit("slow");
  // The command runs, then the server dies.
  await commandStarted(a, sub.session_id);
  await Bun.sleep(2000);
  expect(await a.kill("SIGKILL")).not.toBe(0);

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
  await a.restart();
  try {
    const task = await a.finished(sub.task_id, { timeoutMs: 60_000, what: "recovered task" });
    expect(task.status).toBe("completed");
    expect(task.result_text).toContain("No such file");
    expect(task.result_text).toContain("running: 0");
    expect(interrupted).toContain("was stopped");
  } finally {
    await a.close(sub.session_id);
  }
}, 150_000);

// A graceful stop (SIGTERM) kills the command itself; the resumed task tells the model what it had
// printed and that the server's stop ended it — not that it "may or may not have completed".
test("a command running at a graceful stop: the resumed task reports its output up to the stop and why it ended", async () => {
  const a = await spawnedAgent("left-term", { modelUrl: mock.url });
  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "echo first-part; sleep 30; echo done > /workspace/marker" } }] });
  const sub = await a.submit("slow, then stopped");
  await commandStarted(a, sub.session_id);
  await Bun.sleep(2000);
  expect(await a.kill("SIGTERM")).toBe(0);

  let interrupted = "";
  mock.script((req) => {
    const results = resultsOf(req);
    interrupted = JSON.stringify(results[0]?.content ?? "");
    return { text: "Seen." };
  });
  await a.restart();
  try {
    const task = await a.finished(sub.task_id, { timeoutMs: 60_000, what: "resumed task" });
    expect(task.status).toBe("completed");
    expect(interrupted).toContain("first-part");
    expect(interrupted).toContain("the server was stopped while this command was running, and stopped the command with it");
    expect(interrupted).not.toContain("may or may not");
  } finally {
    await a.close(sub.session_id);
  }
}, 150_000);

/**
 * A server killed -9 while a task's command (`sleep 47`, then a marker file) runs, and the runcell
 * that comes next on its data dir, built but not started: nothing has resumed the task yet.
 */
async function killedMidCommand(name: string) {
  const a = await spawnedAgent(name, { modelUrl: mock.url });
  const { dataDir } = a;
  mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 47; echo done > /workspace/marker" } }] });
  const sub = await a.submit(name);
  await commandStarted(a, sub.session_id);
  await Bun.sleep(2000);
  expect(await a.kill("SIGKILL")).not.toBe(0);

  const database = PG_SERVER ? await databaseFor(dataDir) : null;
  const app = await createApp(testConfig({ port: await freePort(), dataDir, database }), { logger: createLogger({ level: "error", sink: () => {} }) });
  const s = app.services;
  const task = (await s.tasks.byId(sub.task_id))!;
  const ctr = (await s.workspaces.forSession(sub.session_id))!.docker_id!;
  return {
    app,
    task,
    profileId: a.profile.id as string,
    sleeping: () => Number(Bun.spawnSync(["docker", "exec", ctr, "sh", "-c", "ps | grep -c '[s]leep 47'"]).stdout.toString().trim()),
    /** The interrupted call's stored result (what the session's next turn tells the model). */
    async toolResult() {
      s.transcript.release(sub.session_id);
      const step = (await s.transcript.steps(sub.session_id)).find((x) => x.role === "tool_result");
      return JSON.stringify(step?.content ?? null);
    },
    async cleanup() {
      const instance = s.workspaces.instanceId;
      await app.stop();
      removeInstanceWorkspaces(instance);
      await dropDatabaseFor(dataDir);
    },
  };
}

/** The premise: the command runs on in its container, and is recorded on the task. */
function leftoverRuns(k: Awaited<ReturnType<typeof killedMidCommand>>) {
  expect(k.sleeping()).toBeGreaterThan(0);
  expect(k.task.running_exec).toMatchObject({ pid: expect.any(Number), start: expect.any(Number) });
}

test("a task cancelled before it resumes after a kill -9 has its leftover command killed as it ends", async () => {
  const k = await killedMidCommand("leftcancel");
  try {
    leftoverRuns(k);
    // The cancel the API would make (the task is not running here yet: nothing resumed it).
    const ended = await k.app.services.orchestrator.cancel(k.task.user_id, k.task.id);
    expect(ended.status).toBe("cancelled");
    expect(ended.running_exec).toBeNull();
    expect(k.sleeping()).toBe(0);
    expect(await k.toolResult()).toContain("was then stopped (its processes killed)");
  } finally {
    await k.cleanup();
  }
}, 120_000);

test("a resumed task that fails before it reaches the interrupted call kills the leftover command too", async () => {
  const k = await killedMidCommand("leftfail");
  try {
    leftoverRuns(k);
    // Its profile went while the server was down: the resumed run fails at once.
    await k.app.services.profiles.delete(k.task.user_id, k.profileId);
    await k.app.start();
    const ended = await waitFor(async () => {
      const r = (await k.app.services.tasks.byId(k.task.id))!;
      return r.status === "failed" ? r : null;
    }, { timeoutMs: 30_000, what: "the resumed task failed" });
    expect(ended.error_message).toContain("no longer exists");
    expect(k.sleeping()).toBe(0);
    expect(await k.toolResult()).toContain("was then stopped (its processes killed)");
  } finally {
    await k.cleanup();
  }
}, 120_000);
