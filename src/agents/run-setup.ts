/**
 * What a task's run gets besides the profile's built-in tools, prepared before its first model
 * request: the session's repositories checked out (each clone shown in the stream as a `GitClone`
 * tool call), its MCP servers connected (their tools offered as `mcp__<server>__<tool>`; a server
 * that cannot start is shown as a failed `mcp__<server>` call and the run goes on without it),
 * and `GitPush` when the session has repositories. The note it returns tells the model what is
 * there. Platform steps carry tool_use ids starting `setup_`; they are not part of the
 * conversation the model sees.
 */
import type { SessionRow } from "../db/schema.ts";
import type { GitRepos, PushInput, PushResult } from "../git/service.ts";
import { mergeRepositories } from "../git/repository.ts";
import { randomHex } from "../lib/crypto.ts";
import type { Logger } from "../log.ts";
import type { McpManager } from "../mcp/manager.ts";
import type { TaskFrameInput } from "../schema/stream.ts";
import type { ProfileRow } from "./deps.ts";
import type { ToolSpec } from "./providers/types.ts";
import { CANCELLED_BY_USER, stopOutcome } from "./stop.ts";
import type { TaskRow } from "./tasks.ts";
import { gitPushTool, GIT_PUSH } from "./tools/git-push.ts";
import { TOOL_NAMES } from "../schema/profile.ts";
import { TypeCompiler } from "@sinclair/typebox/compiler";

export interface RunTools {
  specs: ToolSpec[];
  /** Appended to the system prompt: the repositories and MCP servers this run has. */
  note: string;
  has(name: string): boolean;
  /** null when the input is acceptable, else a message for the model. */
  invalid(name: string, input: unknown): string | null;
  run(use: { id: string; name: string; input: Record<string, unknown> }, signal: AbortSignal): Promise<{ output: string; isError: boolean }>;
}

export const NO_RUN_TOOLS: RunTools = { specs: [], note: "", has: () => false, invalid: () => null, run: async () => ({ output: "", isError: true }) };

export interface RunSetupDeps {
  mcp: Pick<McpManager, "prepare" | "call">;
  git: Pick<GitRepos, "checkout" | "push">;
  sessions: { byId(id: string): Promise<SessionRow | undefined>; get(userId: string, id: string): Promise<SessionRow> };
  profiles: { byIdAny(id: string): Promise<ProfileRow | undefined> };
  log: Logger;
}

const pushCheck = TypeCompiler.Compile(gitPushTool.input_schema);

/** A setup step's result when the task stopped during it: as a tool's. */
const stoppedStep = (reason: unknown) =>
  stopOutcome(reason) === "interrupted" ? "[interrupted: the server stopped during this step; it runs again when the task resumes]" : CANCELLED_BY_USER;

export class RunSetup {
  constructor(private d: RunSetupDeps) {}

  /** The repositories of a session: its profile's and its own. */
  async repositories(profile: ProfileRow, sessionId: string) {
    return mergeRepositories(profile.repositories ?? [], (await this.d.sessions.byId(sessionId))?.repositories);
  }

  /** POST /v1/sessions/:id/git/push: the caller's session (NOT_FOUND otherwise), its profile's and own repositories. */
  async push(userId: string, sessionId: string, input: PushInput): Promise<PushResult> {
    const session = await this.d.sessions.get(userId, sessionId);
    const profile = await this.d.profiles.byIdAny(session.profile_id);
    const repos = mergeRepositories(profile && profile.user_id === userId ? profile.repositories : [], session.repositories);
    return this.d.git.push(userId, sessionId, repos, input);
  }

  async prepare(task: TaskRow, profile: ProfileRow, emit: (f: TaskFrameInput) => void, scrub: (s: string) => string, signal: AbortSignal): Promise<RunTools> {
    const repos = await this.repositories(profile, task.session_id);
    const servers = profile.mcp_servers ?? [];
    if (!repos.length && !servers.length) return NO_RUN_TOOLS;
    const notes: string[] = [];
    const step = (tool: string, input: Record<string, unknown>) => {
      const id = `setup_${randomHex(12)}`;
      emit({ type: "task:tool_use", tool, tool_use_id: id, input });
      return (output: string, isError: boolean) => emit({ type: "task:tool_result", tool, tool_use_id: id, output: scrub(output), is_error: isError });
    };

    const checkouts = new Map<string, (output: string, isError: boolean) => void>();
    const done = await this.d.git.checkout(
      task.user_id,
      task.session_id,
      repos,
      {
        start: (r, path) => checkouts.set(path, step("GitClone", { url: r.url, ...(r.ref ? { ref: r.ref } : {}), path })),
        done: (c) => checkouts.get(c.path)?.(`Cloned ${c.url}${c.ref ? ` (${c.ref})` : ""} into ${c.path} at ${c.commit} (${(c.bytes / 1024 / 1024).toFixed(1)} MiB in ${(c.ms / 1000).toFixed(1)} s)`, false),
        // A clone stopped by the task's stop says so, not what git last printed when it was killed.
        failed: (_r, path, message) => checkouts.get(path)?.(signal.aborted ? stoppedStep(signal.reason) : message, true),
      },
      signal,
    );
    for (const c of done) notes.push(`- Git repository ${c.url}${c.ref ? ` (${c.ref})` : ""} is checked out at ${c.path}.`);
    if (repos.length) notes.push(`- Push commits with the ${GIT_PUSH} tool (your workspace holds no credential for the remote; runcell pushes for you).`);

    const builtins = new Set<string>([...TOOL_NAMES, GIT_PUSH]);
    const mcp = await this.d.mcp.prepare(task.user_id, task.session_id, servers, profile.allowed_tools ?? [], builtins, signal, profile.id);
    for (const f of mcp.failures) {
      const message = scrub(f.message);
      this.d.log.warn("MCP server could not start", { session_id: task.session_id, task_id: task.id, server: f.server, error: message });
      step(`mcp__${f.server}`, { server: f.server })(`MCP server "${f.server}" could not start or list its tools: ${message}. Its tools are not available in this task.`, true);
      notes.push(`- MCP server "${f.server}" is unavailable in this task (it failed to start).`);
    }
    const offered = new Set(mcp.tools.map((t) => t.spec.name));
    const specs: ToolSpec[] = mcp.tools.map((t) => t.spec);
    if (repos.length) specs.push({ name: GIT_PUSH, description: gitPushTool.description, input_schema: JSON.parse(JSON.stringify(gitPushTool.input_schema)) });
    const servedBy = [...new Set(mcp.tools.map((t) => t.server))];
    if (servedBy.length) notes.push(`- Tools named mcp__<server>__<tool> come from the MCP servers ${servedBy.join(", ")}.`);

    return {
      specs,
      note: notes.length ? `\n\n## This session\n${notes.join("\n")}` : "",
      has: (name) => offered.has(name) || (name === GIT_PUSH && repos.length > 0),
      invalid: (name, input) => {
        if (name !== GIT_PUSH || pushCheck.Check(input)) return null;
        const e = pushCheck.Errors(input).First();
        return `Invalid input for ${GIT_PUSH}: ${e?.path || "input"} ${e?.message ?? "does not match the schema"}`;
      },
      run: async (use, sig) => {
        if (use.name === GIT_PUSH) {
          const r = await this.d.git.push(task.user_id, task.session_id, await this.repositories(profile, task.session_id), use.input as unknown as PushInput, sig);
          return { output: `${r.status === "pushed" ? "Pushed" : "Already up to date:"} ${r.branch} of ${r.path} to ${r.repository} as ${r.remote_branch} at commit ${r.commit}`, isError: false };
        }
        return this.d.mcp.call(task.session_id, use.name, use.input, sig, use.id);
      },
    };
  }
}
