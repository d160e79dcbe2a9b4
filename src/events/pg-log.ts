/**
 * The per-session event log on PostgreSQL (--database postgres://…), shared by every replica on
 * the database: the same contract as the SQLite log (./log.ts) — every frame of a session gets the
 * next `seq`, is stored as the exact JSON sent, and a seq is never given to two frames — reached
 * another way, since a session's frames may come from several processes.
 *
 * **Seqs are allocated in the database, when a batch is written.** `append` queues the frame; the
 * queue is written in one transaction per batch (at most `maxBatch` frames, or after
 * `flushDelayMs`). The transaction locks the batch's session rows (`FOR NO KEY UPDATE`, in id
 * order), reads each session's MAX(seq) (or its `seq_reserved` mark, if higher: seqs of frames
 * removed by `dropCutText`), numbers the frames after it, inserts them and sends one
 * NOTIFY naming the sessions and seq ranges it stored. The row lock makes writers of one session
 * take turns, so a session's frames commit in seq order across replicas, with neither gap nor
 * reuse; a crash loses at most frames nobody was sent (frames leave only once stored).
 *
 * **Frames reach subscribers through a per-session tail** (`Tail`), kept only for sessions watched
 * in this process (`load` … `unwatch`, driven by the hub). A tail knows the highest seq it handed
 * out and hands out frames strictly in order: this process's own batches directly (no read) when
 * they follow on; otherwise — another replica's NOTIFY, or a gap in front of a local batch — it
 * reads the missing rows from the table. After the LISTEN connection drops and comes back every
 * tail reads what it may have missed. Admin-only frames are numbered like any other; reads for a
 * user without the admin role leave them out.
 *
 * `bound` (where a replay stops) is read from the database after the subscriber is registered
 * (see Hub.attach): every frame committed before that read is at or below it, every later one is
 * above it and reaches the subscriber live.
 */
import { and, asc, desc, eq, gt, inArray, lt, lte, max, ne, notInArray, type SQL } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { events, sessions } from "../db/tables.ts";
import { forNoKeyUpdate } from "../db/row-lock.ts";
import { all, run, transact, type Unit } from "../db/unit.ts";
import { type Bus, CHANNELS } from "../replicas/bus.ts";
import type { FrameInput } from "../schema/stream.ts";
import { ADMIN_ONLY_TYPES, type EventStore, joinTokenFrames, orderedFrame, type ReadBound, type StoredFrame, type StoredLive } from "./log.ts";

interface Queued {
  session_id: string;
  frame: FrameInput;
  created_at: number;
}

/** What one batch stored for one session, in append order. */
interface Stored {
  session_id: string;
  from: number;
  to: number;
  frames: StoredLive[];
}

/**
 * NOTIFY payload entry: [session id, first seq, last seq, 0, 0]. (The last two named debug rows
 * once; a replica of that older runcell reads the entry as it always did.)
 */
type Entry = [string, number, number, number, number];
/** Entries per NOTIFY (the payload stays well under PostgreSQL's 8000 bytes). */
const ENTRIES_PER_NOTIFY = 60;

/** A watched session in this process: the highest seq handed out, and the deliveries in turn. */
interface Tail {
  upTo: number;
  /** Deliveries run one after the other, the first after the starting MAX(seq) read. */
  chain: Promise<void>;
  /** Settles once `upTo` holds the starting MAX(seq) (rejects when that read failed). */
  loaded: Promise<void>;
  ready: boolean;
}

export class PgEventLog implements EventStore {
  appended = 0;
  readonly deliversWhenStored = true;
  onDropped?: (frame: { session_id: string; seq: number; type: string }, err: Error) => void;
  /** The hub's delivery of stored frames, per session in seq order. */
  onStored?: (frames: StoredLive[]) => void;
  /** A delivery (or a read for one) that failed (logged by the app). */
  onDeliveryError?: (err: Error) => void;
  private tails = new Map<string, Tail>();
  private queue: Queued[] = [];
  private timer: Timer | null = null;
  /** The write under way: flushes run one after the other, so this process's frames are stored in order. */
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private db: DB,
    private now: () => number,
    private bus: Bus,
    private opts: { maxBatch?: number; flushDelayMs?: number } = {},
  ) {}

  /** At start: other replicas' stored frames, from now on. */
  async start(): Promise<void> {
    await this.bus.listen(CHANNELS.events, (m) => this.remote(m), () => this.resync());
  }

  /** Whether the session is watched here and its tail has its starting point. */
  ready(sessionId: string): boolean {
    return this.tails.get(sessionId)?.ready ?? false;
  }

  /**
   * Starts watching the session: its tail begins at the highest seq stored when it is read. The
   * tail exists before that read is sent, so every batch stored from then on — this process's or
   * another replica's — queues a delivery behind the read: none falls between the read and the tail.
   */
  load(sessionId: string): Promise<void> {
    const existing = this.tails.get(sessionId);
    if (existing) return existing.loaded;
    const tail = { upTo: 0, ready: false } as Tail;
    tail.loaded = this.maxSeq(sessionId).then(
      (upTo) => {
        tail.upTo = upTo;
        tail.ready = true;
      },
      (e) => {
        if (this.tails.get(sessionId) === tail) this.tails.delete(sessionId);
        throw e;
      },
    );
    tail.chain = tail.loaded.catch(() => {});
    this.tails.set(sessionId, tail);
    return tail.loaded;
  }

  /** Nobody watches the session here any more (the hub's last subscriber left). */
  unwatch(sessionId: string) {
    this.tails.delete(sessionId);
  }

  private async maxSeq(sessionId: string): Promise<number> {
    const row = await first(this.db.select({ seq: max(events.seq) }).from(events).where(eq(events.session_id, sessionId)));
    return Number(row?.seq ?? 0);
  }

  /** Queued; numbered when its batch is written. */
  append(sessionId: string, frame: FrameInput): null {
    this.appended++;
    this.enqueue({ session_id: sessionId, frame, created_at: this.now() });
    return null;
  }

  /** Frames leave only once stored: nothing to reserve. */
  reserve(): void {}

  private enqueue(q: Queued) {
    this.queue.push(q);
    if (this.queue.length >= (this.opts.maxBatch ?? 512)) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.opts.flushDelayMs ?? 5);
  }

  /** Writes every queued frame (after any write under way); its tails hand them out. */
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
    let stored: Stored[];
    try {
      stored = await transact(this.db, (tx) => this.insert(tx, batch));
    } catch {
      // One session's failure (deleted meanwhile, a bad row) must not lose the others' frames.
      stored = [];
      for (const group of groupBySession(batch)) {
        try {
          stored.push(...(await transact(this.db, (tx) => this.insert(tx, group))));
        } catch (e) {
          // The driver's own error, not drizzle's wrapper (whose message repeats every parameter: the frames).
          const err = ((e as { cause?: unknown }).cause as Error) ?? (e as Error);
          for (const q of group) this.onDropped?.({ session_id: q.session_id, seq: -1, type: q.frame.type }, err);
        }
      }
    }
    for (const s of stored) this.local(s);
  }

  /**
   * One batch in one transaction: the sessions locked in id order, each one's frames numbered
   * after its MAX(seq), stored, and named in a NOTIFY delivered at commit. Frames of a session
   * that no longer exists are dropped (reported).
   */
  private *insert(tx: DB, batch: Queued[]): Unit<Stored[]> {
    const ids = [...new Set(batch.map((q) => q.session_id))].sort();
    const locked = yield* all(
      forNoKeyUpdate(tx.select({ id: sessions.id, reserved: sessions.seq_reserved }).from(sessions).where(inArray(sessions.id, ids)).orderBy(asc(sessions.id))),
    );
    const live = new Set(locked.map((r) => r.id));
    const maxes = yield* all(tx.select({ session_id: events.session_id, seq: max(events.seq) }).from(events).where(inArray(events.session_id, [...live])).groupBy(events.session_id));
    // Numbered above the mark too: seqs whose frames were removed (dropCutText) are not given again.
    const last = new Map<string, number>(locked.map((r) => [r.id, Number(r.reserved ?? 0)]));
    for (const r of maxes) last.set(r.session_id, Math.max(last.get(r.session_id) ?? 0, Number(r.seq ?? 0)));
    const out = new Map<string, Stored>();
    const rows: (typeof events.$inferInsert)[] = [];
    for (const q of batch) {
      if (!live.has(q.session_id)) {
        this.onDropped?.({ session_id: q.session_id, seq: -1, type: q.frame.type }, new Error("the session no longer exists"));
        continue;
      }
      let s = out.get(q.session_id);
      const prev = last.get(q.session_id) ?? 0;
      if (!s) out.set(q.session_id, (s = { session_id: q.session_id, from: prev + 1, to: prev, frames: [] }));
      const seq = prev + 1;
      last.set(q.session_id, seq);
      s.to = seq;
      const { json, type, task_id } = orderedFrame(q.session_id, seq, q.frame);
      rows.push({ session_id: q.session_id, seq, type, task_id, frame: json, created_at: q.created_at });
      s.frames.push({ session_id: q.session_id, seq, type, json });
    }
    if (rows.length) yield* run(tx.insert(events).values(rows));
    const stored = [...out.values()].filter((s) => s.to >= s.from);
    const entries: Entry[] = stored.map((s) => [s.session_id, s.from, s.to, 0, 0]);
    for (let i = 0; i < entries.length; i += ENTRIES_PER_NOTIFY) yield* this.bus.notifyIn(tx, CHANNELS.events, { b: entries.slice(i, i + ENTRIES_PER_NOTIFY) });
    return stored;
  }

  /** This process's own stored frames: handed out directly when they follow on, else read (a gap in front). */
  private local(s: Stored) {
    const tail = this.tails.get(s.session_id);
    if (!tail) return;
    this.turn(s.session_id, tail, async () => {
      if (s.from === tail.upTo + 1) {
        tail.upTo = s.to;
        this.hand(s.frames);
        return;
      }
      if (s.to <= tail.upTo) return;
      // Another replica's frames came in between, not handed out yet: read them (and ours) in order.
      await this.catchUp(s.session_id, tail, s.to);
    });
  }

  /** Another replica stored frames (its NOTIFY): read and handed out, for the sessions watched here. */
  private remote(message: Record<string, unknown>) {
    const entries = message.b as Entry[] | undefined;
    if (!Array.isArray(entries)) return;
    for (const [sessionId, , to] of entries) {
      const tail = this.tails.get(sessionId);
      if (!tail) continue;
      this.turn(sessionId, tail, async () => {
        if (to > tail.upTo) await this.catchUp(sessionId, tail, to);
      });
    }
  }

  /** The LISTEN connection came back: every watched session reads what it may have missed. */
  private resync() {
    for (const [sessionId, tail] of this.tails) this.turn(sessionId, tail, () => this.catchUp(sessionId, tail, Number.MAX_SAFE_INTEGER));
  }

  /** Runs after the session's earlier deliveries (a session's frames leave in seq order). */
  private turn(sessionId: string, tail: Tail, step: () => Promise<void> | void) {
    // A tail dropped meanwhile (nobody watches, or a newer tail replaced it) hands out nothing more.
    const current = () => this.tails.get(sessionId) === tail && tail.ready;
    tail.chain = tail.chain.then(() => (current() ? step() : undefined)).catch((e) => this.onDeliveryError?.(e as Error));
  }

  /** Stored frames above the tail up to `to`, in order. */
  private async catchUp(sessionId: string, tail: Tail, to: number) {
    const rows = await this.db
      .select({ seq: events.seq, type: events.type, frame: events.frame })
      .from(events)
      .where(and(eq(events.session_id, sessionId), gt(events.seq, tail.upTo), lte(events.seq, to)))
      .orderBy(asc(events.seq));
    // The tail was dropped meanwhile (nobody watches): nothing to hand out.
    if (this.tails.get(sessionId) !== tail) return;
    const frames: StoredLive[] = rows.map((r) => ({ session_id: sessionId, seq: r.seq, type: r.type, json: r.frame }));
    if (rows.length) tail.upTo = rows.at(-1)!.seq;
    this.hand(frames);
  }

  private hand(frames: StoredLive[]) {
    if (!frames.length) return;
    try {
      this.onStored?.(frames);
    } catch (e) {
      // A subscriber's failure is the subscriber's (the hub drops it); the frames are stored.
      this.onDeliveryError?.(e as Error);
    }
  }

  async read(sessionId: string, after = 0, limit = 1_000_000, withAdmin = true): Promise<StoredFrame[]> {
    const { rows } = await this.readPage(sessionId, after, { seq: Number.MAX_SAFE_INTEGER }, limit, withAdmin);
    return rows;
  }

  async readPage(sessionId: string, after: number, bound: ReadBound, limit: number, withAdmin = true): Promise<{ rows: StoredFrame[]; more: boolean }> {
    await this.flush();
    const rows = await this.db
      .select({ seq: events.seq, type: events.type, task_id: events.task_id, frame: events.frame })
      .from(events)
      .where(and(eq(events.session_id, sessionId), gt(events.seq, after), lte(events.seq, bound.seq), withAdmin ? undefined : notInArray(events.type, [...ADMIN_ONLY_TYPES])))
      .orderBy(asc(events.seq))
      .limit(limit);
    return { rows, more: rows.length === limit };
  }

  /** Where a replay stops: the highest seq stored now, after this process's queue is written. */
  async bound(sessionId: string): Promise<ReadBound> {
    await this.flush();
    return { seq: await this.maxSeq(sessionId) };
  }

  async endsInText(sessionId: string, taskId: string): Promise<boolean> {
    await this.flush();
    const row = await first(
      this.db.select({ type: events.type }).from(events).where(and(eq(events.session_id, sessionId), eq(events.task_id, taskId))).orderBy(desc(events.seq)),
    );
    return row?.type === "task:token";
  }

  async trailingText(sessionId: string, taskId: string): Promise<string> {
    await this.flush();
    return transact(this.db, (tx) => this.trailingTextIn(tx, sessionId, taskId));
  }

  private *trailingTextIn(tx: DB, sessionId: string, taskId: string): Unit<string> {
    const trailing = yield* this.trailingTokens(tx, sessionId, taskId);
    return joinTokenFrames(yield* all(tx.select({ frame: events.frame }).from(events).where(trailing).orderBy(asc(events.seq))));
  }

  /** The condition naming the task's `task:token` frames after its last other frame (what trailingText reads, dropCutText removes). */
  private *trailingTokens(tx: DB, sessionId: string, taskId: string): Unit<SQL | undefined> {
    const ofTask = and(eq(events.session_id, sessionId), eq(events.task_id, taskId));
    const [b] = yield* all(tx.select({ seq: max(events.seq) }).from(events).where(and(ofTask, ne(events.type, "task:token"))));
    return and(ofTask, eq(events.type, "task:token"), gt(events.seq, Number(b?.seq ?? 0)));
  }

  async has(sessionId: string, type: string): Promise<boolean> {
    await this.flush();
    const row = await first(this.db.select({ seq: events.seq }).from(events).where(and(eq(events.session_id, sessionId), eq(events.type, type))));
    return row !== undefined;
  }

  /** Clean shutdown: everything queued is stored (and handed out). */
  settle(): Promise<void> {
    return this.flush();
  }

  /**
   * (See EventStore.) Under the session's row lock, like a batch: the mark `sessions.seq_reserved`
   * is raised over the removed seqs in the same transaction, and batches number above it.
   */
  async dropCutText(sessionId: string, taskId: string): Promise<number> {
    await this.flush();
    return transact(this.db, (tx) => this.dropCutTextIn(tx, sessionId, taskId));
  }

  private *dropCutTextIn(tx: DB, sessionId: string, taskId: string): Unit<number> {
    const locked = yield* all(forNoKeyUpdate(tx.select({ id: sessions.id }).from(sessions).where(eq(sessions.id, sessionId))));
    if (!locked.length) return 0;
    const cut = yield* this.trailingTokens(tx, sessionId, taskId);
    const [top] = yield* all(tx.select({ seq: max(events.seq) }).from(events).where(cut));
    if (top?.seq == null) return 0;
    const last = Number(top.seq);
    yield* run(tx.update(sessions).set({ seq_reserved: last }).where(and(eq(sessions.id, sessionId), lt(sessions.seq_reserved, last))));
    return yield* run(tx.delete(events).where(cut));
  }

  /** A deleted session: its tail goes. */
  forget(sessionId: string) {
    this.tails.delete(sessionId);
  }
}

function groupBySession(batch: Queued[]): Queued[][] {
  const groups = new Map<string, Queued[]>();
  for (const q of batch) {
    let g = groups.get(q.session_id);
    if (!g) groups.set(q.session_id, (g = []));
    g.push(q);
  }
  return [...groups.values()];
}
