/**
 * One MCP server connection (src/mcp/connection.ts) against small HTTP servers speaking MCP's
 * streamable HTTP (JSON answers) on loopback: a server that pages its tool list forever, one with
 * too many tools in a page, one that never answers (a cancel gives up at once), and one that
 * restarts and forgets the session (the client makes a new one and the call goes through).
 */
import { afterEach, expect, test } from "bun:test";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { MAX_TOOLS, McpConnection } from "../../src/mcp/connection.ts";

const ECHO = { name: "echo", description: "Echoes", inputSchema: { type: "object", properties: { message: { type: "string" } } } };
type Msg = { jsonrpc: "2.0"; id?: number | string; method: string; params?: any };

const servers: { stop(force?: boolean): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

function mcpServer(opts: { list?: (cursor: string | undefined) => unknown; hang?: boolean } = {}) {
  const sessions = new Set<string>();
  let made = 0;
  const counts = { list: 0, initialize: 0, calls: 0 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      if (req.method !== "POST") return new Response(null, { status: req.method === "DELETE" ? 200 : 405 });
      const msg = (await req.json()) as Msg;
      if (msg.method === "initialize") {
        counts.initialize++;
        if (opts.hang) return new Promise<Response>(() => {});
        const sid = `s${++made}`;
        sessions.add(sid);
        return Response.json({ jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "raw", version: "1" } } }, { headers: { "mcp-session-id": sid } });
      }
      const sid = req.headers.get("mcp-session-id");
      if (!sid || !sessions.has(sid)) return Response.json({ jsonrpc: "2.0", id: msg.id ?? null, error: { code: -32001, message: "Session not found" } }, { status: 404 });
      if (msg.id === undefined) return new Response(null, { status: 202 });
      if (msg.method === "tools/list") {
        counts.list++;
        return Response.json({ jsonrpc: "2.0", id: msg.id, result: opts.list?.(msg.params?.cursor) ?? { tools: [ECHO] } });
      }
      counts.calls++;
      return Response.json({ jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: `echo: ${msg.params.arguments.message}` }] } });
    },
  });
  servers.push(server);
  return { url: `http://127.0.0.1:${server.port}/mcp`, counts, restart: () => sessions.clear() };
}

const connection = (url: string) => new McpConnection("raw", async () => ({ transport: new StreamableHTTPClientTransport(new URL(url)) }), 10_000);

test("a tool list that pages forever ends: a cursor seen again or a page without tools stops it", async () => {
  let n = 0;
  const empty = mcpServer({ list: () => ({ tools: [], nextCursor: `c${++n}` }) });
  const c = connection(empty.url);
  await c.connect();
  expect(c.tools).toEqual([]);
  expect(empty.counts.list).toBe(1);
  await c.stop();

  const looping = mcpServer({ list: (cursor) => ({ tools: [{ ...ECHO, name: `t${cursor ?? 0}` }], nextCursor: "same" }) });
  const d = connection(looping.url);
  await d.connect();
  expect(d.tools.map((x) => x.name)).toEqual(["t0", "tsame"]);
  await d.stop();
});

test("at most MAX_TOOLS tools of one server, also from a single page", async () => {
  const many = mcpServer({ list: () => ({ tools: Array.from({ length: MAX_TOOLS + 500 }, (_, i) => ({ ...ECHO, name: `t${i}` })) }) });
  const c = connection(many.url);
  await c.connect();
  expect(c.tools.length).toBe(MAX_TOOLS);
  await c.stop();
});

test("a cancel gives up on a server that never answers, at once", async () => {
  const silent = mcpServer({ hang: true });
  const c = connection(silent.url);
  const ctl = new AbortController();
  const started = performance.now();
  setTimeout(() => ctl.abort(new Error("cancelled")), 200);
  await expect(c.connect(ctl.signal)).rejects.toThrow();
  expect(performance.now() - started).toBeLessThan(3_000);
});

test("a server that restarted and forgot the session: a new session is made and the call goes through", async () => {
  const s = mcpServer();
  const c = connection(s.url);
  await c.connect();
  const first = await c.call("echo", { message: "one" }, new AbortController().signal);
  expect(first).toMatchObject({ ok: true });
  s.restart();
  const second = await c.call("echo", { message: "two" }, new AbortController().signal);
  expect(second.ok, JSON.stringify(second)).toBe(true);
  expect((second as { result: { content: { text: string }[] } }).result.content[0]!.text).toBe("echo: two");
  expect(s.counts.initialize).toBe(2);
  expect(s.counts.calls).toBe(2);
  await c.stop();
});
