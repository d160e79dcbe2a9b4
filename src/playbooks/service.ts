/**
 * Playbooks: saved prompts that run on demand (`run`), from a secret inbound URL (`trigger`) or on
 * a cron schedule (`fireDue`, called by the scheduler). Every run is an ordinary task carrying
 * `playbook_id`, in its own new session, through the task queue — streamed, persisted and limited
 * like any other. The trigger URL's secret is sealed with the vault key (its owner can read the URL
 * again) and compared in constant time; a wrong secret, an unknown or a disabled playbook all
 * answer the same 404.
 */
import { and, eq, isNotNull, lte, min } from "drizzle-orm";
import type { RunOptions, SubmitHooks, SubmitInput } from "../agents/orchestrator.ts";
import type { TaskRow } from "../agents/tasks.ts";
import { affected, type DB, first } from "../db/client.ts";
import { isId, newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { forUpdate } from "../db/row-lock.ts";
import { type PlaybookRow, type ProfileRow, type RunTrigger, type SessionRow } from "../db/schema.ts";
import { playbooks } from "../db/tables.ts";
import { all, first as firstIn, isPostgres, run, transact, type Unit } from "../db/unit.ts";
import { randomToken, safeEqual } from "../lib/crypto.ts";
import { AppError, Errors } from "../lib/errors.ts";
import type { Sealer } from "../lib/sealer.ts";
import { iso } from "../lib/time.ts";
import type { Logger } from "../log.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";
import { INPUT_MAX_BYTES, LAST_RUNS, type PlaybookCreate, type PlaybookPatch, type PlaybookRecord, type PlaybookRun } from "../schema/playbook.ts";
import type { PlaybookRuns } from "./runs.ts";
import { checkInterval, checkSchedule, checkTimezone, nextSlot } from "./schedule.ts";

export interface PlaybookDeps {
  db: DB;
  sealer: Sealer;
  log: Logger;
  now: () => number;
  publicUrl: string;
  runs: PlaybookRuns;
  profiles: { get(userId: string, profileId: string): Promise<ProfileRow> };
  orchestrator: { submit(userId: string, input: SubmitInput, hooks?: SubmitHooks): Promise<{ task: TaskRow; session: SessionRow }> };
  notifications: {
    /** A unit of the caller's transaction `tx`. */
    playbookRunEnded(r: { userId: string; playbookId: string; taskId?: string | null; playbookName?: string | null; status: "completed" | "failed" | "cancelled"; detail?: string | null }, tx: DB): Unit<unknown>;
    /** Wakes the delivery worker once that transaction has committed. */
    wake(): void;
  };
  /**
   * The operator's policy: a playbook's max_turns and max_budget_usd are checked when saved, as a
   * task's are when it runs; its schedule against the shortest interval between runs (null: exempt).
   */
  policy?: {
    checkTaskLimits(userId: string, limits: { max_turns?: number | null; max_budget_usd?: number | null }): Promise<void>;
    scheduleFloorSec(userId: string): Promise<number | null>;
  };
  /** The audit log (trigger rotations). */
  audit?: AuditSink;
  /** Whether the owner's account is disabled (its trigger URLs answer 404; wired by the app). */
  ownerDisabled?: (userId: string) => Promise<boolean>;
}

/** The associated data a playbook's trigger secret is sealed with. */
export const triggerAad = (id: string, userId: string) => `playbook-trigger:${id}:${userId}`;
const aad = triggerAad;
const notFound = (id: string) => Errors.notFound("Playbook", id);

/**
 * A run_input tag in any case, with spaces, attributes or no closing ">" ("</run_input", "< / RUN_INPUT >"),
 * up to its ">" when it has one.
 */
const RUN_INPUT_TAG = /<(\s*\/?\s*run_input\b[^<>]*)(>?)/gi;

/**
 * The run's prompt: the playbook's, then the run's input in a delimited block. The input comes from
 * whoever holds the trigger URL: a run_input tag inside it has its angle brackets escaped (&lt; &gt;),
 * so it cannot close the block and pass the rest off as the prompt's own text.
 */
export function runPrompt(prompt: string, input: unknown): string {
  if (input === undefined || input === null) return prompt;
  // The size is that of the input as sent (compact JSON); it is shown indented when that stays
  // small (indentation grows with the depth on every line: never built past a bound).
  const compact = typeof input === "string" ? input : JSON.stringify(input);
  if (Buffer.byteLength(compact, "utf8") > INPUT_MAX_BYTES) throw Errors.validation("input", `input must be at most ${INPUT_MAX_BYTES} bytes`, { reason: "too large", limit_bytes: INPUT_MAX_BYTES });
  let text = compact;
  if (typeof input !== "string") {
    const indented = JSON.stringify(input, null, 2);
    if (indented.length <= 2 * INPUT_MAX_BYTES) text = indented;
  }
  text = text.replace(RUN_INPUT_TAG, (_m, inner: string, close: string) => `&lt;${inner}${close ? "&gt;" : ""}`);
  return `${prompt}\n\n<run_input>\n${text}\n</run_input>`;
}

/**
 * A read that the same unit then writes over: on PostgreSQL the rows are locked (`FOR UPDATE`) so
 * that a concurrent read-modify-write waits for this one, as SQLite's single writer makes it.
 */
function lockedOnPostgres<Q extends PromiseLike<unknown[]>>(tx: DB, q: Q): Q {
  return isPostgres(tx) ? forUpdate(q) : q;
}

/** A slot already claimed elsewhere: the run must not start. */
class AlreadyClaimed extends Error {}

export class Playbooks {
  /** Called after any change to what is scheduled (the scheduler re-arms; awaited). */
  onScheduleChange: (() => void | Promise<void>)[] = [];

  constructor(private d: PlaybookDeps) {}

  // ------------------------------------------------------------------------------------------
  // Records

  async byId(id: string): Promise<PlaybookRow | undefined> {
    return isId("playbook", id) ? await first(this.d.db.select().from(playbooks).where(eq(playbooks.id, id))) : undefined;
  }

  private async own(userId: string, id: string): Promise<PlaybookRow> {
    const row = await this.byId(id);
    if (!row || row.user_id !== userId) throw notFound(id);
    return row;
  }

  private triggerUrl(row: PlaybookRow): string {
    return `${this.d.publicUrl}/hooks/playbooks/${row.id}/${this.d.sealer.open(row.trigger_ciphertext, aad(row.id, row.user_id))}`;
  }

  async record(row: PlaybookRow, lastRuns?: PlaybookRun[]): Promise<PlaybookRecord> {
    lastRuns ??= await this.d.runs.recent(row.id, LAST_RUNS);
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

  async get(userId: string, id: string): Promise<PlaybookRecord> {
    return this.record(await this.own(userId, id));
  }

  async list(userId: string, p: PageParams): Promise<Page<PlaybookRecord>> {
    const k = keyset(playbooks.id, eq(playbooks.user_id, userId), p);
    const rows = await this.d.db.select().from(playbooks).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    const page = toPage(rows, k.limit, (r) => this.record(r));
    return { ...page, data: await Promise.all(page.data) };
  }

  async runs(userId: string, id: string, p: PageParams): Promise<Page<PlaybookRun>> {
    await this.own(userId, id);
    return this.d.runs.list(id, p);
  }

  /** The next due time of an enabled schedule, from `after`. */
  private nextRun(row: Pick<PlaybookRow, "enabled" | "schedule" | "timezone">, after: number): number | null {
    return row.enabled && row.schedule ? nextSlot(row.schedule, row.timezone, after) : null;
  }

  async create(userId: string, body: PlaybookCreate): Promise<PlaybookRecord> {
    const timezone = checkTimezone(body.timezone ?? "UTC");
    const schedule = body.schedule == null ? null : checkSchedule(body.schedule, timezone);
    await this.d.profiles.get(userId, body.profile_id);
    await this.d.policy?.checkTaskLimits(userId, body);
    if (schedule) await this.checkFloor(userId, schedule, timezone);
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
    await this.d.db.insert(playbooks).values(row);
    await this.changed();
    return this.record(row, []);
  }

  /** PATCH: the fields given replace (null clears schedule, limits and answer_timeout). */
  async update(userId: string, id: string, patch: PlaybookPatch): Promise<PlaybookRecord> {
    const before = await this.own(userId, id);
    const { next } = this.merge(before, patch);
    // Held to the floor in what the change changes (as a profile is to the ceilings): a schedule
    // saved before the floor was raised does not block renaming the playbook.
    if (next.schedule && (next.schedule !== before.schedule || next.timezone !== before.timezone)) await this.checkFloor(userId, next.schedule, next.timezone);
    if (patch.profile_id !== undefined && patch.profile_id !== before.profile_id) await this.d.profiles.get(userId, patch.profile_id);
    else if (patch.enabled === true) await this.requireProfile(before);
    await this.d.policy?.checkTaskLimits(userId, patch);
    const { row, rescheduled } = await transact(this.d.db, (tx) => this.updateIn(tx, userId, id, patch));
    if (rescheduled) await this.changed();
    return this.record(row);
  }

  /** `update`'s read-modify-write: the patch applied to the row as read in the same transaction. */
  private *updateIn(tx: DB, userId: string, id: string, patch: PlaybookPatch): Unit<{ row: PlaybookRow; rescheduled: boolean }> {
    const cur = yield* this.ownIn(tx, userId, id);
    const { next, rescheduled, unchanged } = this.merge(cur, patch);
    if (unchanged) return { row: cur, rescheduled: false };
    const next_run_at = rescheduled ? this.nextRun(next, this.d.now()) : cur.next_run_at;
    const updated_at = Math.max(this.d.now(), cur.updated_at);
    yield* run(tx.update(playbooks).set({ ...next, next_run_at, updated_at }).where(eq(playbooks.id, id)));
    return { row: { ...cur, ...next, next_run_at, updated_at }, rescheduled };
  }

  /** The caller's playbook, read (and on PostgreSQL locked) inside the transaction `tx` (a unit). */
  private *ownIn(tx: DB, userId: string, id: string): Unit<PlaybookRow> {
    const row = isId("playbook", id) ? yield* firstIn(lockedOnPostgres(tx, tx.select().from(playbooks).where(eq(playbooks.id, id)).limit(1))) : undefined;
    if (!row || row.user_id !== userId) throw notFound(id);
    return row;
  }

  /** The fields after a PATCH (its time zone and schedule checked), and what it changes. */
  private merge(cur: PlaybookRow, patch: PlaybookPatch) {
    const timezone = patch.timezone !== undefined ? checkTimezone(patch.timezone) : cur.timezone;
    const schedule = patch.schedule === undefined ? cur.schedule : patch.schedule === null ? null : checkSchedule(patch.schedule, timezone);
    if (patch.timezone !== undefined && schedule) checkSchedule(schedule, timezone);
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
    const unchanged = (Object.keys(next) as (keyof typeof next)[]).every((k) => next[k] === cur[k]);
    return { next, rescheduled, unchanged };
  }

  /** 400 on `schedule` when it would run more often than the user's policy allows (min_schedule_interval). */
  private async checkFloor(userId: string, schedule: string, timezone: string): Promise<void> {
    const floor = await this.d.policy?.scheduleFloorSec(userId);
    if (floor) checkInterval(schedule, timezone, floor, this.d.now());
  }

  /** Whether the playbook's profile still exists (deleting a profile leaves its playbooks, disabled). */
  private async hasProfile(row: Pick<PlaybookRow, "user_id" | "profile_id">): Promise<boolean> {
    try {
      await this.d.profiles.get(row.user_id, row.profile_id);
      return true;
    } catch (e) {
      if (e instanceof AppError && e.code === "NOT_FOUND") return false;
      throw e;
    }
  }

  /**
   * 400 on `profile_id` when the playbook's profile was deleted: enabling or running it could only
   * fail, slot after slot. The owner points it at another profile first.
   */
  private async requireProfile(row: Pick<PlaybookRow, "user_id" | "profile_id">): Promise<void> {
    if (await this.hasProfile(row)) return;
    throw Errors.validation("profile_id", `This playbook's profile ${row.profile_id} was deleted; point it at another profile (PATCH profile_id)`, { reason: "profile deleted" });
  }

  /** Deletes the playbook and its schedule at once (its runs' tasks stay, with playbook_id). */
  async delete(userId: string, id: string): Promise<void> {
    const res = await this.d.db.delete(playbooks).where(and(eq(playbooks.id, id), eq(playbooks.user_id, userId)));
    if (affected(res) === 0) throw notFound(id);
    await this.changed();
  }

  /** A new trigger secret: the old URL answers 404 from now on. Audited as playbook.trigger_rotated (never the secret). */
  async rotateTrigger(userId: string, id: string, origin: AuditOrigin = {}): Promise<PlaybookRecord> {
    const trigger_ciphertext = this.d.sealer.seal(randomToken(32), aad(id, userId));
    const row = await transact(this.d.db, (tx) => this.rotateIn(tx, userId, id, trigger_ciphertext));
    this.d.log.info("playbook trigger rotated", { playbook_id: id, user_id: userId });
    await this.d.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "playbook.trigger_rotated", user_id: userId, target_id: id, details: { name: row.name } });
    return this.record(row);
  }

  /** `rotateTrigger`'s read-modify-write: the new secret stored over the row as read. */
  private *rotateIn(tx: DB, userId: string, id: string, trigger_ciphertext: PlaybookRow["trigger_ciphertext"]): Unit<PlaybookRow> {
    const cur = yield* this.ownIn(tx, userId, id);
    const updated_at = Math.max(this.d.now(), cur.updated_at);
    yield* run(tx.update(playbooks).set({ trigger_ciphertext, updated_at }).where(eq(playbooks.id, id)));
    return { ...cur, trigger_ciphertext, updated_at };
  }

  /**
   * A disabled account's schedules are held: no slot is due while it stays disabled (the playbooks
   * keep `enabled`; their trigger URLs answer 404). Returns how many were held.
   */
  async holdForUser(userId: string): Promise<number> {
    const held = affected(await this.d.db.update(playbooks).set({ next_run_at: null }).where(and(eq(playbooks.user_id, userId), isNotNull(playbooks.next_run_at))));
    if (held) {
      this.d.log.info("schedules of a disabled user held", { user_id: userId, count: held });
      await this.changed();
    }
    return held;
  }

  /** The account enabled again: its enabled schedules continue from now (slots while held are not run). */
  async resumeForUser(userId: string): Promise<number> {
    const now = this.d.now();
    const resumed = await transact(this.d.db, (tx) => this.resumeIn(tx, userId, now));
    if (resumed) {
      this.d.log.info("schedules of a re-enabled user resumed", { user_id: userId, count: resumed });
      await this.changed();
    }
    return resumed;
  }

  /** `resumeForUser`'s schedules read and each given its next slot from `now`, together. */
  private *resumeIn(tx: DB, userId: string, now: number): Unit<number> {
    const rows = yield* all(lockedOnPostgres(tx, tx.select().from(playbooks).where(and(eq(playbooks.user_id, userId), eq(playbooks.enabled, true), isNotNull(playbooks.schedule)))));
    for (const row of rows) yield* run(tx.update(playbooks).set({ next_run_at: this.nextRun(row, now) }).where(eq(playbooks.id, row.id)));
    return rows.length;
  }

  /** A deleted profile's playbooks stop: disabled, unscheduled. */
  async disableForProfile(profileId: string, userId: string): Promise<void> {
    const disabled = affected(
      await this.d.db
        .update(playbooks)
        .set({ enabled: false, next_run_at: null, updated_at: this.d.now() })
        .where(and(eq(playbooks.user_id, userId), eq(playbooks.profile_id, profileId), eq(playbooks.enabled, true))),
    );
    if (disabled) {
      this.d.log.info("playbooks of a deleted profile disabled", { profile_id: profileId, count: disabled });
      await this.changed();
    }
  }

  private async changed() {
    for (const f of this.onScheduleChange) await f();
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
    const row = await this.own(userId, id);
    await this.requireProfile(row);
    const { task, session } = await this.start(row, "manual", input);
    return { task_id: task.id, session_id: session.id, playbook_id: row.id };
  }

  /**
   * POST /hooks/playbooks/:id/:secret, its credential: the playbook the URL names, when the secret
   * is its own and it may run. A wrong secret, an unknown or a disabled playbook (or owner, or a
   * deleted profile) are the same 404. Checked before anything else of the request is spent or read (the per-playbook rate
   * limit, the body).
   */
  async authorizeTrigger(id: string, secret: string): Promise<PlaybookRow> {
    const row = await this.byId(id);
    const expected = row ? this.d.sealer.open(row.trigger_ciphertext, aad(row.id, row.user_id)) : "x".repeat(43);
    const ok = safeEqual(expected, secret);
    if (!row || !ok || !row.enabled || (await this.d.ownerDisabled?.(row.user_id))) throw Errors.notFound("Playbook");
    // (Its profile deleted — a playbook enabled in a race with that — is the same 404: the caller
    // of a trigger URL learns nothing of its owner's profiles.)
    if (!(await this.hasProfile(row))) throw Errors.notFound("Playbook");
    return row;
  }

  /** A run of a playbook `authorizeTrigger` let through. */
  async trigger(row: PlaybookRow, input: unknown): Promise<{ task_id: string }> {
    const { task } = await this.start(row, "hook", input);
    return { task_id: task.id };
  }

  /** Enabled schedules due at or before `now`, earliest first. */
  async due(now: number, limit: number): Promise<PlaybookRow[]> {
    return await this.d.db
      .select()
      .from(playbooks)
      .where(and(isNotNull(playbooks.next_run_at), lte(playbooks.next_run_at, now)))
      .orderBy(playbooks.next_run_at)
      .limit(limit);
  }

  /** The earliest due time of any schedule, or null. */
  async nextDue(): Promise<number | null> {
    return (await first(this.d.db.select({ at: min(playbooks.next_run_at) }).from(playbooks)))?.at ?? null;
  }

  /**
   * Claims the slot `due` of a playbook: moves `next_run_at` from it to `next`, only if no one
   * moved it first (so one claim wins, whichever process or replica tries). A unit of the caller's
   * transaction, the one that creates the run's task or records the missed run.
   */
  private *claim(tx: DB, id: string, due: number, next: number | null): Unit<boolean> {
    return (yield* run(tx.update(playbooks).set({ next_run_at: next }).where(and(eq(playbooks.id, id), eq(playbooks.next_run_at, due))))) === 1;
  }

  /** A slot claimed and recorded as missed (skipped or failed), with its owner notified when it failed; false if claimed elsewhere. */
  private *missedIn(
    tx: DB,
    row: PlaybookRow,
    slot: { due: number; next: number | null; claimed: boolean },
    status: "skipped" | "failed",
    err: AppError | null,
    message: string,
  ): Unit<boolean> {
    if (!slot.claimed && !(yield* this.claim(tx, row.id, slot.due, slot.next))) return false;
    yield* this.d.runs.missedRun(tx, { playbookId: row.id, userId: row.user_id, trigger: "schedule", status, code: err?.code ?? null, message, scheduledFor: slot.due, at: this.d.now() });
    if (err) {
      const detail = `the scheduled run did not start — ${err.code}: ${err.message}`;
      yield* this.d.notifications.playbookRunEnded({ userId: row.user_id, playbookId: row.id, taskId: null, playbookName: row.name, status: "failed", detail }, tx);
    }
    return true;
  }

  /**
   * Runs a due schedule slot, once: the slot is claimed by moving `next_run_at` from it to the
   * first slot after now (missed slots collapse into this one run) in the same transaction that
   * creates the run's task, so a crash at any point neither loses nor doubles it. A slot whose
   * previous run still goes is recorded as skipped; one refused by a limit is recorded failed and
   * its owner notified. The promise settles once the slot is claimed (or recorded, or found
   * claimed elsewhere); the run's start goes on without it (the scheduler fires many slots without
   * waiting for their containers), and a failure to start is recorded and logged here.
   */
  async fireDue(row: PlaybookRow): Promise<void> {
    const due = row.next_run_at;
    if (due === null) return;
    const now = this.d.now();
    // A schedule saved before the owner's floor (min_schedule_interval) was raised keeps running,
    // thinned to it: its next slot is the first at least the floor after this one.
    const floor = await this.d.policy?.scheduleFloorSec(row.user_id);
    const next = this.nextRun(row, floor ? Math.max(now, due + floor * 1000 - 1) : now);

    if (await this.d.runs.hasActive(row.id)) {
      await transact(this.d.db, (tx) => this.missedIn(tx, row, { due, next, claimed: false }, "skipped", null, "The previous run was still going when this slot came"));
      return;
    }
    let claimed = false;
    let onClaimed!: () => void;
    const claimedNow = new Promise<void>((resolve) => (onClaimed = resolve));
    let started: Promise<unknown>;
    const claim = (tx: DB) => this.claim(tx, row.id, due, next);
    try {
      started = this.start(
        row,
        "schedule",
        undefined,
        {
          // A unit of the orchestrator's transaction that creates the session and the run's task.
          *inTransaction(tx) {
            if (!(yield* claim(tx))) throw new AlreadyClaimed();
          },
          // That transaction has committed: the slot is this run's.
          onSession: () => {
            claimed = true;
            onClaimed();
          },
        },
        due,
      );
    } catch (e) {
      started = Promise.reject(e);
    }
    const settled = started
      .then(
        () => undefined,
        (e) => {
          if (e instanceof AlreadyClaimed) return;
          const err = e instanceof AppError ? e : new AppError("INTERNAL_ERROR", "Internal error while starting the run");
          if (!(e instanceof AppError)) this.d.log.error("scheduled playbook run failed to start", { playbook_id: row.id, err: e });
          return transact(this.d.db, (tx) => this.missedIn(tx, row, { due, next, claimed }, "failed", err, err.message)).then((recorded) => {
            if (recorded) this.d.notifications.wake();
          });
        },
      )
      .catch((e) => this.d.log.error("playbook schedule failed", { playbook_id: row.id, err: e }));
    await Promise.race([claimedNow, settled]);
  }

  /**
   * For the task queue's run-end notifications: a unit of the caller's transaction `tx` (the one
   * that ends the task and queues the notification).
   */
  *nameOf(tx: DB, id: string): Unit<string | null> {
    return (yield* firstIn(tx.select({ name: playbooks.name }).from(playbooks).where(eq(playbooks.id, id)).limit(1)))?.name ?? null;
  }
}
