/**
 * Issue 16 benchmark: an MCP tool call's round trip through runcell — from the moment the model's
 * streamed answer asking for the tool ends (the local Anthropic-format server's last frame) to the
 * task:tool_result frame at a WebSocket subscriber — against calling the same server directly:
 * - streamable HTTP (the reference server, @modelcontextprotocol/server-everything, on loopback):
 *   baseline = the SDK client's callTool round trip to the same endpoint; goal ≤ 1.5×;
 * - stdio in the workspace (the test MCP image): baseline = a plain Docker exec round trip in the
 *   same container (what a Bash tool call costs); goal ≤ 1.5×.
 * Median of ITER calls each. Never fails on timing.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startTestApp } from "../test/helpers/app.ts";
import { MCP_IMAGE, startEverythingHttp } from "../test/helpers/mcp-server.ts";
import { startMockAnthropic } from "../test/helpers/mock-anthropic.ts";
import { createUser } from "../test/helpers/users.ts";
import { median, report } from "./lib/util.ts";

const ITER = Number(process.env.BENCH_MCP_ITER ?? 30);

const t = await startTestApp({ flags: ["--log-level", "error"] });
const http = await startEverythingHttp();
const mock = startMockAnthropic();
// Every prompt: one echo call, then a short answer.
mock.script((req) => {
  const last = req.body.messages[req.body.messages.length - 1];
  const answered = Array.isArray(last.content) && last.content.some((b: any) => b.type === "tool_result");
  const tool = (req.body.tools as { name: string }[]).find((x) => x.name.endsWith("__echo"))!.name;
  return answered ? { text: "ok" } : { toolCalls: [{ name: tool, input: { message: "ping" } }] };
});

async function throughRuncell(token: string, profileId: string): Promise<{ times: number[]; sessionId: string }> {
  const ws = new WebSocket(`${t.wsUrl}/v1/stream`, [`Bearer.${token}`]);
  await new Promise((r) => ws.addEventListener("open", r, { once: true }));
  const times: number[] = [];
  let sessionId = "";
  let onDone: (() => void) | null = null;
  ws.addEventListener("message", (m) => {
    const f = JSON.parse(m.data as string);
    if (f.type === "task:tool_result" && !f.tool_use_id.startsWith("setup_")) {
      const asked = mock.timings[mock.timings.length - 1]!.lastFrameAt!;
      times.push(performance.now() - asked);
    }
    if (f.session_id) sessionId = f.session_id;
    if (f.type === "task:done" || f.type === "turn.done" || f.type === "task:failed") onDone?.();
  });
  for (let i = 0; i < ITER + 2; i++) {
    const done = new Promise<void>((r) => (onDone = r));
    ws.send(JSON.stringify({ type: "task.submit", ...(sessionId ? { session_id: sessionId } : { profile_id: profileId }), prompt: "echo" }));
    await done;
  }
  ws.close();
  // The first two calls connect the server and warm the path.
  return { times: times.slice(2), sessionId };
}

try {
  const user = await createUser(t);
  await fetch(`${t.url}/v1/secrets/MCP_BEARER`, { method: "PUT", headers: user.bearer, body: JSON.stringify({ value: `Bearer ${http.token}` }) });
  const mk = async (mcp: unknown) => {
    const r = await fetch(`${t.url}/v1/profiles`, {
      method: "POST",
      headers: user.bearer,
      body: JSON.stringify({ name: "mcp bench", model: { provider: "anthropic", name: "claude-sonnet-4-6", base_url: mock.url }, image: MCP_IMAGE, network: "none", tools: [], mcp_servers: [mcp], limits: { max_concurrency: 50, memory_mb: 512 } }),
    });
    return ((await r.json()) as { id: string }).id;
  };

  // Streamable HTTP: through runcell vs the SDK client directly (same proxy, same bearer).
  const viaHttp = await throughRuncell(user.token, await mk({ name: "everything", transport: "http", url: http.url, headers: { Authorization: { secret: "MCP_BEARER" } } }));
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers: { Authorization: `Bearer ${http.token}` } } }));
  const direct: number[] = [];
  for (let i = 0; i < ITER + 2; i++) {
    const t0 = performance.now();
    await client.callTool({ name: "echo", arguments: { message: "ping" } });
    if (i >= 2) direct.push(performance.now() - t0);
  }
  await client.close();

  // stdio in the workspace: through runcell vs a plain Docker exec in the same container.
  const viaStdio = await throughRuncell(user.token, await mk({ name: "ev", transport: "stdio", command: "mcp-server-everything", args: ["stdio"] }));
  const exec: number[] = [];
  for (let i = 0; i < ITER + 2; i++) {
    const t0 = performance.now();
    await t.app.services.workspaces.exec(viaStdio.sessionId, { cmd: ["true"] });
    if (i >= 2) exec.push(performance.now() - t0);
  }

  console.log(`# MCP benchmark (${ITER} calls each, median; model asks → task:tool_result at a WebSocket subscriber) — ${new Date().toISOString()}`);
  report("MCP http: runcell vs SDK client direct", median(viaHttp.times), median(direct), "ms", "≤1.5×", "lower");
  report("MCP stdio: runcell vs plain docker exec", median(viaStdio.times), median(exec), "ms", "≤1.5×", "lower");
} finally {
  await t.stop();
  await mock.stop();
  await http.stop();
}
