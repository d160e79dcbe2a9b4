/**
 * The MCP servers of running sessions. At the start of each task the loop asks `prepare` for the
 * session's servers: each is connected (once per session; again after it died or the profile's
 * servers changed) and its tools are offered as `mcp__<server>__<tool>`, filtered by the profile's
 * `allowed_tools`. stdio servers run inside the session's workspace through Docker exec (so they
 * see its files and its image's programs); http servers are called from runcell through the
 * owner's network rule (the SSRF guard). `env` and `headers` secrets are resolved at connect time
 * and exist only in the server process or the request headers, never in events or logs.
 *
 * A stdio server outlives a server process killed without closing it (kill -9, a crash) when it
 * does not exit at the end of its stdin (a wrapper that does not pass it on, a child it started):
 * Docker runs it on. So every stdio server is started with `RUNCELL_MCP_SERVER=<this process's
 * token>` in its environment, and before a session's servers are first started here, the
 * processes in its workspace marked with another token — an earlier server process's, with their
 * descendants — are killed: a resumed or next task does not run its servers beside old ones.
 */
import { boundedFetch } from "../lib/bounded-fetch.ts";
import { randomHex } from "../lib/crypto.ts";
import type { Logger } from "../log.ts";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { EnvValue, McpServerConfig } from "../db/schema.ts";
import { MCP_TIMEOUT_DEFAULT_MS } from "../schema/profile.ts";
import type { AttachedProcess, ProcessOptions } from "../workspaces/process.ts";
import { errorText, McpConnection, type McpTransportHandle } from "./connection.ts";
import { ExecStdioTransport } from "./exec-transport.ts";
import { modelToolName, toolFilter } from "./names.ts";
import { resultText } from "./results.ts";

export interface McpDeps {
  workspaces: {
    spawn(sessionId: string, opts: ProcessOptions): Promise<AttachedProcess>;
    /** Kills the workspace's processes whose environment has `name` set to another value than `keep` (how many). */
    killMarked(sessionId: string, name: string, keep: string): Promise<number>;
    busy(sessionId: string, delta: 1 | -1): Promise<void>;
    /** Stores a result file in the session's workspace; returns a signed URL for it. */
    storeFile(sessionId: string, relPath: string, data: Uint8Array): Promise<string>;
  };
  secrets: { resolveEnv(userId: string, values: Record<string, EnvValue>, field?: string): Promise<Record<string, string>> };
  /** The fetch an http server's requests use for this owner (the SSRF guard), undefined: the global one. */
  route(userId: string, url: string): Promise<{ fetch?: typeof fetch }>;
  log?: Logger;
}

/** The variable that marks a stdio server's process (and what it starts) as this server process's. */
export const MCP_MARKER = "RUNCELL_MCP_SERVER";

/** A tool as a model is offered it (the providers' ToolSpec). */
export interface ToolSpec {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface OfferedTool {
  spec: ToolSpec;
  server: string;
  tool: string;
}

export interface McpPrepared {
  tools: OfferedTool[];
  /** Servers that could not start or list their tools this time, with why. */
  failures: { server: string; message: string }[];
}

export interface McpCallResult {
  output: string;
  isError: boolean;
  cancelled?: boolean;
}

interface SessionServers {
  /** When the session last prepared or called (its servers are closed after the workspace idle timeout). */
  usedAt: number;
  key: string;
  userId: string;
  /** The profile whose `mcp_servers` these are (a change to them closes them at once). */
  profileId: string | null;
  conns: Map<string, McpConnection>;
  offered: Map<string, { server: string; tool: string }>;
}

/** What identifies a session's server list: a change to it means its servers are started anew. */
const keyOf = (servers: McpServerConfig[]) => JSON.stringify(servers);

/** The most one answer of an HTTP MCP server may hold (a stdio server's line: the SDK's 10 MiB). */
export const MCP_HTTP_ANSWER_MAX = 16 * 1024 * 1024;

export class McpManager {
  private sessions = new Map<string, SessionServers>();
  /** This server process's MCP_MARKER value (every process's of one length: see workspaces/exec.ts killMarked). */
  readonly marker = randomHex(12);

  constructor(private d: McpDeps) {}

  private transportFor(userId: string, sessionId: string, s: McpServerConfig, index: number): () => Promise<McpTransportHandle> {
    const field = `mcp_servers[${index}]`;
    if (s.transport === "stdio") {
      return async () => {
        const env = s.env ? await this.d.secrets.resolveEnv(userId, s.env, `${field}.env`) : undefined;
        const t = new ExecStdioTransport(() => this.d.workspaces.spawn(sessionId, { cmd: [s.command, ...(s.args ?? [])], env: { ...env, [MCP_MARKER]: this.marker } }));
        return { transport: t, detail: () => t.stderrTail(), why: () => t.stoppedBecause };
      };
    }
    return async () => {
      const headers = s.headers ? await this.d.secrets.resolveEnv(userId, s.headers, `${field}.headers`) : {};
      const route = await this.d.route(userId, s.url);
      // Every answer is bounded: the SDK reads a whole JSON answer or server-sent event before it
      // looks at it, so a server sending without end would hold this server's memory without end.
      // Past the limit the connection is closed (the SDK would otherwise wait for the rest of an
      // event that never comes, until the call's timeout): its calls fail now, the next reconnects.
      let why: string | null = null;
      const bounded = boundedFetch(route.fetch ?? fetch, MCP_HTTP_ANSWER_MAX, () => {
        why = `it sent an answer over ${MCP_HTTP_ANSWER_MAX / 1024 / 1024} MiB, cut off there`;
        queueMicrotask(() => void transport.close().catch(() => {}));
        return new Error(`MCP server "${s.name}" ${why}`);
      });
      const transport = new StreamableHTTPClientTransport(new URL(s.url), { requestInit: { headers }, fetch: refuseRedirects(bounded, s.name) });
      return { transport, why: () => why };
    };
  }

  /** Connects the session's servers (those not connected yet) and lists what the model is offered. */
  async prepare(userId: string, sessionId: string, servers: McpServerConfig[], allowed: string[], reserved: Iterable<string>, signal?: AbortSignal, profileId: string | null = null): Promise<McpPrepared> {
    if (!servers.length) {
      await this.closeSession(sessionId);
      return { tools: [], failures: [] };
    }
    const key = keyOf(servers);
    let entry = this.sessions.get(sessionId);
    if (entry && (entry.key !== key || entry.userId !== userId)) {
      await this.closeSession(sessionId);
      entry = undefined;
    }
    if (!entry) {
      if (servers.some((s) => s.transport === "stdio")) await this.stopLeftovers(sessionId);
      entry = { key, userId, profileId, conns: new Map(), offered: new Map(), usedAt: Date.now() };
      servers.forEach((s, i) => entry!.conns.set(s.name, new McpConnection(s.name, this.transportFor(userId, sessionId, s, i), s.timeout_ms ?? MCP_TIMEOUT_DEFAULT_MS)));
      this.sessions.set(sessionId, entry);
    }
    entry.usedAt = Date.now();
    const conns = [...entry.conns.values()];
    const results = await Promise.allSettled(
      conns.map(async (c) => {
        c.restarts = 0;
        await c.refresh(signal);
      }),
    );
    signal?.throwIfAborted();
    const failures = results.flatMap((r, i) => (r.status === "rejected" ? [{ server: conns[i]!.name, message: errorText(r.reason) }] : []));
    const taken = new Set(reserved);
    const pass = toolFilter(allowed);
    const tools: OfferedTool[] = [];
    entry.offered.clear();
    for (const c of conns) {
      if (c.state !== "ready") continue;
      // A server that lists a name twice has one tool by that name (calls go by name): offered once.
      const listed = new Set<string>();
      for (const t of c.tools) {
        if (listed.has(t.name)) continue;
        listed.add(t.name);
        const name = modelToolName(c.name, t.name, taken);
        if (!pass(name)) continue;
        const about = t.description ?? t.title ?? t.annotations?.title ?? "";
        entry.offered.set(name, { server: c.name, tool: t.name });
        tools.push({
          server: c.name,
          tool: t.name,
          spec: { name, description: `${about}`.slice(0, 4000) || `Tool ${t.name} of the MCP server ${c.name}`, input_schema: { ...t.inputSchema, type: "object" } as Record<string, unknown> },
        });
      }
    }
    return { tools, failures };
  }

  /**
   * The session's stdio servers an earlier server process started and left running (see the
   * header), killed before this one starts its own; a failure is logged, and the servers start anyway.
   */
  private async stopLeftovers(sessionId: string) {
    try {
      const n = await this.d.workspaces.killMarked(sessionId, MCP_MARKER, this.marker);
      if (n) this.d.log?.info("stdio MCP servers an earlier server process left running were stopped", { session_id: sessionId, processes: n });
    } catch (err) {
      this.d.log?.warn("stdio MCP servers an earlier server process left running could not be stopped", { session_id: sessionId, err });
    }
  }

  /** Calls an offered tool; the output is the model's tool result (files stored in the workspace). */
  async call(sessionId: string, name: string, input: Record<string, unknown>, signal: AbortSignal, callId: string): Promise<McpCallResult> {
    const entry = this.sessions.get(sessionId);
    const target = entry?.offered.get(name);
    const conn = target && entry!.conns.get(target.server);
    if (!target || !conn) return { output: `Tool ${name} is not available in this session`, isError: true };
    entry!.usedAt = Date.now();
    await this.d.workspaces.busy(sessionId, 1);
    try {
      const r = await conn.call(target.tool, input, signal);
      if (!r.ok) return { output: r.message, isError: true, cancelled: r.cancelled };
      const output = await resultText(r.result, { store: (rel, data) => this.d.workspaces.storeFile(sessionId, rel, data) }, { server: target.server, tool: target.tool, callId });
      return { output, isError: r.result.isError === true };
    } finally {
      await this.d.workspaces.busy(sessionId, -1);
    }
  }

  /** Stops a session's servers (session deleted, workspace removed, profile's servers changed). */
  async closeSession(sessionId: string): Promise<void> {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    this.sessions.delete(sessionId);
    await Promise.all([...entry.conns.values()].map((c) => c.stop()));
  }

  /**
   * The profile was saved with `servers`: its sessions whose servers differ have them closed now
   * (a removed server's process, holding its secrets, does not run on until the next task or the
   * idle sweep); the next task starts the new ones. A session whose task runs keeps its servers
   * until its next task (`prepare` sees the change).
   */
  async profileChanged(profileId: string, servers: McpServerConfig[], running: (sessionId: string) => boolean = () => false): Promise<number> {
    const key = keyOf(servers);
    const ids = [...this.sessions].filter(([id, e]) => e.profileId === profileId && e.key !== key && !running(id)).map(([id]) => id);
    await Promise.all(ids.map((id) => this.closeSession(id)));
    return ids.length;
  }

  /**
   * Closes the servers of sessions unused for `idleMs` (an idle session holds no process or HTTP
   * stream) — never those of a session whose task's loop runs (`running`: a long Bash step does not
   * take the task's tools away; a task waiting for an answer connects them again when it resumes);
   * returns how many.
   */
  async sweep(idleMs: number, now = Date.now(), running: (sessionId: string) => boolean = () => false): Promise<number> {
    const idle = [...this.sessions].filter(([id, e]) => now - e.usedAt > idleMs && !running(id)).map(([id]) => id);
    await Promise.all(idle.map((id) => this.closeSession(id)));
    return idle.length;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.closeSession(id)));
  }

  get size(): number {
    return this.sessions.size;
  }
}

/**
 * A redirect is an error, never followed (docs/mcp.md): the SDK follows one to the same origin by
 * itself, resending the request — with the server's secret headers — to wherever it points.
 */
function refuseRedirects(f: FetchLike, server: string): FetchLike {
  return async (input, init) => {
    const res = await f(input, { ...init, redirect: "manual" });
    if (res.status >= 300 && res.status < 400) {
      void res.body?.cancel().catch(() => {});
      throw new Error(`MCP server "${server}" answered ${res.status}, a redirect; redirects are not followed (configure the URL it redirects to)`);
    }
    return res;
  };
}
