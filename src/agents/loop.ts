/**
 * One task's model ⇄ tools loop. It can start from any persisted state — a fresh task, a task
 * resumed after a restart (tool calls of the last step still pending; one that was in flight is
 * reported to the model as interrupted), or a task whose question was just answered — because
 * every step is stored before the next begins. Limits are checked before each model request.
 */
import type { Logger } from "../log.ts";
import type { FrameInput, TaskFrameInput } from "../schema/stream.ts";
import type { Hub } from "../events/hub.ts";
import type { EventLog } from "../events/log.ts";
import { AppError, type ErrorCode } from "../lib/errors.ts";
import type { ProfileRow, SecretsDep, WorkspacesDep, NotificationsDep } from "./deps.ts";
import { polishResultText } from "./polish.ts";
import { costUsd } from "./pricing.ts";
import { getProvider } from "./providers/index.ts";
import { type ContentBlock, ModelError } from "./providers/types.ts";
import { makeScrubber, type Scrubber, scrubDeep } from "./scrub.ts";
import type { AgentSessions } from "./sessions.ts";
import type { Tasks, TaskRow } from "./tasks.ts";
import { ASK_USER, invalidInput, toolByName, toolSpecs } from "./tools/index.ts";
import { flattenQuestions } from "./tools/ask.ts";
import type { Transcript } from "./transcript.ts";

export const MAX_OUTPUT_TOKENS = 8192;
const INTERRUPTED = "[interrupted: the server restarted while this tool was running; it may or may not have completed]";

export type Outcome = "completed" | "waiting" | "cancelled" | "interrupted" | { failed: { code: ErrorCode; message: string } };

export interface LoopDeps {
  log: Logger;
  hub: Hub;
  /** Flushed before a side effect, so its tool_use frame is durable first. */
  eventLog: EventLog;
  tasks: Tasks;
  sessions: AgentSessions;
  transcript: Transcript;
  secrets: SecretsDep;
  workspaces: WorkspacesDep;
  notifications: NotificationsDep;
  now: () => number;
}

type ToolUse = Extract<ContentBlock, { type: "tool_use" }>;

export class AgentLoop {
  constructor(private d: LoopDeps) {}

  private emit(task: TaskRow, frame: TaskFrameInput) {
    this.d.hub.publish(task.session_id, { task_id: task.id, ...frame } as FrameInput);
  }

  /** Runs until the task completes, waits for input, or is stopped. Never throws. */
  async run(task: TaskRow, profile: ProfileRow, signal: AbortSignal): Promise<Outcome> {
    const scrub = makeScrubber(this.d.secrets.valuesFor(task.user_id));
    try {
      return await this.loop(task, profile, signal, scrub);
    } catch (e) {
      if (signal.aborted) return signal.reason === "shutdown" ? "interrupted" : "cancelled";
      if (e instanceof ModelError) return { failed: { code: "MODEL_ERROR", message: scrub(e.message) } };
      if (e instanceof AppError) return { failed: { code: e.code, message: scrub(e.message) } };
      this.d.log.error("task crashed", { task_id: task.id, err: e });
      return { failed: { code: "INTERNAL_ERROR", message: `Internal error while running the task (task ${task.id})` } };
    }
  }

  private async loop(task: TaskRow, profile: ProfileRow, signal: AbortSignal, scrub: Scrubber): Promise<Outcome> {
    const { tasks, transcript } = this.d;
    // Vault or server environment; a missing key fails in the provider with a message saying how to fix it.
    const apiKey = this.d.secrets.resolveApiKey(task.user_id, profile.model);
    let steps = transcript.steps(task.session_id);
    if (!transcript.hasPrompt(steps, task.id)) {
      transcript.addUserPrompt(task.session_id, task.id, task.prompt);
      this.emit(task, { type: "task:system_prompt", system_prompt: profile.system_prompt, model: profile.model.name, provider: profile.model.provider, tools: profile.tools });
      steps = transcript.steps(task.session_id);
    }
    const workspace = await this.d.workspaces.ensureRunning(task.session_id);
    const provider = getProvider(profile.model.provider);
    const tools = toolSpecs(profile.tools);

    for (;;) {
      // Tool calls of the last step that have no result yet (fresh, resumed, or after an answer).
      const pending = transcript.pendingToolUses(steps, task.id);
      for (const use of pending) {
        const paused = await this.runTool(task, profile, use, signal, scrub);
        if (paused) return "waiting";
        if (signal.aborted) throw signal.reason;
      }
      if (pending.length) steps = transcript.steps(task.session_id);
      const current = tasks.byId(task.id)!;
      if (current.turns >= current.max_turns) {
        return { failed: { code: "TURN_LIMIT_EXCEEDED", message: `Task reached max_turns (${current.max_turns}) before finishing` } };
      }
      if (current.cost_usd >= current.max_budget_usd) {
        return { failed: { code: "BUDGET_EXCEEDED", message: `Task reached max_budget_usd ($${current.max_budget_usd}) before finishing` } };
      }
      tasks.update(task.id, { turns: current.turns + 1 });

      const response = await provider.complete(
        {
          model: profile.model.name,
          system: profile.system_prompt,
          messages: transcript.history(steps),
          tools,
          maxTokens: MAX_OUTPUT_TOKENS,
          baseUrl: profile.model.base_url,
          apiKey,
          signal,
        },
        (e) => {
          if (e.type === "text" && e.text) this.emit(task, { type: "task:token", text: scrub(e.text) });
        },
      );
      const content = scrubDeep(response.content, scrub);
      const cost = costUsd(profile.model, response.usage);
      const totals = tasks.byId(task.id)!;
      tasks.update(task.id, {
        input_tokens: totals.input_tokens + response.usage.input_tokens,
        output_tokens: totals.output_tokens + response.usage.output_tokens,
        cost_usd: totals.cost_usd + cost,
      });
      this.d.sessions.addUsage(task.session_id, response.usage.input_tokens, response.usage.output_tokens, cost);
      transcript.addAssistant(task.session_id, task.id, content);
      steps = transcript.steps(task.session_id);

      const uses = content.filter((b): b is ToolUse => b.type === "tool_use");
      if (uses.length === 0) {
        const text = content.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("");
        const resultText = polishResultText(text, (rel) => this.d.workspaces.signedFileUrl(workspace.id, rel));
        const done = tasks.byId(task.id)!;
        tasks.update(task.id, { result_text: resultText });
        this.emit(task, {
          type: "turn.done",
          result_text: resultText,
          input_tokens: done.input_tokens,
          output_tokens: done.output_tokens,
          cost_usd: Math.round(done.cost_usd * 1e6) / 1e6,
        });
        return "completed";
      }
    }
  }

  /** Runs one tool call and stores its result. Returns true when the task now waits for input. */
  private async runTool(task: TaskRow, profile: ProfileRow, use: ToolUse, signal: AbortSignal, scrub: Scrubber): Promise<boolean> {
    const { tasks, transcript } = this.d;
    const current = tasks.byId(task.id)!;
    if (current.pending_tool_use_id === use.id && use.name !== ASK_USER) {
      // It was running when the server stopped.
      this.finishTool(task, use, INTERRUPTED, true);
      return false;
    }
    const enabled = profile.tools.includes(use.name);
    const invalid = enabled ? invalidInput(use.name, use.input) : null;
    if (use.name === ASK_USER && enabled && !invalid) {
      if (current.pending_tool_use_id !== use.id) {
        this.emit(task, { type: "task:tool_use", tool: use.name, tool_use_id: use.id, input: use.input });
        this.emit(task, { type: "task:ask_user", questions: flattenQuestions(use.input) });
      }
      tasks.update(task.id, { status: "waiting_input", pending_tool_use_id: use.id });
      this.d.eventLog.flush();
      return true;
    }
    this.emit(task, { type: "task:tool_use", tool: use.name, tool_use_id: use.id, input: use.input });
    if (!enabled) return this.finishTool(task, use, `Tool ${use.name} is not enabled for this agent (enabled: ${profile.tools.join(", ")})`, true);
    if (invalid) return this.finishTool(task, use, invalid, true);
    // Durable before side effects: the tool_use frame and the in-flight marker.
    tasks.update(task.id, { pending_tool_use_id: use.id });
    this.d.eventLog.flush();
    const tool = toolByName(use.name)!;
    let output: string;
    let isError: boolean;
    try {
      const r = await tool.run(use.input, {
        userId: task.user_id,
        sessionId: task.session_id,
        taskId: task.id,
        signal,
        workspace: this.d.workspaces,
        notify: (n) => this.d.notifications.enqueue({ userId: task.user_id, source: "agent", message: n.message, urgency: n.urgency, taskId: task.id }),
      });
      output = r.output;
      isError = r.isError;
    } catch (e) {
      if (signal.aborted) return this.stopTool(task, use, signal, "");
      if (e instanceof AppError && e.code === "CONTAINER_FAILED") throw e;
      if (!(e instanceof AppError)) throw e;
      output = e.message;
      isError = true;
    }
    if (signal.aborted) return this.stopTool(task, use, signal, scrub(output));
    this.finishTool(task, use, scrub(output), isError);
    return false;
  }

  /**
   * The task was stopped while a tool ran. Cancelled: the tool's result says so. Server shutdown:
   * the call stays pending, and the resumed task reports it to the model as interrupted.
   */
  private stopTool(task: TaskRow, use: ToolUse, signal: AbortSignal, partial: string): never {
    if (signal.reason !== "shutdown") {
      this.finishTool(task, use, `${partial ? partial + "\n" : ""}[cancelled by the user]`, true);
    }
    throw signal.reason;
  }

  private finishTool(task: TaskRow, use: ToolUse, output: string, isError: boolean): false {
    this.d.transcript.addToolResult(task.session_id, task.id, { type: "tool_result", tool_use_id: use.id, content: output, ...(isError ? { is_error: true } : {}) });
    this.d.tasks.update(task.id, { pending_tool_use_id: null });
    this.emit(task, { type: "task:tool_result", tool: use.name, tool_use_id: use.id, output, is_error: isError });
    return false;
  }
}
