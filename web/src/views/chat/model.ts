/**
 * A session's transcript as the chat shows it, folded from stream frames: one Turn per task (its
 * prompt from the task record, its streamed text, tool calls, questions, result, usage, end).
 * Plain objects mutated in place and a version counter: applying 10,000 replayed frames costs no
 * rendering; the view re-renders once per animation frame.
 *
 * On a reconnect the page cannot trust what it holds of an unfinished turn: a server that stopped
 * mid-answer removes the cut-off answer's text from its log and streams the answer again, in new
 * frames above the last seq the page saw (docs/stream.md). So `rewind` picks the seq before that
 * turn began, the page resumes after it, and the turn is rebuilt from the replay.
 */
import type { ServerFrame } from "../../lib/stream.ts";

export interface ToolCall {
  id: string;
  tool: string;
  input: Record<string, unknown>;
  output: string | null;
  isError: boolean;
  startedAt: number;
  ms: number | null;
}

export interface Ask {
  toolUseId: string | null;
  questions: { question: string; options: { label: string }[] }[];
  /** Per question: several options may be picked (the tool call's `multiSelect`). */
  multi: boolean[];
  answer: string | null;
}

/** A piece of the turn in arrival order: text, a tool call, a question, a chain marker. */
export type Part =
  | { kind: "text"; text: string; /** The turn's result_text (turn.done), not streamed text. */ result?: boolean }
  | { kind: "tool"; call: ToolCall }
  | { kind: "ask"; ask: Ask }
  | { kind: "chain"; continuation: number; max: number };

export interface Turn {
  taskId: string;
  prompt: string | null;
  parts: Part[];
  /** Set at turn.done: replaces the streamed text (the interface's client rule). */
  result: string | null;
  usage: { input: number; output: number; cost: number } | null;
  /** Set at turn.done: why the answer ended (max_tokens: cut off at the output limit; refusal). */
  stopReason: string | null;
  status: "running" | "waiting" | "completed" | "cancelled" | "failed";
  error: { code: string; message: string } | null;
  /** Bumped on every change: the turn's component re-renders only when it moved. */
  version: number;
}

/** What the chat reads of a task record. */
export interface TaskFigures {
  id: string;
  prompt: string;
  status?: string;
  input_tokens?: number;
  output_tokens?: number;
  cost_usd?: number;
}

export class Transcript {
  turns: Turn[] = [];
  private byTask = new Map<string, Turn>();
  private calls = new Map<string, ToolCall>();
  lastSeq = 0;
  version = 0;
  replaying = false;
  containerId: string | null = null;
  /** Live turns that started without a prompt, not yet handed to the view to look up (takeUnprompted). */
  private unasked: Turn[] = [];
  /** The first replay has ended. */
  private opened = false;
  /** Per turn that has frames: the seq of the last frame before its first one, and of its last one. */
  private span = new Map<Turn, { before: number; last: number }>();
  /** Turns `rewind` chose, emptied when the replay it asked for starts. */
  private toRebuild: Turn[] = [];

  constructor(readonly sessionId: string) {}

  /**
   * The session's tasks (GET /v1/tasks?session_id=), oldest first: their prompts, and the usage of
   * those that ended without a turn.done (cancelled, failed).
   */
  setPrompts(tasks: TaskFigures[]) {
    for (const t of tasks) {
      const turn = this.turn(t.id);
      if (turn.prompt === null) {
        turn.prompt = t.prompt;
        turn.version++;
      }
      this.setUsage(t);
    }
    this.sortTurns();
    this.version++;
  }

  /**
   * The prompt of one task: one this page submitted (the server's answer named its task), or one
   * looked up. Creates the turn if its first frame has not come yet.
   */
  claim(taskId: string, prompt: string) {
    const turn = this.turn(taskId);
    if (turn.prompt !== null) return;
    turn.prompt = prompt;
    turn.version++;
    this.version++;
  }

  /**
   * A task record's tokens and cost, for a turn that ended without a turn.done (a cancelled or
   * failed task still used the model): the turn's figures agree with GET /v1/tasks/:id.
   */
  setUsage(task: TaskFigures) {
    if (task.status !== "cancelled" && task.status !== "failed") return;
    if (task.input_tokens === undefined || (!task.input_tokens && !task.output_tokens && !task.cost_usd)) return;
    const turn = this.byTask.get(task.id);
    if (!turn || turn.usage) return;
    turn.usage = { input: task.input_tokens, output: task.output_tokens ?? 0, cost: task.cost_usd ?? 0 };
    turn.version++;
    this.version++;
  }

  /** The tasks whose turns have no prompt yet (started elsewhere, or after the prompts loaded), each once. */
  takeUnprompted(): string[] {
    const ids = this.unasked.filter((t) => t.prompt === null).map((t) => t.taskId);
    this.unasked = [];
    return ids;
  }

  /** Turns in task order (task ids are time-ordered): prompts and replayed frames may come in either order. */
  private sortTurns() {
    this.turns.sort((a, b) => (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
  }

  turn(taskId: string): Turn {
    let t = this.byTask.get(taskId);
    if (!t) {
      t = { taskId, prompt: null, parts: [], result: null, usage: null, stopReason: null, status: "running", error: null, version: 0 };
      this.byTask.set(taskId, t);
      this.turns.push(t);
      // (The prompts of the first replay's tasks come with the session's task list.)
      if (this.opened) this.unasked.push(t);
    }
    return t;
  }

  get running(): Turn | null {
    for (let i = this.turns.length - 1; i >= 0; i--) {
      const t = this.turns[i]!;
      if (t.status === "running" || t.status === "waiting") return t;
    }
    return null;
  }

  /** The sum of the turns' figures (the page shows the session record's, which counts cancelled and failed tasks too). */
  get totals() {
    let input = 0;
    let output = 0;
    let cost = 0;
    for (const t of this.turns) {
      if (!t.usage) continue;
      input += t.usage.input;
      output += t.usage.output;
      cost += t.usage.cost;
    }
    return { input, output, cost };
  }

  /**
   * Before resuming after a reconnect: the seq to resume after so that the replay brings every
   * unfinished turn again from its start — and any turn with frames after that point, whole — and
   * those turns, which are emptied when that replay starts (until then the page shows them as
   * they were). The prompts stay.
   */
  rewind(): number {
    let after = this.lastSeq;
    for (const t of this.turns) {
      const span = this.span.get(t);
      if (span && (t.status === "running" || t.status === "waiting")) after = Math.min(after, span.before);
    }
    for (let moved = true; moved; ) {
      moved = false;
      for (const span of this.span.values())
        if (span.last > after && span.before < after) {
          after = span.before;
          moved = true;
        }
    }
    this.toRebuild = this.turns.filter((t) => (this.span.get(t)?.before ?? -1) >= after);
    this.lastSeq = after;
    return after;
  }

  /** Empties the turns `rewind` chose: the replay that starts now brings all their frames again. */
  private rebuild() {
    for (const t of this.toRebuild) {
      this.span.delete(t);
      t.parts = [];
      t.result = null;
      t.usage = null;
      t.stopReason = null;
      t.status = "running";
      t.error = null;
      t.version++;
    }
    this.toRebuild = [];
  }

  /** Folds one frame in; returns whether anything visible changed. */
  apply(f: ServerFrame): boolean {
    const before = this.lastSeq;
    const seq = "seq" in f && typeof f.seq === "number" ? f.seq : null;
    if (seq !== null) this.lastSeq = Math.max(this.lastSeq, seq);
    switch (f.type) {
      case "session.ready":
        this.containerId = f.container_id;
        return false;
      case "session.replay_start":
        this.replaying = true;
        this.rebuild();
        return false;
      case "session.replay_end":
        this.replaying = false;
        this.opened = true;
        this.sortTurns();
        this.version++;
        return true;
      case "task:token": {
        const t = this.turn(f.task_id);
        const last = t.parts[t.parts.length - 1];
        if (last?.kind === "text") last.text += f.text;
        else t.parts.push({ kind: "text", text: f.text });
        t.status = "running";
        break;
      }
      case "task:tool_use": {
        const t = this.turn(f.task_id);
        const call: ToolCall = { id: f.tool_use_id, tool: f.tool, input: f.input, output: null, isError: false, startedAt: Date.now(), ms: null };
        // (A call replayed after a rewind goes last again: questions find the newest pending call.)
        this.calls.delete(f.tool_use_id);
        this.calls.set(f.tool_use_id, call);
        if (f.tool !== "AskUserQuestion") t.parts.push({ kind: "tool", call });
        break;
      }
      case "task:tool_result": {
        const t = this.turn(f.task_id);
        const call = this.calls.get(f.tool_use_id);
        if (call) {
          call.output = f.output;
          call.isError = f.is_error;
          call.ms = this.replaying ? null : Date.now() - call.startedAt;
        }
        if (f.tool === "AskUserQuestion") {
          const ask = [...t.parts].reverse().find((p): p is Extract<Part, { kind: "ask" }> => p.kind === "ask" && p.ask.answer === null);
          if (ask) ask.ask.answer = f.output;
          t.status = "running";
        }
        break;
      }
      case "task:ask_user": {
        const t = this.turn(f.task_id);
        const pending = [...this.calls.values()].reverse().find((c) => c.tool === "AskUserQuestion" && c.output === null);
        const asked = (pending?.input.questions ?? []) as { multiSelect?: unknown }[];
        const multi = f.questions.map((_, i) => asked[i]?.multiSelect === true);
        t.parts.push({ kind: "ask", ask: { toolUseId: pending?.id ?? null, questions: f.questions, multi, answer: null } });
        t.status = "waiting";
        break;
      }
      case "turn.continuing": {
        const t = this.turn(f.task_id);
        t.parts.push({ kind: "chain", continuation: f.continuation, max: f.max_continuations });
        break;
      }
      case "turn.done": {
        const t = this.turn(f.task_id);
        t.result = f.result_text;
        t.usage = { input: f.input_tokens, output: f.output_tokens, cost: f.cost_usd };
        t.stopReason = f.stop_reason ?? null;
        break;
      }
      case "task:done": {
        const t = this.turn(f.task_id);
        t.status = f.status;
        break;
      }
      case "task:failed": {
        const t = this.turn(f.task_id);
        t.status = "failed";
        t.error = { code: f.code, message: f.error };
        break;
      }
      default:
        return false;
    }
    const t = this.byTask.get((f as { task_id: string }).task_id);
    if (t) {
      t.version++;
      if (seq !== null) {
        const span = this.span.get(t);
        if (span) span.last = Math.max(span.last, seq);
        else this.span.set(t, { before, last: seq });
      }
    }
    this.version++;
    return true;
  }
}
