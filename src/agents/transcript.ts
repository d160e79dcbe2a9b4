/**
 * The model conversation of a session, persisted one step per row (`messages`): the user's
 * prompt, each assistant response, each tool result. Each step is written before the next one
 * starts, which is what lets a restarted server continue a task from its last completed step.
 * `history` rebuilds a valid provider conversation from the rows: tool results are grouped after
 * their assistant message, a tool call that never got a result (task cancelled or failed) gets a
 * synthetic error result, and consecutive user turns are merged.
 *
 * While a task runs, its session's steps are kept in memory (`steps` loads them once, each write
 * appends to them): the loop asks for the steps about twice per model turn, and re-reading them
 * from the database meant parsing the whole conversation again each time — the largest single
 * cause of the server's memory growth with long answers (issue 15). The database stays the truth:
 * every step is written before it is added to the tail, and `release` (the task ended, or is
 * waiting for an answer) drops the tail, so the next task of the session reads the rows again.
 * Nothing may mutate a step's content: the tail hands out the same objects each time.
 */
import type { Database, Statement } from "bun:sqlite";
import { and, asc, eq, gt, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { messages } from "../db/tables.ts";
import { driveAsync, first, isPostgres, transact, type Unit } from "../db/unit.ts";
import type { ChatMessage, ContentBlock } from "./providers/types.ts";
import { storableJson } from "../db/pg/storable.ts";

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

/** Rows a PostgreSQL load reads at a time (it has no row-at-a-time iterator; see `steps`). */
const LOAD_PAGE = 200;

interface StepRow {
  id: number;
  task_id: string;
  role: StoredStep["role"];
  content: string;
}

export class Transcript {
  /** bun:sqlite's row-at-a-time iteration; null on PostgreSQL, which reads pages (`loadPages`). */
  private loadStmt: Statement<StepRow, [string]> | null;
  /** The in-memory tail of each session whose task is running (see the file's comment). */
  private tails = new Map<string, StoredStep[]>();
  /** Characters of stored JSON in each tail (what a model request built from it roughly weighs). */
  private sizes = new Map<string, number>();
  /** PostgreSQL: step content is bound as text and cast to jsonb (`row`). */
  private readonly pg: boolean;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.pg = isPostgres(db);
    const sqlite = this.pg ? null : (db as unknown as { $client: Database }).$client;
    this.loadStmt = sqlite?.prepare("SELECT id, task_id, role, content FROM messages WHERE session_id = ? ORDER BY id") ?? null;
  }

  /**
   * The session's steps in order: the in-memory tail, loaded from the database at the first call
   * (SQLite: a row at a time; PostgreSQL: a page at a time — so the stored JSON and its parsed
   * copy of the whole conversation are never held together). The array grows as steps are added;
   * call `release` when the task stops.
   */
  async steps(sessionId: string): Promise<StoredStep[]> {
    let tail = this.tails.get(sessionId);
    if (!tail) {
      tail = [];
      let size = 0;
      if (this.loadStmt) {
        for (const r of this.loadStmt.iterate(sessionId)) {
          size += r.content.length;
          tail.push({ id: r.id, task_id: r.task_id, role: r.role, content: JSON.parse(r.content) });
        }
      } else size = await this.loadPages(sessionId, tail);
      // Another call loaded it meanwhile (PostgreSQL's load awaits): keep the one already handed out.
      const loaded = this.tails.get(sessionId);
      if (loaded) return loaded;
      this.tails.set(sessionId, tail);
      this.sizes.set(sessionId, size);
    }
    return tail;
  }

  /**
   * PostgreSQL's load: the session's rows in pages, keyset on id (jsonb arrives parsed; its size
   * is the length of its text form, as close to the stored JSON's as the tail's sizes need).
   * Adds the steps to `tail`; answers their size.
   */
  private async loadPages(sessionId: string, tail: StoredStep[]): Promise<number> {
    let size = 0;
    let after = 0;
    for (;;) {
      const rows = await this.db
        .select({ id: messages.id, task_id: messages.task_id, role: messages.role, content: messages.content, size: sql<number>`length(${messages.content}::text)` })
        .from(messages)
        .where(and(eq(messages.session_id, sessionId), gt(messages.id, after)))
        .orderBy(asc(messages.id))
        .limit(LOAD_PAGE);
      for (const r of rows) {
        size += Number(r.size);
        tail.push({ id: r.id, task_id: r.task_id, role: r.role, content: r.content });
      }
      if (rows.length < LOAD_PAGE) return size;
      after = rows[rows.length - 1]!.id;
    }
  }

  /** Drops the session's in-memory tail (its task ended or waits for an answer). */
  release(sessionId: string) {
    this.tails.delete(sessionId);
    this.sizes.delete(sessionId);
  }

  /** Characters of stored JSON in the session's tail (0 without one). */
  size(sessionId: string): number {
    return this.sizes.get(sessionId) ?? 0;
  }

  /** Sessions with an in-memory tail (tests, /metrics). */
  get held(): number {
    return this.tails.size;
  }

  async addUserPrompt(sessionId: string, taskId: string, text: string): Promise<void> {
    await this.insert(sessionId, taskId, "user", [{ type: "text", text }]);
  }

  async addAssistant(sessionId: string, taskId: string, content: ContentBlock[]): Promise<void> {
    await this.insert(sessionId, taskId, "assistant", content);
  }

  async addToolResult(sessionId: string, taskId: string, block: ToolResultBlock): Promise<void> {
    await this.insert(sessionId, taskId, "tool_result", block);
  }

  /**
   * `addToolResult` as a unit (the result commits with the caller's transaction). The session's
   * tail does not get the step: the caller calls `release` once the transaction has committed, so
   * the tail is read again at its next use (a tail loaded before the commit would lack the step).
   */
  *addToolResultIn(tx: DB, sessionId: string, taskId: string, block: ToolResultBlock): Unit<void> {
    yield* this.writeIn(tx, sessionId, taskId, "tool_result", block);
  }

  /**
   * Ends a chain and starts the next (a playbook continuation): the continue call's result and the
   * new chain's first message, in one transaction, so a restart resumes in exactly one of the two.
   */
  async addChain(sessionId: string, taskId: string, result: ToolResultBlock, text: string): Promise<void> {
    const steps = await transact(this.db, (tx) => this.chainIn(tx, sessionId, taskId, result, text));
    this.add(sessionId, steps);
  }

  /** The two steps of `addChain`, committed together. */
  private *chainIn(tx: DB, sessionId: string, taskId: string, result: ToolResultBlock, text: string): Unit<(StoredStep & { size: number })[]> {
    const ended = yield* this.writeIn(tx, sessionId, taskId, "tool_result", result);
    const started = yield* this.writeIn(tx, sessionId, taskId, "chain", { text });
    return [ended, started];
  }

  /** How many model answers the task has stored: its requests that finished (`turns` also counts one under way). */
  answers(steps: StoredStep[], taskId: string): number {
    let n = 0;
    for (const s of steps) if (s.role === "assistant" && s.task_id === taskId) n++;
    return n;
  }

  /** How many chains the task has started (its continuations). */
  chains(steps: StoredStep[], taskId: string): number {
    let n = 0;
    for (const s of steps) if (s.role === "chain" && s.task_id === taskId) n++;
    return n;
  }

  /** Stores a step, then adds it to the session's tail (if it has one). */
  private async insert(sessionId: string, taskId: string, role: StoredStep["role"], content: unknown): Promise<void> {
    this.add(sessionId, [await driveAsync(this.writeIn(this.db, sessionId, taskId, role, content))]);
  }

  /**
   * The row, and the step as the tail holds it: `content` itself (not a parsed copy), so the
   * caller hands it over and must not change it; our callers build it fresh for the call, with no
   * undefined members, so it equals what a read of the row gives.
   */
  private *writeIn(tx: DB, sessionId: string, taskId: string, role: StoredStep["role"], content: unknown): Unit<StoredStep & { size: number }> {
    const json = JSON.stringify(content);
    const r = (yield* first(tx.insert(messages).values(this.row(sessionId, taskId, role, json)).returning({ id: messages.id })))!;
    return { id: r.id, task_id: taskId, role, content, size: json.length };
  }

  /**
   * The row of a step whose content is serialized already (bound as it is: not serialized again).
   * PostgreSQL: bound as text and cast — Bun's SQL client JSON-encodes a value bound to a jsonb
   * parameter, so the bare string would be stored as a jsonb *string* and read back unparsed.
   */
  private row(sessionId: string, taskId: string, role: StoredStep["role"], json: string) {
    const content = this.pg ? sql`${storableJson(json)}::text::jsonb` : sql`${json}`;
    return { session_id: sessionId, task_id: taskId, role, content, created_at: this.now() };
  }

  private add(sessionId: string, steps: (StoredStep & { size: number })[]) {
    const tail = this.tails.get(sessionId);
    if (!tail) return;
    for (const { size, ...step } of steps) {
      tail.push(step);
      this.sizes.set(sessionId, (this.sizes.get(sessionId) ?? 0) + size);
    }
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
   * The text of the task's latest assistant step that has any: what a final answer without text
   * of its own (the model ended its turn right after its tools' results) reports as the result.
   */
  lastText(steps: StoredStep[], taskId: string): string {
    for (let i = steps.length - 1; i >= 0; i--) {
      const step = steps[i]!;
      if (step.task_id !== taskId || step.role !== "assistant") continue;
      const text = (step.content as ContentBlock[]).map((b) => (b.type === "text" ? b.text : "")).join("");
      if (text.trim() !== "") return text;
    }
    return "";
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
    // Merged user turns get an array of their own: the steps' content arrays are never changed.
    const pushUser = (blocks: ContentBlock[]) => {
      const prev = out[out.length - 1];
      if (prev?.role === "user") prev.content.push(...blocks);
      else out.push({ role: "user", content: [...blocks] });
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
