/**
 * Playbooks: saved prompts that run on demand (`run`), from a secret inbound URL (`trigger`) or on
 * a cron schedule (`fireDue`, called by the scheduler). Every run is an ordinary task carrying
 * `playbook_id`, in its own new session, through the task queue — streamed, persisted and limited
 * like any other. The trigger URL's secret is sealed with the vault key (its owner can read the URL
 * again) and compared in constant time; a wrong secret, an unknown or a disabled playbook all
 * answer the same 404.
 */
import { and, eq, isNotNull, lte, min, sql } from "drizzle-orm";
import type { RunOptions, SubmitHooks, SubmitInput } from "../agents/orchestrator.ts";
import type { TaskRow } from "../agents/tasks.ts";
import { changes, type DB } from "../db/client.ts";
import { isId, newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type PlaybookRow, playbooks, type ProfileRow, type RunTrigger, type SessionRow } from "../db/schema.ts";
import { randomToken, safeEqual } from "../lib/crypto.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { Sealer } from "../lib/sealer.ts";
import { iso } from "../lib/time.ts";
import type { Logger } from "../log.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";
import { INPUT_MAX_BYTES, LAST_RUNS, type PlaybookCreate, type PlaybookPatch, type PlaybookRecord, type PlaybookRun } from "../schema/playbook.ts";
import type { PlaybookRuns } from "./runs.ts";
import { checkSchedule, checkTimezone, nextSlot } from "./schedule.ts";

export interface PlaybookDeps {
  db: DB;
  sealer: Sealer;
  log: Logger;
  now: () => number;
  publicUrl: string;
  runs: PlaybookRuns;
  profiles: { get(userId: string, profileId: string): ProfileRow };
  orchestrator: { submit(userId: string, input: SubmitInput, hooks?: SubmitHooks): Promise<{ task: TaskRow; session: SessionRow }> };
  notifications: {
    playbookRunEnded(r: { userId: string; playbookId: string; taskId?: string | null; playbookName?: string | null; status: "completed" | "failed" | "cancelled"; detail?: string | null }): unknown;
  };
  /** The audit log (trigger rotations). */
  audit?: AuditSink;
  /** Whether the owner's account is disabled (its trigger URLs answer 404; wired by the app). */
  ownerDisabled?: (userId: string) => boolean;
}

const aad = (id: string, userId: string) => `playbook-trigger:${id}:${userId}`;
const notFound = (id: string) => Errors.notFound("Playbook", id);

/** The run's prompt: the playbook's, then the run's input in a delimited block. */
export function runPrompt(prompt: string, input: unknown): string {
  if (input === undefined || input === null) return prompt;
  const text = typeof input === "string" ? input : JSON.stringify(input, null, 2);
  if (Buffer.byteLength(text, "utf8") > INPUT_MAX_BYTES) throw Errors.validation("input", `input must be at most ${INPUT_MAX_BYTES} bytes`, { reason: "too large", limit_bytes: INPUT_MAX_BYTES });
  return `${prompt}\n\n<run_input>\n${text}\n</run_input>`;
}

/** A slot already claimed elsewhere: the run must not start. */
class AlreadyClaimed extends Error {}

export class Playbooks {
  private byIdStmt;
  private claimStmt;
  private dueStmt;
  /** Called after any change to what is scheduled (the scheduler re-arms). */
  onScheduleChange: (() => void)[] = [];

  constructor(private d: PlaybookDeps) {
    this.byIdStmt = d.db.select().from(playbooks).where(eq(playbooks.id, sql.placeholder("id"))).prepare();
    this.claimStmt = d.db
      .update(playbooks)
      .set({ next_run_at: sql`${sql.placeholder("next")}` })
      .where(and(eq(playbooks.id, sql.placeholder("id")), eq(playbooks.next_run_at, sql.placeholder("due"))))
      .prepare();
    this.dueStmt = d.db
      .select()
      .from(playbooks)
      .where(and(isNotNull(playbooks.next_run_at), lte(playbooks.next_run_at, sql.placeholder("now"))))
      .orderBy(playbooks.next_run_at)
      .limit(sql.placeholder("limit"))
      .prepare();
  }

  // ------------------------------------------------------------------------------------------
  // Records

  byId(id: string): PlaybookRow | undefined {
    return isId("playbook", id) ? this.byIdStmt.get({ id }) : undefined;
  }

  private own(userId: string, id: string): PlaybookRow {
    const row = this.byId(id);
    if (!row || row.user_id !== userId) throw notFound(id);
    return row;
  }

  private triggerUrl(row: PlaybookRow): string {
    return `${this.d.publicUrl}/hooks/playbooks/${row.id}/${this.d.sealer.open(row.trigger_ciphertext, aad(row.id, row.user_id))}`;
  }

  record(row: PlaybookRow, lastRuns: PlaybookRun[] = this.d.runs.recent(row.id, LAST_RUNS)): PlaybookRecord {
    return {
      id: row.id,
      name: row.name,
      profile_id: row.profile_id,
      prompt: row.prompt,
      max_continuations: row.max_continuations,
      max_turns: row.max_turns,
      max_budget_usd: row.max_budget_usd,
      schedule: row.schedule,
      timezone: row.timezone,
      enabled: row.enabled,
      answer_timeout: row.answer_timeout_ms === null ? null : Math.round(row.answer_timeout_ms / 1000),
      trigger_url: this.triggerUrl(row),
      next_run_at: iso(row.next_run_at),
      last_runs: lastRuns,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    };
  }

  get(userId: string, id: string): PlaybookRecord {
    return this.record(this.own(userId, id));
  }

  list(userId: string, p: PageParams): Page<PlaybookRecord> {
    const k = keyset(playbooks.id, eq(playbooks.user_id, userId), p);
    const rows = this.d.db.select().from(playbooks).where(k.where).orderBy(k.orderBy).limit(k.fetch).all();
    return toPage(rows, k.limit, (r) => this.record(r));
  }

  runs(userId: string, id: string, p: PageParams): Page<PlaybookRun> {
    this.own(userId, id);
    return this.d.runs.list(id, p);
  }

  /** The next due time of an enabled schedule, from `after`. */
  private nextRun(row: Pick<PlaybookRow, "enabled" | "schedule" | "timezone">, after: number): number | null {
    return row.enabled && row.schedule ? nextSlot(row.schedule, row.timezone, after) : null;
  }

  create(userId: string, body: PlaybookCreate): PlaybookRecord {
    const timezone = checkTimezone(body.timezone ?? "UTC");
    const schedule = body.schedule == null ? null : checkSchedule(body.schedule, timezone);
    this.d.profiles.get(userId, body.profile_id);
    const now = this.d.now();
    const id = newId("playbook");
    const fields = {
      name: body.name.trim(),
      profile_id: body.profile_id,
      prompt: body.prompt,
      max_continuations: body.max_continuations ?? 0,
      max_turns: body.max_turns ?? null,
      max_budget_usd: body.max_budget_usd ?? null,
      schedule,
      timezone,
      enabled: body.enabled ?? true,
      answer_timeout_ms: body.answer_timeout == null ? null : body.answer_timeout * 1000,
    };
    const row: PlaybookRow = {
      id,
      user_id: userId,
      ...fields,
      trigger_ciphertext: this.d.sealer.seal(randomToken(32), aad(id, userId)),
      next_run_at: this.nextRun(fields, now),
      created_at: now,
      updated_at: now,
    };
    this.d.db.insert(playbooks).values(row).run();
    this.changed();
    return this.record(row, []);
  }

  /** PATCH: the fields given replace (null clears schedule, limits and answer_timeout). */
  update(userId: string, id: string, patch: PlaybookPatch): PlaybookRecord {
    const cur = this.own(userId, id);
    const timezone = patch.timezone !== undefined ? checkTimezone(patch.timezone) : cur.timezone;
    const schedule = patch.schedule === undefined ? cur.schedule : patch.schedule === null ? null : checkSchedule(patch.schedule, timezone);
    if (patch.timezone !== undefined && schedule) checkSchedule(schedule, timezone);
    if (patch.profile_id !== undefined && patch.profile_id !== cur.profile_id) this.d.profiles.get(userId, patch.profile_id);
    const next = {
      name: patch.name?.trim() ?? cur.name,
      profile_id: patch.profile_id ?? cur.profile_id,
      prompt: patch.prompt ?? cur.prompt,
      max_continuations: patch.max_continuations ?? cur.max_continuations,
      max_turns: patch.max_turns === undefined ? cur.max_turns : patch.max_turns,
      max_budget_usd: patch.max_budget_usd === undefined ? cur.max_budget_usd : patch.max_budget_usd,
      schedule,
      timezone,
      enabled: patch.enabled ?? cur.enabled,
      answer_timeout_ms: patch.answer_timeout === undefined ? cur.answer_timeout_ms : patch.answer_timeout === null ? null : patch.answer_timeout * 1000,
    };
    const rescheduled = next.schedule !== cur.schedule || next.timezone !== cur.timezone || next.enabled !== cur.enabled;
    const next_run_at = rescheduled ? this.nextRun(next, this.d.now()) : cur.next_run_at;
    const unchanged = (Object.keys(next) as (keyof typeof next)[]).every((k) => next[k] === cur[k]);
    if (unchanged) return this.record(cur);
    const updated_at = Math.max(this.d.now(), cur.updated_at);
    this.d.db.update(playbooks).set({ ...next, next_run_at, updated_at }).where(eq(playbooks.id, id)).run();
    if (rescheduled) this.changed();
    return this.record({ ...cur, ...next, next_run_at, updated_at });
  }

  /** Deletes the playbook and its schedule at once (its runs' tasks stay, with playbook_id). */
  delete(userId: string, id: string): void {
    const res = this.d.db.delete(playbooks).where(and(eq(playbooks.id, id), eq(playbooks.user_id, userId))).run();
    if (changes(res) === 0) throw notFound(id);
    this.changed();
  }

  /** A new trigger secret: the old URL answers 404 from now on. Audited as playbook.trigger_rotated (never the secret). */
  rotateTrigger(userId: string, id: string, origin: AuditOrigin = {}): PlaybookRecord {
    const cur = this.own(userId, id);
    const trigger_ciphertext = this.d.sealer.seal(randomToken(32), aad(cur.id, userId));
    const updated_at = Math.max(this.d.now(), cur.updated_at);
    this.d.db.update(playbooks).set({ trigger_ciphertext, updated_at }).where(eq(playbooks.id, id)).run();
    this.d.log.info("playbook trigger rotated", { playbook_id: id, user_id: userId });
    this.d.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "playbook.trigger_rotated", user_id: userId, target_id: id, details: { name: cur.name } });
    return this.record({ ...cur, trigger_ciphertext, updated_at });
  }

  /**
   * A disabled account's schedules are held: no slot is due while it stays disabled (the playbooks
   * keep `enabled`; their trigger URLs answer 404). Returns how many were held.
   */
  holdForUser(userId: string): number {
    const res = this.d.db.update(playbooks).set({ next_run_at: null }).where(and(eq(playbooks.user_id, userId), isNotNull(playbooks.next_run_at))).run();
    if (changes(res)) {
      this.d.log.info("schedules of a disabled user held", { user_id: userId, count: changes(res) });
      this.changed();
    }
    return changes(res);
  }

  /** The account enabled again: its enabled schedules continue from now (slots while held are not run). */
  resumeForUser(userId: string): number {
    const now = this.d.now();
    const rows = this.d.db.select().from(playbooks).where(and(eq(playbooks.user_id, userId), eq(playbooks.enabled, true), isNotNull(playbooks.schedule))).all();
    for (const row of rows) this.d.db.update(playbooks).set({ next_run_at: this.nextRun(row, now) }).where(eq(playbooks.id, row.id)).run();
    if (rows.length) {
      this.d.log.info("schedules of a re-enabled user resumed", { user_id: userId, count: rows.length });
      this.changed();
    }
    return rows.length;
  }

  /** A deleted profile's playbooks stop: disabled, unscheduled. */
  disableForProfile(profileId: string, userId: string) {
    const res = this.d.db
      .update(playbooks)
      .set({ enabled: false, next_run_at: null, updated_at: this.d.now() })
      .where(and(eq(playbooks.user_id, userId), eq(playbooks.profile_id, profileId), eq(playbooks.enabled, true)))
      .run();
    if (changes(res)) {
      this.d.log.info("playbooks of a deleted profile disabled", { profile_id: profileId, count: changes(res) });
      this.changed();
    }
  }

  private changed() {
    for (const f of this.onScheduleChange) f();
  }

  // ------------------------------------------------------------------------------------------
  // Runs

  private start(row: PlaybookRow, trigger: RunTrigger, input: unknown, hooks?: SubmitHooks, scheduledFor: number | null = null) {
    const run: RunOptions = { playbookId: row.id, trigger, maxContinuations: row.max_continuations, answerTimeoutMs: row.answer_timeout_ms, scheduledFor };
    const submit: SubmitInput = {
      profile_id: row.profile_id,
      prompt: runPrompt(row.prompt, input),
      ...(row.max_turns !== null ? { max_turns: row.max_turns } : {}),
      ...(row.max_budget_usd !== null ? { max_budget_usd: row.max_budget_usd } : {}),
      run,
    };
    return this.d.orchestrator.submit(row.user_id, submit, hooks);
  }

  /** POST /v1/playbooks/:id/run: a new run every call (also of a disabled playbook). */
  async run(userId: string, id: string, input: unknown): Promise<{ task_id: string; session_id: string; playbook_id: string }> {
    const row = this.own(userId, id);
    const { task, session } = await this.start(row, "manual", input);
    return { task_id: task.id, session_id: session.id, playbook_id: row.id };
  }

  /** POST /hooks/playbooks/:id/:secret. */
  async trigger(id: string, secret: string, input: unknown): Promise<{ task_id: string }> {
    const row = this.byId(id);
    const expected = row ? this.d.sealer.open(row.trigger_ciphertext, aad(row.id, row.user_id)) : "x".repeat(43);
    const ok = safeEqual(expected, secret);
    if (!row || !ok || !row.enabled || this.d.ownerDisabled?.(row.user_id)) throw Errors.notFound("Playbook");
    const { task } = await this.start(row, "hook", input);
    return { task_id: task.id };
  }

  /** Enabled schedules due at or before `now`, earliest first. */
  due(now: number, limit: number): PlaybookRow[] {
    return this.dueStmt.all({ now, limit });
  }

  /** The earliest due time of any schedule, or null. */
  nextDue(): number | null {
    return this.d.db.select({ at: min(playbooks.next_run_at) }).from(playbooks).get()?.at ?? null;
  }

  /**
   * Runs a due schedule slot, once: the slot is claimed by moving `next_run_at` from it to the
   * first slot after now (missed slots collapse into this one run) in the same transaction that
   * creates the run's task, so a crash at any point neither loses nor doubles it. A slot whose
   * previous run still goes is recorded as skipped; one refused by a limit is recorded failed and
   * its owner notified. The claim happens before this returns its promise (the scheduler fires
   * many slots without waiting for their containers).
   */
  fireDue(row: PlaybookRow): Promise<void> {
    const due = row.next_run_at;
    if (due === null) return Promise.resolve();
    const now = this.d.now();
    const next = this.nextRun(row, now);
    const claim = () => changes(this.claimStmt.run({ id: row.id, due, next })) === 1;
    const missed = (status: "skipped" | "failed", code: AppError["code"] | null, message: string) =>
      this.d.runs.recordMissed({ playbookId: row.id, userId: row.user_id, trigger: "schedule", status, code, message, scheduledFor: due, at: this.d.now() });

    if (this.d.runs.hasActive(row.id)) {
      this.d.db.transaction(() => {
        if (claim()) missed("skipped", null, "The previous run was still going when this slot came");
      });
      return Promise.resolve();
    }
    let claimed = false;
    let started: Promise<unknown>;
    try {
      started = this.start(
        row,
        "schedule",
        undefined,
        {
          inTransaction: () => {
            if (!claim()) throw new AlreadyClaimed();
            claimed = true;
          },
        },
        due,
      );
    } catch (e) {
      started = Promise.reject(e);
    }
    return started.then(
      () => undefined,
      (e) => {
        if (e instanceof AlreadyClaimed) return;
        const err = e instanceof AppError ? e : new AppError("INTERNAL_ERROR", "Internal error while starting the run");
        if (!(e instanceof AppError)) this.d.log.error("scheduled playbook run failed to start", { playbook_id: row.id, err: e });
        this.d.db.transaction(() => {
          if (!claimed && !claim()) return;
          missed("failed", err.code, err.message);
          this.d.notifications.playbookRunEnded({ userId: row.user_id, playbookId: row.id, taskId: null, playbookName: row.name, status: "failed", detail: `the scheduled run did not start — ${err.code}: ${err.message}` });
        });
      },
    );
  }

  /** For the task queue's run-end notifications. */
  nameOf(id: string): string | null {
    return this.byIdStmt.get({ id })?.name ?? null;
  }
}
