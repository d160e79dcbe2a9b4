/** Task rows: creation, state changes, the API record, owner-scoped lookups and lists. */
import { and, asc, eq, inArray, lte, min, type SQL, sql } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { ACTIVE_TASK_STATUSES, type RunTrigger, type TaskRow, type TaskStatus } from "../db/schema.ts";
import { tasks } from "../db/tables.ts";
import { driveAsync, first as firstIn, run, type Unit } from "../db/unit.ts";
import { Errors } from "../lib/errors.ts";
import { roundUsd } from "../lib/usd.ts";
import type { LeaseTerms } from "./leases.ts";
import { iso } from "../lib/time.ts";
import type { TaskRecord } from "../schema/task.ts";

export type { TaskRecord, TaskRow };

export function taskRecord(t: TaskRow): TaskRecord {
  return {
    id: t.id,
    session_id: t.session_id,
    profile_id: t.profile_id,
    playbook_id: t.playbook_id,
    prompt: t.prompt,
    trigger: t.trigger,
    status: t.status,
    error: t.error_code ? { code: t.error_code, message: t.error_message ?? "" } : null,
    result_text: t.result_text,
    // Only an answer ends a completed task; a running one's may not be final yet (src/agents/loop.ts).
    stop_reason: t.status === "completed" ? t.stop_reason : null,
    input_tokens: t.input_tokens,
    output_tokens: t.output_tokens,
    cost_usd: roundUsd(t.cost_usd),
    turns: t.turns,
    max_turns: t.max_turns,
    max_budget_usd: t.max_budget_usd,
    created_at: iso(t.created_at),
    started_at: iso(t.started_at),
    finished_at: iso(t.finished_at),
  };
}

/** What makes a task a playbook run. */
export interface RunOptions {
  playbookId: string;
  trigger: RunTrigger;
  maxContinuations: number;
  answerTimeoutMs: number | null;
  /** The schedule slot (scheduled runs). */
  scheduledFor?: number | null;
}

/** What a new task is made of. */
export interface NewTask {
  userId: string;
  sessionId: string;
  profileId: string;
  prompt: string;
  maxTurns: number;
  maxBudgetUsd: number;
  run?: RunOptions | null;
  /** Stored leased (a new session's first task, while its workspace is created: TaskLeases.opening). */
  lease?: { lease_owner: string; lease_expires_at: number };
}

export class Tasks {
  constructor(
    private db: DB,
    private now: () => number,
  ) {}

  /** Stores a new queued task. */
  async create(input: NewTask): Promise<TaskRow> {
    return driveAsync(this.createIn(this.db, input));
  }

  /** `create` as a unit: the task commits with the caller's transaction. */
  *createIn(tx: DB, input: NewTask): Unit<TaskRow> {
    const row = this.newRow(input);
    yield* run(tx.insert(tasks).values(row));
    return row;
  }

  private newRow(input: NewTask): TaskRow {
    const run = input.run;
    return {
      id: newId("task"),
      user_id: input.userId,
      session_id: input.sessionId,
      profile_id: input.profileId,
      playbook_id: run?.playbookId ?? null,
      trigger: run?.trigger ?? null,
      max_continuations: run?.maxContinuations ?? 0,
      answer_timeout_ms: run?.answerTimeoutMs ?? null,
      scheduled_for: run?.scheduledFor ?? null,
      // Set by the loop before the first request that goes out on the server's own key (src/agents/loop.ts).
      server_paid: false,
      answer_due_at: null,
      mode: "session",
      prompt: input.prompt,
      status: "queued",
      error_code: null,
      error_message: null,
      result_text: null,
      input_tokens: 0,
      output_tokens: 0,
      cost_usd: 0,
      turns: 0,
      turn_repeats: 0,
      max_turns: input.maxTurns,
      max_budget_usd: input.maxBudgetUsd,
      pending_tool_use_id: null,
      running_exec: null,
      stop_reason: null,
      lease_owner: input.lease?.lease_owner ?? null,
      lease_expires_at: input.lease?.lease_expires_at ?? null,
      created_at: this.now(),
      started_at: null,
      finished_at: null,
    };
  }

  async byId(id: string): Promise<TaskRow | undefined> {
    return driveAsync(this.byIdIn(this.db, id));
  }

  /** `byId` as a unit (a read inside the caller's transaction). */
  *byIdIn(tx: DB, id: string): Unit<TaskRow | undefined> {
    return yield* firstIn(tx.select().from(tasks).where(eq(tasks.id, id)).limit(1));
  }

  /** Waiting tasks whose question is past its answer_due_at. */
  async answersDue(now: number): Promise<TaskRow[]> {
    return this.db.select().from(tasks).where(and(eq(tasks.status, "waiting_input"), lte(tasks.answer_due_at, now)));
  }

  /** The earliest answer_due_at of a waiting task, or null. */
  async nextAnswerDue(): Promise<number | null> {
    const r = await first(this.db.select({ at: min(tasks.answer_due_at) }).from(tasks).where(eq(tasks.status, "waiting_input")));
    return r?.at ?? null;
  }

  /** The caller's task, or NOT_FOUND (also for someone else's). */
  async get(userId: string, id: string): Promise<TaskRow> {
    const t = await this.byId(id);
    if (!t || t.user_id !== userId) throw Errors.notFound("Task", id);
    return t;
  }

  /** The oldest task of the session that is queued, running or waiting for input. */
  async nextActive(sessionId: string): Promise<TaskRow | undefined> {
    return first(this.db.select().from(tasks).where(and(eq(tasks.session_id, sessionId), inArray(tasks.status, ACTIVE_TASK_STATUSES))).orderBy(asc(tasks.id)));
  }

  async update(id: string, patch: Partial<TaskRow>): Promise<void> {
    await this.db.update(tasks).set(patch).where(eq(tasks.id, id));
  }

  /** `update` only while the task's status is still `from`; whether it was. */
  updateIf(id: string, patch: Partial<TaskRow>, from: TaskStatus): Promise<boolean> {
    return driveAsync(this.updateIn(this.db, id, patch, from));
  }

  /**
   * `update` as a unit (inside the caller's transaction); with `from`, only while the task's
   * status is still `from`; with `leaseOwner`, only while that replica holds its lease. Whether
   * the row was changed.
   */
  *updateIn(tx: DB, id: string, patch: Partial<TaskRow>, from?: TaskStatus, leaseOwner?: string): Unit<boolean> {
    const where = and(eq(tasks.id, id), from ? eq(tasks.status, from) : undefined, leaseOwner ? eq(tasks.lease_owner, leaseOwner) : undefined);
    return (yield* run(tx.update(tasks).set(patch).where(where))) > 0;
  }

  /**
   * The queue takes a queued task: queued → running, with this replica's lease (leases.ts), in one
   * statement, so that a task cancelled (or failed) meanwhile is never started, nor one another
   * replica has taken. The task as running, or undefined when it was no longer queued (or its
   * lease is held elsewhere).
   */
  async claim(id: string, startedAt: number, lease: LeaseTerms): Promise<TaskRow | undefined> {
    const [row] = await this.db
      .update(tasks)
      .set({ status: "running", started_at: startedAt, ...lease.set })
      .where(and(eq(tasks.id, id), eq(tasks.status, "queued"), lease.where))
      .returning();
    return row;
  }

  /** Adds a model request's tokens and cost to the task's totals (in the statement: no read-modify-write). */
  async addUsage(id: string, inputTokens: number, outputTokens: number, costUsd: number): Promise<void> {
    await this.db
      .update(tasks)
      .set({ input_tokens: sql`${tasks.input_tokens} + ${inputTokens}`, output_tokens: sql`${tasks.output_tokens} + ${outputTokens}`, cost_usd: sql`${tasks.cost_usd} + ${costUsd}` })
      .where(eq(tasks.id, id));
  }

  /** Running tasks (to resume at a start); `owner`: only those whose lease that replica holds. */
  async runningTasks(owner?: string): Promise<TaskRow[]> {
    return this.db
      .select()
      .from(tasks)
      .where(and(eq(tasks.status, "running"), owner ? eq(tasks.lease_owner, owner) : undefined));
  }

  /** Session ids that have a task to run or resume (startup recovery). */
  async sessionsWithWork(): Promise<string[]> {
    const rows = await this.db
      .selectDistinct({ sid: tasks.session_id })
      .from(tasks)
      .where(inArray(tasks.status, ["queued", "running"]));
    return rows.map((r) => r.sid);
  }

  async list(userId: string, filter: { session_id?: string; status?: TaskStatus } & PageParams): Promise<Page<TaskRecord>> {
    const conds: SQL[] = [eq(tasks.user_id, userId)];
    if (filter.session_id) conds.push(eq(tasks.session_id, filter.session_id));
    if (filter.status) conds.push(eq(tasks.status, filter.status));
    const k = keyset(tasks.id, and(...conds), filter);
    const rows = await this.db.select().from(tasks).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    return toPage(rows, k.limit, taskRecord);
  }

  /** The user's queued, running and waiting tasks, oldest first. */
  async activeForUser(userId: string): Promise<TaskRow[]> {
    return this.db.select().from(tasks).where(and(eq(tasks.user_id, userId), inArray(tasks.status, ACTIVE_TASK_STATUSES))).orderBy(tasks.id);
  }

  async activeInSession(sessionId: string): Promise<TaskRow[]> {
    return this.db.select().from(tasks).where(and(eq(tasks.session_id, sessionId), inArray(tasks.status, ACTIVE_TASK_STATUSES)));
  }
}
