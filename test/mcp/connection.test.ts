/**
 * One MCP server connection (src/mcp/connection.ts) against small HTTP servers speaking MCP's
 * streamable HTTP (JSON answers) on loopback: a server that pages its tool list forever, one with
 * too many tools in a page, one that never answers (a cancel gives up at once, without cancelling
 * initialize), one whose finished requests a later cancel leaves alone, and one that restarts and
 * forgets the session (the client makes a new one and the call goes through), and one whose answer
 * stream breaks mid-call (reported as stopped at once, not at the call's timeout).
 */
import { afterEach, expect, test } from "bun:test";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { RAW_ECHO as ECHO, type RawMcpServer, startRawMcp } from "../helpers/mcp-server.ts";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { MAX_TOOLS, McpConnection } from "../../src/mcp/connection.ts";

const servers: RawMcpServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});
const mcpServer = (opts?: Parameters<typeof startRawMcp>[0]) => {
  const s = startRawMcp(opts);
  servers.push(s);
  return s;
};

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
  // MCP: "The initialize request MUST NOT be cancelled by clients" — the connection is closed instead.
  await Bun.sleep(100);
  expect(silent.notifications.filter((m) => m.method === "notifications/cancelled")).toEqual([]);
});

test("a cancel after the requests finished sends no cancellation for them (initialize, tools/list, a finished call)", async () => {
  const s = mcpServer();
  const c = connection(s.url);
  const task = new AbortController();
  await c.connect(task.signal);
  await c.refresh(task.signal);
  expect(await c.call("echo", { message: "one" }, task.signal)).toMatchObject({ ok: true });
  task.abort("cancel");
  await Bun.sleep(200);
  expect(s.notifications.map((m) => m.method)).toEqual(["notifications/initialized"]);
  await c.stop();
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

test("a server whose answer stream breaks during a call (it died): reported as stopped at once, not at the timeout; the next call reconnects", async () => {
  const s = mcpServer();
  // In front of it, a proxy whose answer to the call "die" is an event stream cut off before its
  // answer (the connection destroyed, as when the server process dies); the rest passes through.
  let broke = 0;
  const proxy = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString();
    if (body.includes('"die"')) {
      broke++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": working\n\n");
      setTimeout(() => res.socket?.destroy(), 200);
      return;
    }
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== "host" && k !== "content-length")) as Record<string, string>;
    const r = await fetch(s.url, { method: req.method, headers, body: req.method === "POST" ? body : undefined });
    res.writeHead(r.status, r.headers.toJSON());
    res.end(Buffer.from(await r.arrayBuffer()));
  });
  await new Promise<void>((ok) => proxy.listen(0, "127.0.0.1", ok));
  const c = connection(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`);
  try {
    await c.connect();
    const t0 = performance.now();
    const r = await c.call("echo", { message: "die" }, new AbortController().signal);
    expect(performance.now() - t0).toBeLessThan(5_000); // the call's timeout is 10 s
    expect(r.ok).toBe(false);
    expect((r as { message: string }).message).toContain('MCP server "raw" stopped during the call to echo');
    expect((r as { message: string }).message).toContain("was not retried");
    expect(broke).toBe(1);
    // The next call reconnects and goes through.
    const next = await c.call("echo", { message: "again" }, new AbortController().signal);
    expect(next.ok, JSON.stringify(next)).toBe(true);
    expect(s.counts.initialize).toBe(2);
  } finally {
    await c.stop();
    proxy.close();
  }
});
