/**
 * Task leases across replicas (src/agents/leases.ts): two `runcell serve` processes on one
 * PostgreSQL database with a 2 s lease. `kill -9` of the replica running a task: the other one
 * continues it once the lease runs out, from its last stored step (the finished tool is not run
 * again, the one in flight is reported to the model as interrupted). A task submitted through the
 * other replica into a busy session waits its turn and runs once; a cancel through the other
 * replica stops the task where it runs — or, that replica killed -9 mid-command, ends it and kills
 * what is left of the command.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import type { ServerProcess } from "../../helpers/server-process.ts";

const FINAL = ["completed", "failed", "cancelled"];

describe.skipIf(!PG_SERVER)("task leases across replicas", () => {
  let set: ReplicaSet;
  let mock: MockProviderServer;
  let profileId: string;

  beforeAll(async () => {
    mock = startMockAnthropic();
    set = await startReplicas(2, { flags: ["--replica-lease", "2s"] });
    const r = await fetch(set.servers[0]!.url + "/v1/profiles", {
      method: "POST",
      headers: set.headers,
      body: JSON.stringify({ name: "leases", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
    });
    profileId = (await r.json()).id;
    expect(profileId).toMatch(/^prof_/);
  }, 60_000);
  afterAll(async () => {
    await set?.stop();
    await mock?.stop();
  });

  const api = async (server: ServerProcess, method: string, path: string, body?: unknown) => {
    const r = await fetch(server.url + path, { method, headers: set.headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  const taskRow = async (id: string) => (await set.sql`SELECT status, lease_owner, lease_expires_at, started_at, finished_at FROM tasks WHERE id = ${id}`)[0];

  /** The live replica holding the task's lease (waits for one), and the other live one. */
  async function owner(taskId: string): Promise<{ holder: ServerProcess; other: ServerProcess; id: string }> {
    const id: string = await waitFor(async () => (await taskRow(taskId))?.lease_owner, { timeoutMs: 20_000, what: "a lease on the task" }).catch(async (e) => {
      const logs = set.servers.map((s) => s.output().split("\n").filter((l) => /"level":"(warn|error)"/.test(l)).join("\n"));
      throw new Error(`${(e as Error).message}: ${JSON.stringify(await taskRow(taskId))}\n${logs.join("\n---\n")}`);
    });
    const live = set.servers.filter((s) => s.proc.exitCode === null && !s.proc.killed);
    const ids = await Promise.all(live.map(async (s) => (await (await fetch(s.url + "/healthz")).json()).replica as string | undefined));
    let holder = live[ids.indexOf(id)];
    if (!ids.some(Boolean)) {
      // /healthz without `replica`: the replicas table, in start order, is the order of `servers`.
      const rows = [...(await set.sql`SELECT id FROM replicas ORDER BY started_at`)].map((r: { id: string }) => r.id);
      holder = set.servers[rows.indexOf(id)];
    }
    if (!holder) throw new Error(`no live replica holds ${id} (replicas: ${ids.join(", ")})`);
    return { holder, other: live.find((s) => s !== holder)!, id };
  }

  const waitEnded = (server: ServerProcess, taskId: string, timeoutMs = 30_000) =>
    waitFor(async () => {
      const r = await api(server, "GET", `/v1/tasks/${taskId}`);
      return FINAL.includes(r.body.status) ? r.body : null;
    }, { timeoutMs, what: `task ${taskId} ended` });

  /** The session's stored frames, once the last one is `last` (frames are stored a moment after the row changes). */
  const frames = (server: ServerProcess, sessionId: string, last: (f: any) => boolean = (f) => f?.type === "task:done") =>
    waitFor(async () => {
      const data = (await api(server, "GET", `/v1/sessions/${sessionId}/events?limit=1000`)).body.data as any[];
      return last(data.at(-1)) ? data : null;
    }, { timeoutMs: 5000, what: "the session's last frame" });

  test("kill -9 of the replica running a task: the other one continues it after the lease, without re-running the finished tool", async () => {
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: "echo ran >> /workspace/count.txt" } }] },
      { toolCalls: [{ name: "Bash", input: { command: "echo slow >> /workspace/count.txt; sleep 30" } }] },
    );
    const sub = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "count" })).body;
    expect(sub.task_id).toMatch(/^task_/);
    // The second tool call is running: kill the replica holding the lease outright.
    await mock.waitForRequests(2, 20_000).catch(async (e) => {
      const logs = set.servers.map((s) => s.output().split("\n").filter((l) => !l.includes('"msg":"request"')).join("\n"));
      throw new Error(`${(e as Error).message}: ${JSON.stringify(await taskRow(sub.task_id))}\n${logs.join("\n---\n")}`);
    });
    await Bun.sleep(800);
    const { holder, other, id } = await owner(sub.task_id);
    const killedAt = Date.now();
    expect(await holder.kill("SIGKILL")).not.toBe(0);

    let sawInterrupted = false;
    mock.script((req) => {
      const results = (req.body.messages.at(-1).content ?? []).filter((b: any) => b.type === "tool_result");
      if (results.some((r: any) => JSON.stringify(r.content).includes("interrupted"))) {
        sawInterrupted = true;
        return { toolCalls: [{ name: "Bash", input: { command: "cat /workspace/count.txt" } }] };
      }
      return { text: "Recovered: " + JSON.stringify(results[0]?.content ?? "") };
    });
    const task = await waitEnded(other, sub.task_id);
    expect(task.status).toBe("completed");
    // Not before the lease (2 s, renewed every ~0.67 s) had run out.
    expect(Date.now() - killedAt).toBeGreaterThan(1000);
    expect(sawInterrupted).toBe(true);
    // The first tool ran once, the interrupted one had started once; neither ran again.
    expect(task.result_text).toContain("ran\\nslow\\n");
    expect(task.result_text).not.toContain("ran\\nslow\\nran");
    expect(task.turns).toBe(4);
    expect(mock.requests.length).toBe(4);
    expect(await taskRow(sub.task_id)).toMatchObject({ status: "completed", lease_owner: null, lease_expires_at: null });
    expect(other.output()).toContain("task taken over from another replica");
    expect(other.output()).toContain(id);
    const seen = await frames(other, sub.session_id);
    expect(seen.map((f) => f.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen.at(-1)).toMatchObject({ type: "task:done", status: "completed" });
    // One tool_use frame per call the model made (none repeated by the takeover).
    expect(seen.filter((f) => f.type === "task:tool_use").length).toBe(3);

    // The killed replica comes back for the next tests.
    await set.restart(set.servers.indexOf(holder));
  }, 120_000);

  test("a task submitted through one replica into a session busy on the other waits its turn and runs once", async () => {
    mock.reset();
    mock.script((req) => {
      const last = req.body.messages.at(-1);
      const text = JSON.stringify(last.content);
      if (text.includes("tool_result")) return { text: "one done" };
      if (text.includes("second task")) return { text: "two done" };
      return { toolCalls: [{ name: "Bash", input: { command: "sleep 3; echo one" } }] };
    });
    const first = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "first task" })).body;
    const { other } = await owner(first.task_id);
    await mock.waitForRequests(1, 20_000);
    const second = await api(other, "POST", "/v1/tasks", { session_id: first.session_id, prompt: "second task" });
    expect(second.status).toBe(202);
    // The session's first task still runs on the other replica: the second one waits.
    await Bun.sleep(500);
    expect((await taskRow(second.body.task_id)).status).toBe("queued");
    const two = await waitEnded(other, second.body.task_id);
    expect(two).toMatchObject({ status: "completed", result_text: "two done", turns: 1 });
    const one = await taskRow(first.task_id);
    expect(one.status).toBe("completed");
    expect(Number((await taskRow(second.body.task_id)).started_at)).toBeGreaterThanOrEqual(Number(one.finished_at));
    // Three model requests: the first task's two, the second task's one (run exactly once).
    expect(mock.requests.length).toBe(3);
    expect(mock.requests.filter((r) => JSON.stringify(r.body.messages.at(-1).content).includes("second task")).length).toBe(1);
    const seen = await frames(other, first.session_id, (f) => f?.type === "task:done" && f.task_id === second.body.task_id);
    expect(seen.map((f) => f.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen.filter((f) => f.type === "task:done").map((f) => [f.task_id, f.status])).toEqual([
      [first.task_id, "completed"],
      [second.body.task_id, "completed"],
    ]);
  }, 60_000);

  test("kill -9 of the replica running a command, then a cancel through the other one before it took the task over: the command is killed as the task ends", async () => {
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "Bash", input: { command: "sleep 39; echo done > /workspace/marker" } }] });
    const sub = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "leftover" })).body;
    const { holder, other } = await owner(sub.task_id);
    // The command runs, recorded on the task.
    await waitFor(async () => (await set.sql`SELECT running_exec FROM tasks WHERE id = ${sub.task_id}`)[0]?.running_exec, { timeoutMs: 20_000, what: "the command recorded" });
    const ctr: string = (await set.sql`SELECT docker_id FROM workspaces WHERE session_id = ${sub.session_id}`)[0].docker_id;
    const sleeping = () => Number(Bun.spawnSync(["docker", "exec", ctr, "sh", "-c", "ps | grep -c '[s]leep 39'"]).stdout.toString().trim());
    expect(await holder.kill("SIGKILL")).not.toBe(0);
    expect(sleeping()).toBeGreaterThan(0);
    // The lease (2 s) still holds: the cancel waits for it, then ends the task (or the takeover that
    // came first ends it cancelled before its loop begins).
    const cancelled = await api(other, "POST", `/v1/tasks/${sub.task_id}/cancel`);
    expect(cancelled.status).toBe(202);
    expect(cancelled.body.status).toBe("cancelled");
    expect(sleeping()).toBe(0);
    expect(mock.requests.length).toBe(1);
    expect(await set.sql`SELECT running_exec, pending_tool_use_id FROM tasks WHERE id = ${sub.task_id}`).toEqual([{ running_exec: null, pending_tool_use_id: null }]);
    await set.restart(set.servers.indexOf(holder));
    // Its workspace would hold one of the profile's concurrency slots the next tests need.
    expect((await fetch(`${other.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: set.headers })).status).toBe(204);
  }, 60_000);

  test("a cancel through the other replica stops the task where it runs, promptly; no more model requests", async () => {
    mock.reset();
    mock.script(() => ({ toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] }));
    const sub = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "sleep" })).body;
    const { holder, other } = await owner(sub.task_id);
    await mock.waitForRequests(1, 20_000);
    // The tool is running (its call marked in flight).
    await waitFor(async () => (await set.sql`SELECT pending_tool_use_id FROM tasks WHERE id = ${sub.task_id}`)[0]?.pending_tool_use_id, { timeoutMs: 20_000, what: "the tool call in flight" });
    const started = Date.now();
    const cancelled = await api(other, "POST", `/v1/tasks/${sub.task_id}/cancel`);
    expect(cancelled.status).toBe(202);
    expect(cancelled.body.status).toBe("cancelled");
    // Stopped by its own replica (which heard the cancel), well before the lease or the wait limit.
    expect(Date.now() - started).toBeLessThan(2000);
    expect(holder.output()).toContain("task cancelled through another replica");
    await Bun.sleep(1500);
    expect(mock.requests.length).toBe(1);
    expect(await taskRow(sub.task_id)).toMatchObject({ status: "cancelled", lease_owner: null });
    const seen = await frames(holder, sub.session_id);
    expect(seen.map((f) => f.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen.filter((f) => f.type === "task:tool_result").at(-1)?.output).toContain("[cancelled by the user]");
    expect(seen.at(-1)).toMatchObject({ type: "task:done", status: "cancelled" });
  }, 60_000);

  test("a question asked on one replica and answered through the other: the task continues on the one that took the answer", async () => {
    mock.reset();
    const questions = [{ question: "Which colour?", header: "Colour", options: [{ label: "red" }, { label: "blue" }], multiSelect: false }];
    mock.enqueue(
      { toolCalls: [{ name: "Bash", input: { command: "sleep 1" } }] },
      { toolCalls: [{ name: "AskUserQuestion", input: { questions } }] },
      { toolCalls: [{ name: "Bash", input: { command: "sleep 2" } }] },
      { text: "Blue it is." },
    );
    const sub = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "ask me" })).body;
    const { other } = await owner(sub.task_id);
    const otherId = (await (await fetch(other.url + "/healthz")).json()).replica ?? [...(await set.sql`SELECT id FROM replicas ORDER BY started_at`)][set.servers.indexOf(other)]!.id;
    // Waiting for the answer: the lease is given up, so whichever replica takes the answer resumes it.
    await waitFor(async () => (await taskRow(sub.task_id)).status === "waiting_input", { timeoutMs: 20_000, what: "the question" });
    await waitFor(async () => (await taskRow(sub.task_id)).lease_owner === null, { timeoutMs: 2000, what: "the lease released at the question" });
    expect(await taskRow(sub.task_id)).toMatchObject({ status: "waiting_input", lease_owner: null, lease_expires_at: null });
    expect((await api(other, "POST", `/v1/tasks/${sub.task_id}/answer`, { answer: "blue" })).status).toBe(202);
    // The tool after the answer runs under the answering replica's lease.
    await waitFor(async () => (await set.sql`SELECT lease_owner FROM tasks WHERE id = ${sub.task_id} AND pending_tool_use_id IS NOT NULL`)[0]?.lease_owner === otherId, { timeoutMs: 10_000, what: "the task running on the answering replica" });
    expect(await waitEnded(other, sub.task_id)).toMatchObject({ status: "completed", result_text: "Blue it is.", turns: 4 });
    expect(mock.requests.length).toBe(4);
    expect(JSON.stringify(mock.requests[2]!.body.messages.at(-1).content)).toContain("blue");
    const seen = await frames(other, sub.session_id);
    expect(seen.map((f) => f.seq)).toEqual(seen.map((_, i) => i + 1));
  }, 60_000);

  test("deleting the session through the other replica stops its task where it runs first", async () => {
    mock.reset();
    mock.script(() => ({ toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] }));
    const sub = (await api(set.servers[0]!, "POST", "/v1/tasks", { profile_id: profileId, prompt: "sleep" })).body;
    const { holder, other } = await owner(sub.task_id);
    await waitFor(async () => (await set.sql`SELECT pending_tool_use_id FROM tasks WHERE id = ${sub.task_id}`)[0]?.pending_tool_use_id, { timeoutMs: 20_000, what: "the tool call in flight" });
    const started = Date.now();
    const deleted = await fetch(`${other.url}/v1/sessions/${sub.session_id}`, { method: "DELETE", headers: set.headers });
    expect(deleted.status).toBe(204);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(holder.output()).toContain("task cancelled through another replica");
    await Bun.sleep(1500);
    expect(mock.requests.length).toBe(1);
    expect((await set.sql`SELECT count(*)::int AS n FROM tasks WHERE session_id = ${sub.session_id}`)[0].n).toBe(0);
    // The loop ended before the rows went: nothing failed to be written behind the deletion.
    expect(holder.output()).not.toContain("task queue failed");
    expect(holder.output()).not.toContain("task crashed");
  }, 60_000);

  test("a clean stop of the replica running a task hands it over at once, long before its lease would run out", async () => {
    // A lease of 60 s: only the release at the stop (and the message naming the session) lets the other replica continue it soon.
    const slow = await startReplicas(2, { flags: ["--replica-lease", "60s"] });
    try {
      const headers = slow.headers;
      const profile = await (await fetch(slow.servers[0]!.url + "/v1/profiles", {
        method: "POST",
        headers,
        body: JSON.stringify({ name: "handover", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest", network: "none" }),
      })).json();
      mock.reset();
      let sawInterrupted = false;
      mock.script((req) => {
        const results = (req.body.messages.at(-1).content ?? []).filter((b: any) => b.type === "tool_result");
        if (results.some((r: any) => JSON.stringify(r.content).includes("interrupted"))) {
          sawInterrupted = true;
          return { text: "handed over" };
        }
        return { toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] };
      });
      const sub = await (await fetch(slow.servers[0]!.url + "/v1/tasks", { method: "POST", headers, body: JSON.stringify({ profile_id: profile.id, prompt: "sleep" }) })).json();
      const leaseOwner: string = await waitFor(async () => (await slow.sql`SELECT lease_owner FROM tasks WHERE id = ${sub.task_id} AND pending_tool_use_id IS NOT NULL`)[0]?.lease_owner, { timeoutMs: 20_000, what: "the tool call in flight" });
      const ids = await Promise.all(slow.servers.map(async (s) => (await (await fetch(s.url + "/healthz")).json()).replica as string));
      const byTable = [...(await slow.sql`SELECT id FROM replicas ORDER BY started_at`)].map((r: { id: string }) => r.id);
      const i = ids.some(Boolean) ? ids.indexOf(leaseOwner) : byTable.indexOf(leaseOwner);
      const [holder, other] = [slow.servers[i]!, slow.servers[1 - i]!];
      const stoppedAt = Date.now();
      expect(await holder.kill("SIGTERM")).toBe(0);
      const task = await waitFor(async () => {
        const r = await (await fetch(`${other.url}/v1/tasks/${sub.task_id}`, { headers })).json();
        return FINAL.includes(r.status) ? r : null;
      }, { timeoutMs: 30_000, what: "the handed-over task" });
      expect(task).toMatchObject({ status: "completed", result_text: "handed over" });
      expect(sawInterrupted).toBe(true);
      expect(Date.now() - stoppedAt).toBeLessThan(10_000);
      expect(other.output()).toContain("resuming a task another replica gave up as it stopped");
    } finally {
      await slow.stop();
    }
  }, 120_000);
});
