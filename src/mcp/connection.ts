/**
 * One MCP server of one session, through the official SDK client: connect (initialize, then list
 * every page of tools), call a tool with a per-call timeout and cancellation, and close. A server
 * that dies is restarted once on the next call (a new process or HTTP session); a call it was
 * running is reported, never retried (it may have had effects). A cancelled or timed-out call
 * sends MCP's cancellation notification (the SDK does) and then stops the server, so a stdio
 * server's work really ends; the next call starts it again. Only a request still running is ever
 * cancelled, and initialize never is (a cancel during it closes the connection).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type CallToolResult, ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { VERSION } from "../version.ts";

export const CONNECT_TIMEOUT_MS = 60_000;
/** Automatic restarts after the server died (a new task resets the count). */
export const MAX_RESTARTS = 1;

export interface McpTransportHandle {
  transport: Transport;
  /** What the server said on stderr lately (stdio), for error messages. */
  detail?: () => string;
  /** Why runcell closed the transport itself (an answer over the size limit), for error messages. */
  why?: () => string | null;
}

export type CallOutcome = { ok: true; result: CallToolResult } | { ok: false; message: string; cancelled?: boolean };

export class McpConnection {
  tools: Tool[] = [];
  /** ready: connected; dead: the server went away; stopped: closed on purpose (cancel, timeout). */
  state: "new" | "ready" | "dead" | "stopped" | "failed" = "new";
  lastError: string | null = null;
  restarts = 0;
  private client: Client | null = null;
  private handle: McpTransportHandle | null = null;
  private connecting: Promise<void> | null = null;
  /**
   * Aborted when the connection's stream breaks under a call (an HTTP server that died: the SDK
   * reports it, but leaves the request waiting for an answer that cannot come until its timeout).
   */
  private broken = new AbortController();

  constructor(
    readonly name: string,
    private open: () => Promise<McpTransportHandle>,
    private timeoutMs: number,
  ) {}

  private detail(): string {
    const why = this.handle?.why?.();
    const d = this.handle?.detail?.();
    const parts = [why, d ? `stderr: ${d.split("\n").slice(-5).join(" | ").slice(-500)}` : null].filter(Boolean);
    return parts.length ? ` (${parts.join("; ")})` : "";
  }

  /**
   * Connects and lists the tools; throws an Error whose message says what failed. `signal` (the
   * task's) gives up at once: a cancel never waits for a server that does not answer.
   */
  connect(signal?: AbortSignal): Promise<void> {
    this.connecting ??= this.doConnect(signal).finally(() => (this.connecting = null));
    return this.connecting;
  }

  /** Reads the tool list again on a connected server (a new task may see tools the server added since). */
  async refresh(signal?: AbortSignal): Promise<void> {
    if (this.state !== "ready" || !this.client) return this.connect(signal);
    try {
      this.tools = await listAllTools(this.client, signal);
    } catch (e) {
      if (signal?.aborted) throw e;
      // Gone since the last task (a stdio server whose workspace stopped): start it again.
      this.state = "dead";
      await this.connect(signal);
    }
  }

  private async doConnect(signal?: AbortSignal): Promise<void> {
    await this.closeClient();
    const client = new Client({ name: "runcell", version: VERSION }, { capabilities: {} });
    try {
      signal?.throwIfAborted();
      this.handle = await this.open();
      const broken = (this.broken = new AbortController());
      client.onclose = () => {
        if (this.client === client && this.state === "ready") this.state = "dead";
      };
      client.onerror = (e) => {
        if (this.client === client && streamBroke(e)) broken.abort(e);
      };
      // MCP: "The initialize request MUST NOT be cancelled by clients" — so the task's signal is not
      // given to connect(): a cancel closes the connection instead, which ends the wait at once.
      const giveUp = () => void client.close().catch(() => {});
      signal?.addEventListener("abort", giveUp, { once: true });
      try {
        await client.connect(this.handle.transport, { timeout: CONNECT_TIMEOUT_MS });
        this.tools = await listAllTools(client, signal);
      } finally {
        signal?.removeEventListener("abort", giveUp);
      }
      signal?.throwIfAborted();
      this.client = client;
      this.state = "ready";
      this.lastError = null;
    } catch (e) {
      const detail = this.detail();
      await client.close().catch(() => {});
      this.state = "failed";
      this.lastError = `${errorText(e)}${detail}`;
      throw new Error(this.lastError);
    }
  }

  /** Ready to call, restarting a dead server once; an Error says why not. */
  private async ready(): Promise<Client> {
    if (this.state === "ready" && this.client) return this.client;
    if (this.state === "dead" || this.state === "failed") {
      if (this.restarts >= MAX_RESTARTS) throw new Error(`it stopped and was already restarted ${this.restarts} time(s) in this task${this.lastError ? `: ${this.lastError}` : ""}`);
      this.restarts++;
    }
    await this.connect();
    return this.client!;
  }

  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallOutcome> {
    let client: Client;
    try {
      client = await this.ready();
    } catch (e) {
      return { ok: false, message: `MCP server "${this.name}" is not available: ${errorText(e)}` };
    }
    let broken = this.broken.signal;
    const send = (c: Client) => {
      broken = this.broken.signal;
      return whileRunning(signal, (s) => c.callTool({ name: tool, arguments: args }, undefined, { signal: s ? AbortSignal.any([s, broken]) : broken, timeout: this.timeoutMs }) as Promise<CallToolResult>);
    };
    try {
      let result: CallToolResult;
      try {
        result = await send(client);
      } catch (e) {
        if (signal.aborted || !sessionLost(e)) throw e;
        // The HTTP server no longer knows our session (it restarted): the request was refused, not
        // run, so a new session is made and the call sent again — as MCP asks of a client.
        this.state = "dead";
        client = await this.ready();
        result = await send(client);
      }
      return { ok: true, result };
    } catch (e) {
      if (signal.aborted) {
        await this.stop();
        // (Nothing came back: the task's loop writes the cancellation into the tool's result.)
        return { ok: false, message: "", cancelled: true };
      }
      if (broken.aborted) {
        // The server went away under the call (its stream broke): reported now, not at the timeout.
        await this.closeClient();
        this.state = "dead";
        this.lastError = `its connection broke during a call (${errorText(broken.reason)})`;
        return { ok: false, message: `MCP server "${this.name}" stopped during the call to ${tool} (its connection broke: ${errorText(broken.reason)}). The call was not retried; ${this.nextCall("reconnected")}` };
      }
      if (e instanceof McpError && e.code === ErrorCode.RequestTimeout) {
        await this.stop();
        return { ok: false, message: `MCP tool ${tool} of server "${this.name}" timed out after ${this.timeoutMs} ms; the server was stopped (it starts again on the next call)` };
      }
      if (this.state !== "ready" || (e instanceof McpError && e.code === ErrorCode.ConnectionClosed)) {
        const detail = this.detail();
        this.state = "dead";
        this.lastError = `exited during a call${detail}`;
        return { ok: false, message: `MCP server "${this.name}" stopped during the call to ${tool}${detail}. The call was not retried; ${this.nextCall("restarted")}` };
      }
      return { ok: false, message: `MCP tool ${tool} of server "${this.name}" failed: ${errorText(e)}` };
    }
  }

  /** What the next call will find, for the message of a call the server stopped during. */
  private nextCall(how: "restarted" | "reconnected"): string {
    return this.restarts < MAX_RESTARTS ? `the server is ${how} for the next call.` : `it was already ${how} ${this.restarts} time(s) in this task: its tools are unavailable until the next task.`;
  }

  /** Closes the server on purpose (cancel, timeout, end of session); the next call reconnects. */
  async stop(): Promise<void> {
    await this.closeClient();
    this.state = "stopped";
  }

  private async closeClient() {
    const c = this.client;
    const h = this.handle;
    this.client = null;
    this.handle = null;
    const http = h?.transport as { terminateSession?: () => Promise<void> } | undefined;
    await http?.terminateSession?.().catch(() => {});
    if (c) await c.close().catch(() => {});
    else if (h) await h.transport.close().catch(() => {});
  }
}

/** Tools taken from one server, and pages of tools/list read to find them. */
export const MAX_TOOLS = 1000;
export const MAX_TOOL_PAGES = 100;

/**
 * Every page of tools/list: at most MAX_TOOLS tools and MAX_TOOL_PAGES pages, and no further once
 * a cursor comes back or a page brings nothing (a server paging forever would hold the task).
 */
async function listAllTools(client: Client, signal?: AbortSignal): Promise<Tool[]> {
  const tools: Tool[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; pages < MAX_TOOL_PAGES; pages++) {
    const page = await whileRunning(signal, (s) => client.listTools(cursor ? { cursor } : undefined, { timeout: CONNECT_TIMEOUT_MS, signal: s }));
    tools.push(...page.tools);
    cursor = page.nextCursor;
    if (!cursor || seen.has(cursor) || !page.tools.length || tools.length >= MAX_TOOLS) break;
    seen.add(cursor);
  }
  return tools.slice(0, MAX_TOOLS);
}

/**
 * Runs one request with a signal that follows the task's `signal` only while the request runs.
 * The SDK never removes the abort listener it adds to a request's signal, so given the task's own
 * signal, a later cancel would send `notifications/cancelled` for every request that finished long
 * ago; only the one running is to be cancelled.
 */
async function whileRunning<T>(signal: AbortSignal | undefined, run: (signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
  if (!signal) return run(undefined);
  signal.throwIfAborted();
  const ctl = new AbortController();
  const follow = () => ctl.abort(signal.reason);
  signal.addEventListener("abort", follow, { once: true });
  try {
    return await run(ctl.signal);
  } finally {
    signal.removeEventListener("abort", follow);
  }
}

/**
 * The SDK's report that an HTTP call's event stream broke (the server died or the connection
 * dropped) or could not be resumed: the call waiting on it will get no answer.
 */
function streamBroke(e: unknown): boolean {
  return /^(SSE stream disconnected|Failed to reconnect|Maximum reconnection attempts)/.test((e as Error)?.message ?? "");
}

/** An HTTP server answered that it does not know our session (MCP: 404; some servers say 400 "No valid session ID"). */
function sessionLost(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  const text = e instanceof Error ? e.message : "";
  return (code === 404 && /session/i.test(text)) || /No valid session ID|Session not found/i.test(text);
}

export function errorText(e: unknown): string {
  if (e instanceof McpError) return e.message.replace(/^MCP error -?\d+: /, "");
  return e instanceof Error ? e.message : String(e);
}
