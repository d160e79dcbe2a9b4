/**
 * `kill -9` of the server while a session's stdio MCP server runs in its workspace: a server that
 * does not exit at the end of its stdin (here a wrapper that does not pass it on to the reference
 * server it started) runs on in the container. The resumed task kills it (and what it started)
 * before it starts the session's servers again: one set of them runs afterwards, not two.
 */
import { afterAll, expect, test } from "bun:test";
import { EVERYTHING_IN_IMAGE, MCP_IMAGE } from "../helpers/mcp-server.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { spawnedAgent } from "../helpers/spawned-agent.ts";

const mock = startMockAnthropic();
afterAll(() => mock.stop());

const resultsOf = (req: any) => ((req.body.messages.at(-1)?.content ?? []) as any[]).filter((b) => b.type === "tool_result");
// Passes stdin's data on, never its end: the reference server (and so the wrapper) lives on once its client is gone.
const WRAPPER = `const c=require("child_process").spawn("/usr/local/bin/node",[${JSON.stringify(EVERYTHING_IN_IMAGE)},"stdio"],{stdio:["pipe","inherit","inherit"]});process.stdin.on("data",d=>c.stdin.write(d));`;

test("a stdio MCP server left running by a kill -9 is killed when the task resumes; its replacement runs alone", async () => {
  const a = await spawnedAgent("mcpleft", {
    modelUrl: mock.url,
    profile: {
      image: MCP_IMAGE,
      tools: ["Bash"],
      limits: { memory_mb: 512, cpus: 1, pids: 256 },
      mcp_servers: [{ name: "ev", transport: "stdio", command: "node", args: ["-e", WRAPPER] }],
    },
  });

  mock.enqueue({ toolCalls: [{ name: "mcp__ev__echo", input: { message: "one" } }] }, { toolCalls: [{ name: "Bash", input: { command: "sleep 30" } }] });
  const sub = await a.submit("echo, then wait");
  let ctr = "";
  try {
    // The MCP call is done and the command runs: the server dies.
    await waitFor(async () => (await a.events(sub.session_id)).some((f) => f.type === "task:tool_use" && f.tool === "Bash") || null, { timeoutMs: 60_000, what: "the Bash call" });
    expect(JSON.stringify(resultsOf(mock.requests[1]!))).toContain("Echo: one");
    const ws = await a.get(`/v1/sessions/${sub.session_id}`);
    const ctrId = ws.container_id;
    expect(ctrId, JSON.stringify(ws)).toMatch(/^ctr_/);
    ctr = `runcell-${ctrId}`;
    /** The pids of the wrapper and the reference server it started. */
    const servers = () =>
      Bun.spawnSync(["docker", "exec", ctr, "ps", "-o", "pid,args"]).stdout.toString()
        .split("\n")
        .filter((l) => l.includes("mcp-everything"))
        .map((l) => Number(l.trim().split(/\s+/)[0]))
        .sort((a, b) => a - b);
    const before = servers();
    expect(before.length).toBe(2);
    expect(await a.kill("SIGKILL")).not.toBe(0);
    await Bun.sleep(1000);
    // Their client is gone; they live on.
    expect(servers()).toEqual(before);

    mock.script((req) => {
      const results = resultsOf(req);
      if (JSON.stringify(results).includes("interrupted")) return { toolCalls: [{ name: "mcp__ev__echo", input: { message: "two" } }] };
      return { text: "Said: " + JSON.stringify(results[0]?.content ?? "") };
    });
    await a.restart();
    const task = await a.finished(sub.task_id, { timeoutMs: 60_000, what: "the resumed task" });
    expect(task.status).toBe("completed");
    expect(task.result_text).toContain("Echo: two");
    // One wrapper and one reference server: the new ones; the old ones are gone.
    const after = servers();
    expect(after.length).toBe(2);
    expect(after.filter((p) => before.includes(p))).toEqual([]);
    expect(a.server.output()).toContain("stdio MCP servers an earlier server process left running were stopped");
  } finally {
    await a.close(sub.session_id);
  }
}, 180_000);
