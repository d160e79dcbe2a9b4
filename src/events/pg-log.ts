/**
 * The per-session event log on PostgreSQL (--database postgres://…): the same contract as the
 * SQLite log (./log.ts) — every frame of a session gets the next `seq`, is stored as the exact
 * JSON sent, and a seq is never given to two frames, not even across a crash — reached another
 * way, because a PostgreSQL write cannot happen synchronously before a frame leaves:
 *
 * Frames leave only once they are stored. `append` assigns the seq and queues the frame; the
 * queue is written in one transaction per batch (at most `maxBatch` frames, or after
 * `flushDelayMs`), and only then are the batch's frames handed to the hub (`onStored`), in order.
 * A crash loses at most frames nobody was sent, so numbering continues above MAX(seq) after a
 * restart with neither gap nor reuse — no reservation mark is needed (`reserve` does nothing).
 *
 * A session's counter is read once per process (`load`, awaited by the hub before the session's
 * first frame or subscription); the hub holds frames published meanwhile, in order.
 * This process must be the only writer of a session's frames (one server on the database; the
 * replicas of issue 17 will allocate seqs in the database).
 */
import { and, asc, eq, gt, gte, lt, lte, max } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { debugEvents, events } from "../db/tables.ts";
import { all, run, transact, type Unit } from "../db/unit.ts";
import type { FrameInput } from "../schema/stream.ts";
import { type AppendResult, debugFrame, type EventStore, orderedFrame, type StoredLive, type ReadBound, type StoredFrame, mergeDebug } from "./log.ts";

interface Queued {
  session_id: string;
  /** null: a debug frame (it carries after_seq). */
  seq: number | null;
  after_seq: number;
  type: string;
  task_id: string | null;
  frame: string;
  created_at: number;
}


export class PgEventLog implements EventStore {
  appended = 0;
  readonly deliversWhenStored = true;
  onDropped?: (frame: { session_id: string; seq: number; type: string }, err: Error) => void;
  /** The hub's delivery of stored frames, in the order they were appended. */
  onStored?: (frames: StoredLive[]) => void;
  /** A delivery that threw (logged by the app). */
  onDeliveryError?: (err: Error) => void;
  private lasts = new Map<string, number>();
  private loading = new Map<string, Promise<void>>();
  private queue: Queued[] = [];
  private timer: Timer | null = null;
  /** The write under way: flushes run one after the other, so frames are stored and handed out in order. */
  private writing: Promise<void> = Promise.resolve();
  /** Highest debug_events id this process has stored or seen (the replay bound of admins' debug frames). */
  private maxDebugId = 0;

  constructor(
    private db: DB,
    private now: () => number,
    private opts: { maxBatch?: number; flushDelayMs?: number } = {},
  ) {}

  /** At start: the debug frames' id bound. */
  async start(): Promise<void> {
    const row = await first(this.db.select({ id: max(debugEvents.id) }).from(debugEvents));
    this.maxDebugId = Number(row?.id ?? 0);
  }

  ready(sessionId: string): boolean {
    return this.lasts.has(sessionId);
  }

  load(sessionId: string): Promise<void> {
    if (this.lasts.has(sessionId)) return Promise.resolve();
    let p = this.loading.get(sessionId);
    if (!p) {
      p = (async () => {
        const row = await first(this.db.select({ seq: max(events.seq) }).from(events).where(eq(events.session_id, sessionId)));
        if (!this.lasts.has(sessionId)) this.lasts.set(sessionId, Number(row?.seq ?? 0));
      })().finally(() => this.loading.delete(sessionId));
      this.loading.set(sessionId, p);
    }
    return p;
  }

  private lastOf(sessionId: string): number {
    const last = this.lasts.get(sessionId);
    if (last === undefined) throw new Error(`event log: session ${sessionId} used before load()`);
    return last;
  }

  append(sessionId: string, frame: FrameInput): AppendResult {
    const seq = this.lastOf(sessionId) + 1;
    this.lasts.set(sessionId, seq);
    this.appended++;
    const { json, type, task_id } = orderedFrame(sessionId, seq, frame);
    this.enqueue({ session_id: sessionId, seq, after_seq: seq, type, task_id, frame: json, created_at: this.now() });
    return { seq, json };
  }

  appendDebug(sessionId: string, frame: FrameInput): { json: string; afterSeq: number } {
    const afterSeq = this.lastOf(sessionId);
    const { json, type, task_id } = debugFrame(sessionId, afterSeq, frame);
    this.enqueue({ session_id: sessionId, seq: null, after_seq: afterSeq, type, task_id, frame: json, created_at: this.now() });
    return { json, afterSeq };
  }

  /** Frames leave only once stored: nothing to reserve. */
  reserve(): void {}

  private enqueue(q: Queued) {
    this.queue.push(q);
    if (this.queue.length >= (this.opts.maxBatch ?? 512)) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.opts.flushDelayMs ?? 5);
  }

  /** Writes every queued frame (after any write under way), then hands them to the hub. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.queue.length === 0) return this.writing;
    const batch = this.queue;
    this.queue = [];
    // A failed write must not stop the ones queued after it (write reports its own failures).
    this.writing = this.writing.catch(() => {}).then(() => this.write(batch));
    return this.writing;
  }

  private async write(batch: Queued[]): Promise<void> {
    let stored: Queued[];
    try {
      await transact(this.db, (tx) => this.insert(tx, batch));
      stored = batch;
    } catch {
      // One bad row (its session deleted meanwhile) must not lose the others.
      stored = [];
      for (const q of batch) {
        try {
          await transact(this.db, (tx) => this.insert(tx, [q]));
          stored.push(q);
        } catch (e) {
          // The driver's own error, not drizzle's wrapper (whose message repeats every parameter: the frames).
          this.onDropped?.({ session_id: q.session_id, seq: q.seq ?? -1, type: q.type }, ((e as { cause?: unknown }).cause as Error) ?? (e as Error));
        }
      }
    }
    if (!stored.length) return;
    try {
      this.onStored?.(stored.map((q) => ({ session_id: q.session_id, seq: q.seq ?? -1, type: q.type, json: q.frame })));
    } catch (e) {
      // A subscriber's failure is the subscriber's (the hub drops it); the frames are stored.
      this.onDeliveryError?.(e as Error);
    }
  }

  private *insert(tx: DB, batch: Queued[]): Unit<void> {
    const frames = batch.filter((q) => q.seq !== null);
    const debug = batch.filter((q) => q.seq === null);
    if (frames.length) {
      yield* run(tx.insert(events).values(frames.map((q) => ({ session_id: q.session_id, seq: q.seq!, type: q.type, task_id: q.task_id, frame: q.frame, created_at: q.created_at }))));
    }
    if (debug.length) {
      const ids = yield* all(
        tx
          .insert(debugEvents)
          .values(debug.map((q) => ({ session_id: q.session_id, after_seq: q.after_seq, type: q.type, task_id: q.task_id, frame: q.frame, created_at: q.created_at })))
          .returning({ id: debugEvents.id }),
      );
      for (const { id } of ids) this.maxDebugId = Math.max(this.maxDebugId, Number(id));
    }
  }

  async read(sessionId: string, after = 0, limit = 1_000_000, withDebug = false): Promise<StoredFrame[]> {
    await this.flush();
    const rows = await this.db
      .select({ seq: events.seq, type: events.type, task_id: events.task_id, frame: events.frame })
      .from(events)
      .where(and(eq(events.session_id, sessionId), gt(events.seq, after)))
      .orderBy(asc(events.seq))
      .limit(limit);
    if (!withDebug) return rows;
    const upTo = rows.length === limit ? rows[rows.length - 1]!.seq : Number.MAX_SAFE_INTEGER;
    return mergeDebug(rows, await this.readDebug(sessionId, after, upTo, null));
  }

  async readPage(sessionId: string, after: number, bound: ReadBound, limit: number, withDebug = false): Promise<{ rows: StoredFrame[]; more: boolean }> {
    await this.flush();
    const rows = await this.db
      .select({ seq: events.seq, type: events.type, task_id: events.task_id, frame: events.frame })
      .from(events)
      .where(and(eq(events.session_id, sessionId), gt(events.seq, after), lte(events.seq, bound.seq)))
      .orderBy(asc(events.seq))
      .limit(limit);
    const more = rows.length === limit;
    if (!withDebug) return { rows, more };
    const upTo = more ? rows[rows.length - 1]!.seq : Number.MAX_SAFE_INTEGER;
    return { rows: mergeDebug(rows, await this.readDebug(sessionId, after, upTo, bound.debugId)), more };
  }

  private readDebug(sessionId: string, from: number, upTo: number, maxId: number | null) {
    return this.db
      .select({ after_seq: debugEvents.after_seq, type: debugEvents.type, task_id: debugEvents.task_id, frame: debugEvents.frame })
      .from(debugEvents)
      .where(
        and(
          eq(debugEvents.session_id, sessionId),
          gte(debugEvents.after_seq, from),
          lt(debugEvents.after_seq, upTo),
          maxId === null ? undefined : lte(debugEvents.id, maxId),
        ),
      )
      .orderBy(asc(debugEvents.id));
  }

  bound(sessionId: string, withDebug = false): ReadBound {
    return { seq: this.lastOf(sessionId), debugId: withDebug ? this.maxDebugId : 0 };
  }

  last(sessionId: string): number {
    return this.lastOf(sessionId);
  }

  /** Clean shutdown: everything queued is stored (and handed out). */
  settle(): Promise<void> {
    return this.flush();
  }

  forget(sessionId: string) {
    this.lasts.delete(sessionId);
  }
}
