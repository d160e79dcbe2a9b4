/** Task rows: creation, state changes, the API record, owner-scoped lookups and lists. */
import { and, asc, eq, inArray, lte, min, type SQL, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { ACTIVE_TASK_STATUSES, type RunTrigger, type TaskRow, tasks, type TaskStatus } from "../db/schema.ts";
import { Errors } from "../lib/errors.ts";
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

export const roundUsd = (n: number) => Math.round(n * 1e6) / 1e6;

/** What makes a task a playbook run. */
export interface RunOptions {
  playbookId: string;
  trigger: RunTrigger;
  maxContinuations: number;
  answerTimeoutMs: number | null;
  /** The schedule slot (scheduled runs). */
  scheduledFor?: number | null;
}

export class Tasks {
  private byIdStmt;
  private nextStmt;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.byIdStmt = db.select().from(tasks).where(eq(tasks.id, sql.placeholder("id"))).prepare();
    this.nextStmt = db
      .select()
      .from(tasks)
      .where(and(eq(tasks.session_id, sql.placeholder("sid")), inArray(tasks.status, ACTIVE_TASK_STATUSES)))
      .orderBy(asc(tasks.id))
      .limit(1)
      .prepare();
  }

  create(input: {
    userId: string;
    sessionId: string;
    profileId: string;
    prompt: string;
    maxTurns: number;
    maxBudgetUsd: number;
    run?: RunOptions | null;
    /** Paid with the server's own provider key (the monthly spend cap counts it). */
    serverPaid?: boolean;
  }, db: DB = this.db): TaskRow {
    const run = input.run;
    const row: TaskRow = {
      id: newId("task"),
      user_id: input.userId,
      session_id: input.sessionId,
      profile_id: input.profileId,
      playbook_id: run?.playbookId ?? null,
      trigger: run?.trigger ?? null,
      max_continuations: run?.maxContinuations ?? 0,
      answer_timeout_ms: run?.answerTimeoutMs ?? null,
      scheduled_for: run?.scheduledFor ?? null,
      server_paid: input.serverPaid ?? false,
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
      max_turns: input.maxTurns,
      max_budget_usd: input.maxBudgetUsd,
      pending_tool_use_id: null,
      created_at: this.now(),
      started_at: null,
      finished_at: null,
    };
    db.insert(tasks).values(row).run();
    return row;
  }

  byId(id: string): TaskRow | undefined {
    return this.byIdStmt.get({ id });
  }

  /** Waiting tasks whose question is past its answer_due_at. */
  answersDue(now: number): TaskRow[] {
    return this.db.select().from(tasks).where(and(eq(tasks.status, "waiting_input"), lte(tasks.answer_due_at, now))).all();
  }

  /** The earliest answer_due_at of a waiting task, or null. */
  nextAnswerDue(): number | null {
    const r = this.db.select({ at: min(tasks.answer_due_at) }).from(tasks).where(eq(tasks.status, "waiting_input")).get();
    return r?.at ?? null;
  }

  /** The caller's task, or NOT_FOUND (also for someone else's). */
  get(userId: string, id: string): TaskRow {
    const t = this.byId(id);
    if (!t || t.user_id !== userId) throw Errors.notFound("Task", id);
    return t;
  }

  /** The oldest task of the session that is queued, running or waiting for input. */
  nextActive(sessionId: string): TaskRow | undefined {
    return this.nextStmt.get({ sid: sessionId });
  }

  update(id: string, patch: Partial<TaskRow>, db: DB = this.db) {
    db.update(tasks).set(patch).where(eq(tasks.id, id)).run();
  }

  /** Session ids that have a task to run or resume (startup recovery). */
  sessionsWithWork(): string[] {
    return this.db
      .selectDistinct({ sid: tasks.session_id })
      .from(tasks)
      .where(inArray(tasks.status, ["queued", "running"]))
      .all()
      .map((r) => r.sid);
  }

  list(userId: string, filter: { session_id?: string; status?: TaskStatus } & PageParams): Page<TaskRecord> {
    const conds: SQL[] = [eq(tasks.user_id, userId)];
    if (filter.session_id) conds.push(eq(tasks.session_id, filter.session_id));
    if (filter.status) conds.push(eq(tasks.status, filter.status));
    const k = keyset(tasks.id, and(...conds), filter);
    const rows = this.db.select().from(tasks).where(k.where).orderBy(k.orderBy).limit(k.fetch).all();
    return toPage(rows, k.limit, taskRecord);
  }

  /** The user's queued, running and waiting tasks, oldest first. */
  activeForUser(userId: string): TaskRow[] {
    return this.db.select().from(tasks).where(and(eq(tasks.user_id, userId), inArray(tasks.status, ACTIVE_TASK_STATUSES))).orderBy(tasks.id).all();
  }

  activeInSession(sessionId: string): TaskRow[] {
    return this.db.select().from(tasks).where(and(eq(tasks.session_id, sessionId), inArray(tasks.status, ACTIVE_TASK_STATUSES))).all();
  }
}
