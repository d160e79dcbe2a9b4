/**
 * The reference MCP server (@modelcontextprotocol/server-everything, from npm) over streamable
 * HTTP on loopback, behind a small proxy that demands a bearer token (so tests can check that a
 * header from the vault reaches the server and nowhere else) and records what it saw.
 */
import { resolve } from "node:path";
import { freePort, waitFor } from "./net.ts";

export const EVERYTHING_JS = resolve(import.meta.dir, "../../node_modules/@modelcontextprotocol/server-everything/dist/index.js");
/** The same server inside the test MCP image (scripts/test-mcp-image.sh). */
export const MCP_IMAGE = process.env.RUNCELL_TEST_MCP_IMAGE ?? "runcell-test/mcp:latest";
export const EVERYTHING_IN_IMAGE = "/opt/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

export interface HttpMcpServer {
  /** The proxy's MCP endpoint (…/mcp). */
  url: string;
  /** The server itself, without the proxy (for direct SDK calls in benchmarks). */
  directUrl: string;
  token: string;
  /** Authorization headers the proxy received (one per request). */
  seen: (string | null)[];
  /** Every request through the proxy: method and (POST) body text. */
  requests: { method: string; body: string }[];
  stop(): Promise<void>;
}

export async function startEverythingHttp(token = `mcp-${crypto.randomUUID()}`): Promise<HttpMcpServer> {
  const port = await freePort();
  const proc = Bun.spawn(["node", EVERYTHING_JS, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdout: "ignore", stderr: "pipe" });
  const directUrl = `http://127.0.0.1:${port}/mcp`;
  await waitFor(async () => (await fetch(directUrl, { method: "GET" }).catch(() => null)) !== null || null, { timeoutMs: 20_000, what: "server-everything over HTTP" });
  const seen: (string | null)[] = [];
  const requests: { method: string; body: string }[] = [];
  const proxy = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // The transport's GET stream (server → client messages) stays open between calls.
    idleTimeout: 0,
    async fetch(req) {
      const auth = req.headers.get("authorization");
      seen.push(auth);
      if (auth !== `Bearer ${token}`) return new Response(JSON.stringify({ error: "unauthorized" }), { status: 401, headers: { "content-type": "application/json" } });
      const u = new URL(req.url);
      const headers = new Headers(req.headers);
      headers.delete("authorization");
      headers.delete("host");
      const body = req.method === "POST" ? await req.text() : undefined;
      requests.push({ method: req.method, body: body ?? "" });
      const res = await fetch(`http://127.0.0.1:${port}${u.pathname}${u.search}`, { method: req.method, headers, body });
      return new Response(res.body, { status: res.status, headers: res.headers });
    },
  });
  return {
    url: `http://127.0.0.1:${proxy.port}/mcp`,
    directUrl,
    token,
    seen,
    requests,
    async stop() {
      proxy.stop(true);
      proc.kill();
      await proc.exited;
    },
  };
}

/** A tool the raw server lists by default. */
export const RAW_ECHO = { name: "echo", description: "Echoes", inputSchema: { type: "object", properties: { message: { type: "string" } } } };
type RawMsg = { jsonrpc: "2.0"; id?: number | string; method: string; params?: any };

export interface RawMcpServer {
  url: string;
  counts: { list: number; initialize: number; calls: number };
  /** Every notification the client sent (messages without an id), in order. */
  notifications: RawMsg[];
  /** Forgets every session (as a restarted server would). */
  restart(): void;
  stop(): void;
}

/**
 * A small MCP server speaking streamable HTTP (JSON answers) on loopback, written by hand so it can
 * misbehave: `list` answers tools/list (a page per cursor), `hang` never answers initialize, `call`
 * answers a tool call its own way (else calls echo their `message`).
 */
export function startRawMcp(opts: { list?: (cursor: string | undefined) => unknown; hang?: boolean; call?: (msg: RawMsg) => Response | undefined } = {}): RawMcpServer {
  const sessions = new Set<string>();
  let made = 0;
  const counts = { list: 0, initialize: 0, calls: 0 };
  const notifications: RawMsg[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      if (req.method !== "POST") return new Response(null, { status: req.method === "DELETE" ? 200 : 405 });
      const msg = (await req.json()) as RawMsg;
      if (msg.id === undefined) notifications.push(msg);
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
        return Response.json({ jsonrpc: "2.0", id: msg.id, result: opts.list?.(msg.params?.cursor) ?? { tools: [RAW_ECHO] } });
      }
      counts.calls++;
      return opts.call?.(msg) ?? Response.json({ jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: `echo: ${msg.params.arguments.message}` }] } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/mcp`, counts, notifications, restart: () => sessions.clear(), stop: () => server.stop(true) };
}
