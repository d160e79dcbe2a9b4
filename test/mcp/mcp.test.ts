/**
 * MCP servers of a profile, end to end with the reference server from npm
 * (@modelcontextprotocol/server-everything): over streamable HTTP on loopback (behind a proxy that
 * demands a bearer token from the vault) and over stdio inside a workspace (the test MCP image).
 * A scripted model (a local Anthropic-format server) calls the tools; their results reach
 * task:tool_result and the model. Also: a server that exits mid-call, cancel during a slow tool,
 * a server that cannot start, allowed_tools, and where the secret header never goes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createProfile, lastToolResults, sessionFrames, submit, waitTask } from "../helpers/agent.ts";
import { EVERYTHING_IN_IMAGE, type HttpMcpServer, MCP_IMAGE, RAW_ECHO, startEverythingHttp, startRawMcp } from "../helpers/mcp-server.ts";
import { type MockProviderServer, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { startMockOpenAI } from "../helpers/mock-openai.ts";
import { waitFor } from "../helpers/net.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let user: TestUser;
let http: HttpMcpServer;

/** A profile on the test MCP image (node, git, the reference MCP server) with a scripted model; `body` adds its fields. */
const profile = (body: Record<string, unknown>) => createProfile(t, user, { mock, tools: ["Bash"], image: MCP_IMAGE, limits: { memory_mb: 512, cpus: 1, pids: 256 }, extra: body });

const toolNames = (req: { body: any }) => (req.body.tools ?? []).map((x: any) => x.name as string);

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic();
  user = await createUser(t);
  http = await startEverythingHttp();
  expect((await api(t, "PUT", "/v1/secrets/MCP_BEARER", user.bearer, { value: `Bearer ${http.token}` })).status).toBe(204);
});
afterAll(async () => {
  await t?.stop();
  await mock?.stop();
  await http?.stop();
});

/** A profile with the reference server over HTTP, and a session whose first task called its echo tool (so its servers are connected). */
async function sessionThatEchoed() {
  const id = await profile({ mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
  mock.reset();
  mock.enqueue({ toolCalls: [{ name: "mcp__everything__echo", input: { message: "one" } }] }, { text: "ok" });
  const first = await submit(t, user, { profile_id: id, prompt: "one" });
  expect((await waitTask(t, user, first.task_id)).status).toBe("completed");
  return { id, first };
}

describe("streamable HTTP", () => {
  test("the model is offered the server's tools, a call's result reaches task:tool_result; the bearer from the vault goes to the server only", async () => {
    const id = await profile({ mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__everything__echo", input: { message: "hello over http" } }] }, { text: "done" });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "echo it" });
    const task = await waitTask(t, user, task_id);
    expect(task.status, JSON.stringify(task)).toBe("completed");

    const offered = mock.requests[0]!.body.tools.find((x: any) => x.name === "mcp__everything__echo");
    expect(offered.input_schema.properties.message.type).toBe("string");
    expect(toolNames(mock.requests[0]!)).toContain("mcp__everything__get-sum");
    expect(lastToolResults(mock.requests[1]!.body)[0]).toMatchObject({ content: "Echo: hello over http" });

    const frames = await sessionFrames(t, user, session_id);
    const use = frames.find((f) => f.type === "task:tool_use" && f.tool === "mcp__everything__echo");
    expect(use.input).toEqual({ message: "hello over http" });
    const result = frames.find((f) => f.type === "task:tool_result" && f.tool_use_id === use.tool_use_id);
    expect(result).toMatchObject({ tool: "mcp__everything__echo", output: "Echo: hello over http", is_error: false });

    // The header reached the server…
    expect(http.seen).toContain(`Bearer ${http.token}`);
    // …and nothing else: not the stream, not the logs, not the workspace (files, env, docker inspect).
    expect(JSON.stringify(frames)).not.toContain(http.token);
    expect(t.logs.join("\n")).not.toContain(http.token);
    const row = (await t.app.services.workspaces.forSession(session_id))!;
    const inside = Bun.spawnSync(["docker", "exec", row.docker_id!, "sh", "-c", "env; grep -rl \"$0\" /workspace /tmp /root 2>/dev/null; true", http.token]).stdout.toString();
    expect(inside).not.toContain(http.token);
    const inspect = Bun.spawnSync(["docker", "inspect", row.docker_id!]).stdout.toString();
    expect(inspect).not.toContain(http.token);
  });

  test("the same through an OpenAI-format model: the tools are offered as functions", async () => {
    const oai = startMockOpenAI();
    try {
      const id = await profile({
        model: { provider: "openai", name: "gpt-4o-mini", base_url: oai.url },
        mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }],
      });
      oai.enqueue({ toolCalls: [{ name: "mcp__everything__get-sum", input: { a: 20, b: 22 } }] }, { text: "42" });
      const { task_id } = await submit(t, user, { profile_id: id, prompt: "add" });
      expect((await waitTask(t, user, task_id)).status).toBe("completed");
      const fn = oai.requests[0]!.body.tools.find((x: any) => x.function.name === "mcp__everything__get-sum");
      expect(fn.function.parameters.type).toBe("object");
      const tool = oai.requests[1]!.body.messages.find((m: any) => m.role === "tool");
      expect(String(tool.content)).toContain("42");
    } finally {
      await oai.stop();
    }
  });

  test("an image result is stored in the workspace and linked with a signed URL", async () => {
    const id = await profile({ mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__everything__get-tiny-image", input: {} }] }, { text: "done" });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "image" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const out = lastToolResults(mock.requests[1]!.body)[0]!.content;
    const m = /\[image: (\/workspace\/\.mcp\/[^ ]+\.png) \(image\/png, (\d+) bytes\) (http\S+)\]/.exec(out);
    expect(m, out).not.toBeNull();
    const res = await fetch(m![3]!.replace(/^https?:\/\/[^/]+/, t.url));
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(Number(m![2]));
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.find((f) => f.type === "task:tool_result" && f.tool === "mcp__everything__get-tiny-image").output).toContain("/workspace/.mcp/");
  });

  test("embedded resources and resource links map to the output", async () => {
    const id = await profile({ mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "mcp__everything__get-resource-reference", input: { resourceType: "Text", resourceId: 2 } }] },
      { toolCalls: [{ name: "mcp__everything__get-resource-reference", input: { resourceType: "Blob", resourceId: 3 } }] },
      { toolCalls: [{ name: "mcp__everything__get-resource-links", input: { count: 2 } }] },
      { text: "done" },
    );
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "resources" });
    const task = await waitTask(t, user, task_id);
    expect(task.status, JSON.stringify(task)).toBe("completed");
    const text = lastToolResults(mock.requests[1]!.body)[0]!;
    expect(text.is_error, text.content).toBeFalsy();
    expect(text.content).toMatch(/\[resource [a-z]+:\/\/\S+\]\n/);
    const blob = lastToolResults(mock.requests[2]!.body)[0]!.content;
    expect(blob).toMatch(/\[resource: \/workspace\/\.mcp\/\S+ \(\S+, \d+ bytes\) http\S+\] \([a-z]+:\/\/\S+\)/);
    const links = lastToolResults(mock.requests[3]!.body)[0]!.content;
    expect(links).toMatch(/\[resource link[^\]]*: [a-z]+:\/\/\S+/);
  });

  test("cancel during an HTTP call sends MCP's cancellation, then ends the server's session", async () => {
    const id = await profile({ mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__everything__trigger-long-running-operation", input: { duration: 60, steps: 60 } }] });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "slow" });
    await waitFor(() => http.requests.some((r) => r.body.includes('"trigger-long-running-operation"')) || null, { timeoutMs: 30_000, what: "the call to reach the server" });
    const before = http.requests.length;
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    expect((await waitTask(t, user, task_id)).status).toBe("cancelled");
    await waitFor(() => http.requests.slice(before).some((r) => r.method === "DELETE") || null, { timeoutMs: 10_000, what: "the session's DELETE" });
    const after = http.requests.slice(before);
    const cancelled = after.find((r) => r.body.includes('"notifications/cancelled"'));
    expect(cancelled, JSON.stringify(after)).toBeDefined();
    expect(after.indexOf(cancelled!)).toBeLessThan(after.findIndex((r) => r.method === "DELETE"));
    const frames = await sessionFrames(t, user, session_id);
    expect(frames.find((f) => f.type === "task:tool_result" && f.tool.startsWith("mcp__everything__")).output).toBe("[cancelled by the user]");
  });

  test("an idle session's servers are closed by the sweep and connected again at its next task", async () => {
    const { first } = await sessionThatEchoed();
    const mcp = t.app.services.mcp;
    expect(await mcp.sweep(60_000)).toBe(0);
    // A session whose task runs keeps its servers, however long since their last call.
    expect(await mcp.sweep(0, Date.now() + 1, () => true)).toBe(0);
    const open = mcp.size;
    expect(await mcp.sweep(0, Date.now() + 1)).toBe(open);
    expect(mcp.size).toBe(0);
    const deletes = http.requests.filter((r) => r.method === "DELETE").length;
    expect(deletes).toBeGreaterThan(0);
    mock.enqueue({ toolCalls: [{ name: "mcp__everything__echo", input: { message: "two" } }] }, { text: "ok" });
    const second = await submit(t, user, { session_id: first.session_id, prompt: "two" });
    expect((await waitTask(t, user, second.task_id)).status).toBe("completed");
    expect(lastToolResults(mock.requests[3]!.body)[0]!.content).toBe("Echo: two");
  });

  test("a change to the profile's mcp_servers closes its sessions' servers at once (the next task starts the new ones)", async () => {
    const { id } = await sessionThatEchoed();
    const mcp = t.app.services.mcp;
    const open = mcp.size;
    const deletes = () => http.requests.filter((r) => r.method === "DELETE").length;
    const before = deletes();
    // A change elsewhere in the profile leaves them up.
    expect((await api(t, "PATCH", `/v1/profiles/${id}`, user.bearer, { system_prompt: "Still the same servers." })).status).toBe(200);
    await Bun.sleep(200);
    expect(mcp.size).toBe(open);
    expect((await api(t, "PATCH", `/v1/profiles/${id}`, user.bearer, { mcp_servers: [] })).status).toBe(200);
    await waitFor(() => mcp.size === open - 1 || null, { what: "the session's servers closed" });
    await waitFor(() => deletes() > before || null, { what: "the server's session ended (DELETE)" });
  });

  test("a wrong bearer: the server is reported as a failed step, the task still completes without its tools", async () => {
    expect((await api(t, "PUT", "/v1/secrets/MCP_WRONG", user.bearer, { value: "Bearer nope" })).status).toBe(204);
    const id = await profile({ mcp_servers: [{ name: "locked", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_WRONG" } } }] });
    mock.reset();
    mock.enqueue({ text: "no tools, fine" });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "hi" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    expect(toolNames(mock.requests[0]!).filter((n: string) => n.startsWith("mcp__"))).toEqual([]);
    const frames = await sessionFrames(t, user, session_id);
    const failed = frames.find((f) => f.type === "task:tool_result" && f.tool === "mcp__locked");
    expect(failed.is_error).toBe(true);
    expect(failed.output).toContain('MCP server "locked" could not start');
    expect(mock.requests[0]!.body.system).toContain('MCP server "locked" is unavailable');
  });

  test("an admin's task:system_prompt is the turn's as the model gets it: the MCP servers' tools and notes included", async () => {
    const admin = await createUser(t, { role: "admin" });
    expect((await api(t, "PUT", "/v1/secrets/MCP_BEARER", admin.bearer, { value: `Bearer ${http.token}` })).status).toBe(204);
    const id = await createProfile(t, admin, {
      mock,
      tools: ["Bash"],
      image: MCP_IMAGE,
      limits: { memory_mb: 512, cpus: 1, pids: 256 },
      extra: { system_prompt: "Be brief.", mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }, { name: "down", transport: "http", url: "http://127.0.0.1:9/mcp" }] },
    });
    mock.reset();
    mock.enqueue({ text: "ok" });
    const { task_id, session_id } = await submit(t, admin, { profile_id: id, prompt: "hi" });
    expect((await waitTask(t, admin, task_id)).status).toBe("completed");
    const frame = (await sessionFrames(t, admin, session_id)).find((f) => f.type === "task:system_prompt");
    const sent = mock.requests[0]!.body;
    expect(frame.system_prompt).toBe(typeof sent.system === "string" ? sent.system : sent.system.map((b: { text: string }) => b.text).join(""));
    expect(frame.system_prompt).toContain('MCP server "down" is unavailable');
    expect(frame.tools).toEqual(toolNames(mock.requests[0]!));
    expect(frame.tools).toContain("mcp__everything__echo");
  });

  test("a server URL that redirects (even to the same origin) is a failed step naming it; the secret header is not sent on to the target", async () => {
    // /moved redirects to /mcp on the same server (the SDK alone would follow that).
    let targetHits = 0;
    const redirecting: ReturnType<typeof Bun.serve> = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req): Response => (new URL(req.url).pathname === "/moved" ? Response.redirect(`http://127.0.0.1:${redirecting.port}/mcp`, 307) : (targetHits++, new Response("no", { status: 500 }))),
    });
    try {
      const id = await profile({ mcp_servers: [{ name: "moved", transport: "http", url: `http://127.0.0.1:${redirecting.port}/moved`, headers: { Authorization: { secret: "MCP_BEARER" } } }] });
      mock.reset();
      mock.enqueue({ text: "no tools, fine" });
      const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "hi" });
      expect((await waitTask(t, user, task_id)).status).toBe("completed");
      const failed = (await sessionFrames(t, user, session_id)).find((f) => f.type === "task:tool_result" && f.tool === "mcp__moved");
      expect(failed.is_error).toBe(true);
      expect(failed.output).toContain("redirects are not followed");
      expect(targetHits).toBe(0);
    } finally {
      redirecting.stop(true);
    }
  });

  test("allowed_tools includes and excludes by pattern", async () => {
    const id = await profile({
      mcp_servers: [{ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }],
      allowed_tools: ["mcp__everything__get-*", "mcp__everything__echo", "!mcp__everything__get-env"],
    });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__everything__get-env", input: {} }] }, { text: "ok" });
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "list" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const names = toolNames(mock.requests[0]!).filter((n: string) => n.startsWith("mcp__"));
    expect(names).toContain("mcp__everything__echo");
    expect(names).toContain("mcp__everything__get-sum");
    expect(names).not.toContain("mcp__everything__get-env");
    expect(names.every((n: string) => n === "mcp__everything__echo" || n.startsWith("mcp__everything__get-"))).toBe(true);
    // A call to an excluded tool is refused like a disabled tool.
    expect(lastToolResults(mock.requests[1]!.body)[0]).toMatchObject({ is_error: true });
  });
});

test("a server that lists one name three times offers it once, under a name the model can use", async () => {
  const raw = startRawMcp({ list: () => ({ tools: [RAW_ECHO, RAW_ECHO, RAW_ECHO] }) });
  try {
    const id = await profile({ mcp_servers: [{ name: "d3", transport: "http", url: raw.url }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__d3__echo", input: { message: "once" } }] }, { text: "ok" });
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "go" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const names = toolNames(mock.requests[0]!);
    expect(names.filter((n: string) => n.startsWith("mcp__d3__"))).toEqual(["mcp__d3__echo"]);
    expect(new Set(names).size).toBe(names.length);
    expect(lastToolResults(mock.requests[1]!.body)[0]).toMatchObject({ content: "echo: once" });
  } finally {
    raw.stop();
  }
});

test("an HTTP server's answer over 16 MiB is cut off there: the call fails, the server's memory is not held, the task goes on", async () => {
  // One server-sent event of 40 MiB, sent in 1 MiB pieces (the SDK would read the whole event before looking at it).
  const chunk = new TextEncoder().encode("a".repeat(1 << 20));
  let sentMiB = 0;
  const raw = startRawMcp({
    call: (msg) =>
      msg.params.arguments.message === "huge"
        ? new Response(
            new ReadableStream({
              start(c) {
                c.enqueue(new TextEncoder().encode('event: message\ndata: {"jsonrpc":"2.0","id":' + JSON.stringify(msg.id) + ',"result":{"content":[{"type":"text","text":"'));
              },
              pull(c) {
                if (++sentMiB > 40) c.close();
                else c.enqueue(chunk);
              },
            }),
            { headers: { "content-type": "text/event-stream" } },
          )
        : undefined,
  });
  try {
    const id = await profile({ mcp_servers: [{ name: "big", transport: "http", url: raw.url, timeout_ms: 30_000 }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__big__echo", input: { message: "huge" } }] }, { toolCalls: [{ name: "mcp__big__echo", input: { message: "small" } }] }, { text: "done" });
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "go" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const cut = lastToolResults(mock.requests[1]!.body)[0]!;
    expect(cut.is_error).toBe(true);
    expect(cut.content).toContain("over 16 MiB, cut off there");
    // The rest was never read: the sender was stopped soon after the limit (the socket's buffers hold a little more).
    expect(sentMiB).toBeLessThan(40);
    expect(lastToolResults(mock.requests[2]!.body)[0]).toMatchObject({ content: "echo: small" });
  } finally {
    raw.stop();
  }
}, 60_000);

describe("stdio in the workspace", () => {
  test("a server started in the workspace answers; it stays up across tasks of the session", async () => {
    const id = await profile({ mcp_servers: [{ name: "ev", transport: "stdio", command: "mcp-server-everything", args: ["stdio"] }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__ev__get-sum", input: { a: 2, b: 3 } }] }, { text: "five" });
    const first = await submit(t, user, { profile_id: id, prompt: "add" });
    expect((await waitTask(t, user, first.task_id)).status).toBe("completed");
    expect(lastToolResults(mock.requests[1]!.body)[0]!.content).toContain("5");
    const row = (await t.app.services.workspaces.forSession(first.session_id))!;
    const ps = () => Bun.spawnSync(["docker", "exec", row.docker_id!, "ps", "-o", "pid,args"]).stdout.toString();
    const before = ps().split("\n").filter((l) => l.includes("mcp-everything"));
    expect(before.length).toBeGreaterThan(0);
    mock.enqueue({ toolCalls: [{ name: "mcp__ev__echo", input: { message: "second task" } }] }, { text: "ok" });
    const second = await submit(t, user, { session_id: first.session_id, prompt: "again" });
    expect((await waitTask(t, user, second.task_id)).status).toBe("completed");
    expect(lastToolResults(mock.requests[3]!.body)[0]!.content).toBe("Echo: second task");
    // Same process: not restarted between tasks.
    expect(ps().split("\n").filter((l) => l.includes("mcp-everything"))).toEqual(before);
  });

  test("a server that exits mid-call: the call reports it, the next call runs on a restarted server", async () => {
    // A stdio wrapper around the reference server that dies when it sees the word "crash".
    const wrapper = `const c=require("child_process").spawn("/usr/local/bin/node",[${JSON.stringify(EVERYTHING_IN_IMAGE)},"stdio"],{stdio:["pipe","inherit","inherit"]});process.stdin.on("data",d=>{if(String(d).includes("crash"))process.exit(3);c.stdin.write(d)});`;
    const id = await profile({ mcp_servers: [{ name: "crashy", transport: "stdio", command: "node", args: ["-e", wrapper] }] });
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "mcp__crashy__echo", input: { message: "crash" } }] },
      { toolCalls: [{ name: "mcp__crashy__echo", input: { message: "after restart" } }] },
      { toolCalls: [{ name: "mcp__crashy__echo", input: { message: "crash again" } }] },
      { text: "recovered" },
    );
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "go" });
    const task = await waitTask(t, user, task_id);
    expect(task.status, JSON.stringify(task)).toBe("completed");
    const died = lastToolResults(mock.requests[1]!.body)[0]!;
    expect(died.is_error).toBe(true);
    expect(died.content).toContain('MCP server "crashy" stopped during the call');
    expect(died.content).toContain("the server is restarted for the next call");
    expect(lastToolResults(mock.requests[2]!.body)[0]).toMatchObject({ content: "Echo: after restart" });
    // Its one restart in this task is spent: the second crash says so, not that it restarts.
    const again = lastToolResults(mock.requests[3]!.body)[0]!;
    expect(again.content).toContain("stopped during the call");
    expect(again.content).toContain("already restarted 1 time(s) in this task: its tools are unavailable until the next task");
  });

  test("a server that writes over 10 MiB without a line break is stopped and its call fails; the server process lives on", async () => {
    // The reference server behind a wrapper that floods stdout when it sees the word "flood".
    const wrapper = `const c=require("child_process").spawn("/usr/local/bin/node",[${JSON.stringify(EVERYTHING_IN_IMAGE)},"stdio"],{stdio:["pipe","inherit","inherit"]});process.stdin.on("data",d=>{if(String(d).includes("flood"))process.stdout.write("a".repeat(11000000));else c.stdin.write(d)});`;
    const id = await profile({ mcp_servers: [{ name: "flood", transport: "stdio", command: "node", args: ["-e", wrapper] }] });
    mock.reset();
    mock.enqueue(
      { toolCalls: [{ name: "mcp__flood__echo", input: { message: "flood" } }] },
      { toolCalls: [{ name: "mcp__flood__echo", input: { message: "after" } }] },
      { text: "survived" },
    );
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "go" });
    const task = await waitTask(t, user, task_id);
    expect(task.status, JSON.stringify(task)).toBe("completed");
    const flooded = lastToolResults(mock.requests[1]!.body)[0]!;
    expect(flooded.is_error).toBe(true);
    expect(flooded.content).toContain('MCP server "flood"');
    expect(flooded.content).toContain("more than 10 MiB without a line break");
    expect(lastToolResults(mock.requests[2]!.body)[0]).toMatchObject({ content: "Echo: after" });
  });

  test("cancel during a slow MCP tool: the task is cancelled at once and the server's work is killed", async () => {
    const id = await profile({ mcp_servers: [{ name: "ev", transport: "stdio", command: "mcp-server-everything", args: ["stdio"] }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__ev__trigger-long-running-operation", input: { duration: 60, steps: 60 } }] });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "slow" });
    await waitFor(async () => (await sessionFrames(t, user, session_id)).find((f) => f.type === "task:tool_use" && f.tool.startsWith("mcp__ev__")), { timeoutMs: 30_000, what: "the MCP tool call" });
    await Bun.sleep(500);
    const row = (await t.app.services.workspaces.forSession(session_id))!;
    const servers = () => Bun.spawnSync(["docker", "exec", row.docker_id!, "ps", "-o", "pid,args"]).stdout.toString().split("\n").filter((l) => l.includes("mcp-everything")).length;
    expect(servers()).toBeGreaterThan(0);
    const started = Date.now();
    expect((await api(t, "POST", `/v1/tasks/${task_id}/cancel`, user.bearer)).status).toBe(202);
    expect((await waitTask(t, user, task_id)).status).toBe("cancelled");
    expect(Date.now() - started).toBeLessThan(10_000);
    const frames = await sessionFrames(t, user, session_id);
    const result = frames.find((f) => f.type === "task:tool_result" && f.tool.startsWith("mcp__ev__"));
    expect(result.is_error).toBe(true);
    expect(result.output).toContain("cancelled");
    await waitFor(() => servers() === 0 || null, { timeoutMs: 10_000, what: "the server process to be gone" });
  });

  test("a call over its server's timeout_ms is stopped and reported", async () => {
    const id = await profile({ mcp_servers: [{ name: "ev", transport: "stdio", command: "mcp-server-everything", args: ["stdio"], timeout_ms: 1500 }] });
    mock.reset();
    mock.enqueue({ toolCalls: [{ name: "mcp__ev__trigger-long-running-operation", input: { duration: 20, steps: 20 } }] }, { toolCalls: [{ name: "mcp__ev__echo", input: { message: "still there" } }] }, { text: "ok" });
    const started = Date.now();
    const { task_id } = await submit(t, user, { profile_id: id, prompt: "slow" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    expect(Date.now() - started).toBeLessThan(15_000);
    const r = lastToolResults(mock.requests[1]!.body)[0]!;
    expect(r.is_error).toBe(true);
    expect(r.content).toContain("timed out after 1500 ms");
    // The next call starts the server again.
    expect(lastToolResults(mock.requests[2]!.body)[0]!.content).toBe("Echo: still there");
  });

  test("a command that does not exist is a failed step, not a crashed task", async () => {
    const id = await profile({ mcp_servers: [{ name: "broken", transport: "stdio", command: "no-such-mcp-server" }] });
    mock.reset();
    mock.enqueue({ text: "fine without it" });
    const { task_id, session_id } = await submit(t, user, { profile_id: id, prompt: "hi" });
    expect((await waitTask(t, user, task_id)).status).toBe("completed");
    const frames = await sessionFrames(t, user, session_id);
    const failed = frames.find((f) => f.type === "task:tool_result" && f.tool === "mcp__broken");
    expect(failed).toMatchObject({ is_error: true });
    expect(failed.output).toContain("could not start");
  });
});

describe("profile validation", () => {
  const cases: [string, unknown, string, RegExp?][] = [
    ["a header value fetch cannot send (beyond Latin-1)", [{ name: "a", transport: "http", url: "http://127.0.0.1:1/mcp", headers: { "X-A": "café中" } }], "mcp_servers[0].headers.X-A", /is not valid \(one line of Latin-1 characters\)/],
    ["a header name with a space", [{ name: "a", transport: "http", url: "http://127.0.0.1:1/mcp", headers: { "Bad Header": "x" } }], "mcp_servers[0].headers.Bad Header", /is not a valid name here/],
    ["an env name with a dash", [{ name: "a", transport: "stdio", command: "x", env: { "BAD-NAME": "x" } }], "mcp_servers[0].env.BAD-NAME", /is not a valid name here/],
    ["duplicate names", [{ name: "a", transport: "http", url: "http://127.0.0.1:1/mcp" }, { name: "A", transport: "stdio", command: "x" }], "mcp_servers[1].name"],
    ["unknown transport", [{ name: "a", transport: "sse", url: "http://127.0.0.1:1/mcp" }], "mcp_servers[0].transport"],
    ["credentials in the URL", [{ name: "a", transport: "http", url: "http://u:p@127.0.0.1:1/mcp" }], "mcp_servers[0].url"],
    ["a transport header", [{ name: "a", transport: "http", url: "http://127.0.0.1:1/mcp", headers: { "Mcp-Session-Id": "x" } }], "mcp_servers[0].headers.Mcp-Session-Id"],
    ["a bad name", [{ name: "has space", transport: "stdio", command: "x" }], "mcp_servers[0].name"],
    ["a name with \"__\" (mcp__a__* would match its tools too)", [{ name: "a__b", transport: "stdio", command: "x" }], "mcp_servers[0].name", /must not contain "__"/],
    ["a name ending in \"_\"", [{ name: "a", transport: "stdio", command: "x" }, { name: "a_", transport: "stdio", command: "x" }], "mcp_servers[1].name", /end with "_"/],
    ["stdio without command", [{ name: "a", transport: "stdio" }], "mcp_servers[0].command"],
    ["a private URL for a user without the exemption", [{ name: "a", transport: "http", url: "http://10.1.2.3/mcp" }], "mcp_servers[0].url"],
  ];
  for (const [what, servers, field, message] of cases) {
    test(`${what} → 400 naming ${field}`, async () => {
      const r = await api(t, "POST", "/v1/profiles", user.bearer, { mcp_servers: servers });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
      expect(r.body.details.field).toBe(field);
      if (message) expect(r.body.error).toMatch(message);
    });
  }

  test("a bad allowed_tools pattern → 400", async () => {
    const r = await api(t, "POST", "/v1/profiles", user.bearer, { allowed_tools: ["mcp__a b"] });
    expect(r.status).toBe(400);
    expect(r.body.details.field).toBe("allowed_tools[0]");
  });
});
