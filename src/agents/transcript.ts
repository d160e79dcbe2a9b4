/**
 * The model conversation of a session, persisted one step per row (`messages`): the user's
 * prompt, each assistant response, each tool result. Each step is written before the next one
 * starts, which is what lets a restarted server continue a task from its last completed step.
 * `history` rebuilds a valid provider conversation from the rows: tool results are grouped after
 * their assistant message, a tool call that never got a result (task cancelled or failed) gets a
 * synthetic error result, and consecutive user turns are merged.
 */
import { asc, eq, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { messages } from "../db/schema.ts";
import type { ChatMessage, ContentBlock } from "./providers/types.ts";

type ToolResultBlock = Extract<ContentBlock, { type: "tool_result" }>;
type ToolUseBlock = Extract<ContentBlock, { type: "tool_use" }>;

export interface StoredStep {
  id: number;
  task_id: string;
  /** `chain`: a fresh model context starts here; its content is `{ text }`, the chain's first user message. */
  role: "user" | "assistant" | "tool_result" | "chain";
  content: unknown;
}

const NOT_RUN = "[not run: the task ended before this tool call was executed]";

export class Transcript {
  private loadStmt;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.loadStmt = db
      .select({ id: messages.id, task_id: messages.task_id, role: messages.role, content: messages.content })
      .from(messages)
      .where(eq(messages.session_id, sql.placeholder("sid")))
      .orderBy(asc(messages.id))
      .prepare();
  }

  steps(sessionId: string): StoredStep[] {
    return this.loadStmt.all({ sid: sessionId }) as StoredStep[];
  }

  addUserPrompt(sessionId: string, taskId: string, text: string) {
    this.insert(sessionId, taskId, "user", [{ type: "text", text }]);
  }

  addAssistant(sessionId: string, taskId: string, content: ContentBlock[]) {
    this.insert(sessionId, taskId, "assistant", content);
  }

  addToolResult(sessionId: string, taskId: string, block: ToolResultBlock) {
    this.insert(sessionId, taskId, "tool_result", block);
  }

  /**
   * Ends a chain and starts the next (a playbook continuation): the continue call's result and the
   * new chain's first message, in one transaction, so a restart resumes in exactly one of the two.
   */
  addChain(sessionId: string, taskId: string, result: ToolResultBlock, text: string) {
    this.db.transaction(() => {
      this.insert(sessionId, taskId, "tool_result", result);
      this.insert(sessionId, taskId, "chain", { text });
    });
  }

  /** How many chains the task has started (its continuations). */
  chains(steps: StoredStep[], taskId: string): number {
    let n = 0;
    for (const s of steps) if (s.role === "chain" && s.task_id === taskId) n++;
    return n;
  }

  private insert(sessionId: string, taskId: string, role: StoredStep["role"], content: unknown) {
    this.db.insert(messages).values({ session_id: sessionId, task_id: taskId, role, content, created_at: this.now() }).run();
  }

  /** Whether the task's prompt is already stored (a recovered task must not store it twice). */
  hasPrompt(steps: StoredStep[], taskId: string): boolean {
    return steps.some((s) => s.task_id === taskId && s.role === "user");
  }

  /**
   * The text of the task's final answer when its last stored step is an assistant message without
   * tool calls (the server stopped after storing it, before the task was marked completed); else
   * null. A recovered task completes from it instead of asking the model again.
   */
  finalAnswer(steps: StoredStep[], taskId: string): string | null {
    for (let i = steps.length - 1; i >= 0; i--) {
      const step = steps[i]!;
      if (step.task_id !== taskId) continue;
      if (step.role !== "assistant") return null;
      const content = step.content as ContentBlock[];
      if (content.some((b) => b.type === "tool_use")) return null;
      return content.map((b) => (b.type === "text" ? b.text : "")).join("");
    }
    return null;
  }

  /**
   * Tool calls of the task's latest assistant step that have no result yet, in order — what a
   * resumed task must still execute (or report as interrupted).
   */
  pendingToolUses(steps: StoredStep[], taskId: string): ToolUseBlock[] {
    let last = -1;
    for (let i = steps.length - 1; i >= 0; i--) {
      if (steps[i]!.task_id === taskId && steps[i]!.role === "assistant") {
        last = i;
        break;
      }
    }
    if (last < 0) return [];
    const uses = (steps[last]!.content as ContentBlock[]).filter((b): b is ToolUseBlock => b.type === "tool_use");
    const done = new Set(steps.slice(last + 1).filter((s) => s.role === "tool_result").map((s) => (s.content as ToolResultBlock).tool_use_id));
    return uses.filter((u) => !done.has(u.id));
  }

  /** A well-formed provider conversation from the stored steps (of the current chain only). */
  history(steps: StoredStep[]): ChatMessage[] {
    let start = 0;
    for (let i = steps.length - 1; i >= 0; i--) {
      if (steps[i]!.role === "chain") {
        start = i;
        break;
      }
    }
    if (start > 0) steps = steps.slice(start);
    const out: ChatMessage[] = [];
    const pushUser = (blocks: ContentBlock[]) => {
      const prev = out[out.length - 1];
      if (prev?.role === "user") prev.content.push(...blocks);
      else out.push({ role: "user", content: blocks });
    };
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      if (step.role === "user") pushUser(step.content as ContentBlock[]);
      else if (step.role === "chain") pushUser([{ type: "text", text: (step.content as { text: string }).text }]);
      else if (step.role === "assistant") {
        const content = step.content as ContentBlock[];
        if (content.length === 0) continue;
        out.push({ role: "assistant", content });
        const uses = content.filter((b): b is ToolUseBlock => b.type === "tool_use");
        if (uses.length === 0) continue;
        const results = new Map<string, ToolResultBlock>();
        while (steps[i + 1]?.role === "tool_result") {
          const r = steps[++i]!.content as ToolResultBlock;
          results.set(r.tool_use_id, r);
        }
        pushUser(uses.map((u) => results.get(u.id) ?? { type: "tool_result", tool_use_id: u.id, content: NOT_RUN, is_error: true }));
      }
      // A tool_result row not preceded by its assistant step cannot happen; it is skipped if it does.
    }
    return out;
  }
}
