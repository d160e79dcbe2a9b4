/**
 * The per-session event log. Every frame the stream sends for a session gets the next `seq` of
 * that session and is stored as the exact JSON sent to clients. Appends are batched: frames are
 * queued in memory and written in one transaction per batch (at most `maxBatch` frames or
 * MAX_BATCH_CHARS of JSON, or after `flushDelayMs`), which is what makes thousands of token events a second cheap. `flush()` writes
 * the queue synchronously; readers call it first, so a read never misses a frame that was already
 * published.
 *
 * A seq is never given to two frames, not even across a crash. A frame can reach a socket before
 * its batch is written, so a `kill -9` may lose frames a client has seen. Before a seq leaves the
 * log unstored (`reserve`, which the hub calls before handing a frame to subscribers), a
 * high-water mark at or above it is stored synchronously in `sessions.seq_reserved`, a block at a
 * time (64 seqs, doubling up to 1024 while blocks run out within a second); after a restart a
 * session's numbering continues above max(MAX(seq), seq_reserved). A crash can leave a gap, never
 * a reuse. Frames nobody was handed before they were stored reserve nothing, and a clean shutdown
 * (`settle`) gives unused reservations back, so the sequence stays gap-free short of a crash —
 * and of `dropCutText`, which removes the streamed text of an answer a restart cut off and raises
 * the mark over it (a gap there too, never a reuse).
 *
 * Admin-only frames (ADMIN_ONLY_TYPES: `task:system_prompt`) are numbered and stored like the
 * others; reads for a user without the admin role leave them out (`withAdmin` false), so that
 * user sees a gap in `seq` where one is. (Before, they were kept outside the sequence in the table
 * debug_events, which is no longer written or read.)
 */
import type { Database, Statement } from "bun:sqlite";
import type { FrameInput } from "../schema/stream.ts";

/** Frames only users with the admin role are sent or read (they are numbered like any other). */
export const ADMIN_ONLY_TYPES = new Set(["task:system_prompt"]);
/** SQL literal list of ADMIN_ONLY_TYPES, for `type NOT IN (…)`. */
export const ADMIN_ONLY_SQL = [...ADMIN_ONLY_TYPES].map((t) => `'${t}'`).join(", ");

export interface StoredFrame {
  seq: number;
  type: string;
  task_id: string | null;
  frame: string;
}

interface Pending {
  session_id: string;
  seq: number;
  type: string;
  task_id: string | null;
  frame: string;
  created_at: number;
}

export interface AppendResult {
  seq: number;
  /** The serialized frame, including `seq`, ready to send. */
  json: string;
}

/** First block of seqs reserved ahead, and the largest (blocks double while used up within a second). */
export const SEQ_BLOCK_MIN = 64;
/**
 * A batch is written once its frames' JSON reaches this many characters, whatever their count: a
 * hundred answers of 256 KiB ending together (each `turn.done` carrying its whole text) made one
 * 25 MiB transaction that held the event loop for tens of milliseconds.
 */
export const MAX_BATCH_CHARS = 1024 * 1024;
export const SEQ_BLOCK_MAX = 1024;

interface SeqState {
  /** Highest seq assigned. */
  last: number;
  /** Highest seq covered by the stored mark (sessions.seq_reserved). */
  reserved: number;
  /** Size of the next block, and when the last one was reserved (performance.now()). */
  block: number;
  reservedAt: number;
}

/** Where a paged read stops: the highest seq. */
export interface ReadBound {
  seq: number;
}

/** A frame once stored, as the hub hands it out. */
export interface StoredLive {
  session_id: string;
  seq: number;
  type: string;
  json: string;
}

/**
 * What the hub and the services need of a session's event log; ./log.ts (SQLite) and
 * ./pg-log.ts (PostgreSQL) implement it. Reads, flushes and `bound` may answer with a promise
 * (always on PostgreSQL). On SQLite `append` numbers the frame at once and answers it; on
 * PostgreSQL the seq is allocated when the batch is written (answered null) and the stored frames
 * come back through `onStored`.
 */
export interface EventStore {
  /** Frames appended since start (read by /metrics). */
  readonly appended: number;
  /** true: frames may leave only once stored — the log hands them to `onStored` (PostgreSQL). */
  readonly deliversWhenStored: boolean;
  onDropped?: (frame: { session_id: string; seq: number; type: string }, err: Error) => void;
  /** Where a log that `deliversWhenStored` hands stored frames, each session's in seq order (set by the hub). */
  onStored?: (frames: StoredLive[]) => void;
  /** Whether the session may be subscribed to at once (SQLite: always; PostgreSQL: once watched here, after `load`). */
  ready(sessionId: string): boolean;
  load(sessionId: string): Promise<void>;
  /** The hub's last subscriber of the session here left. */
  unwatch(sessionId: string): void;
  append(sessionId: string, frame: FrameInput): AppendResult | null;
  reserve(sessionId: string, seq: number): void;
  flush(): void | Promise<void>;
  /** `withAdmin` false: admin-only frames left out (a user without the admin role). */
  read(sessionId: string, after?: number, limit?: number, withAdmin?: boolean): StoredFrame[] | Promise<StoredFrame[]>;
  readPage(sessionId: string, after: number, bound: ReadBound, limit: number, withAdmin?: boolean): { rows: StoredFrame[]; more: boolean } | Promise<{ rows: StoredFrame[]; more: boolean }>;
  bound(sessionId: string): ReadBound | Promise<ReadBound>;
  settle(): void | Promise<void>;
  forget(sessionId: string): void;
  /**
   * Removes the task's `task:token` frames stored after its last other frame — the streamed text of
   * a model answer that was cut off (a restart) and never stored, before that step is requested
   * again — and answers how many. Their seqs stay used: the session's numbering goes on above them.
   */
  dropCutText(sessionId: string, taskId: string): number | Promise<number>;
  /**
   * Whether the task's last stored frame is `task:token`: streamed text after which nothing else was
   * stored — the only case where `dropCutText` may have something to remove (an index read).
   */
  endsInText(sessionId: string, taskId: string): boolean | Promise<boolean>;
  /**
   * The text of the task's `task:token` frames stored after its last other frame — what a client
   * shows of an answer that was still streaming — joined ("" when the task's log does not end in
   * text). What `dropCutText` would remove.
   */
  trailingText(sessionId: string, taskId: string): string | Promise<string>;
  /** Whether the session's log holds a frame of this type (frames still queued included). */
  has(sessionId: string, type: string): boolean | Promise<boolean>;
}

/** The text of stored `task:token` frames, in the order given. */
export function joinTokenFrames(rows: readonly { frame: string }[]): string {
  let text = "";
  for (const r of rows) text += (JSON.parse(r.frame) as { text?: string }).text ?? "";
  return text;
}

/** The frame as stored and sent: `type`, `session_id`, `task_id` (if any) and `seq` first. */
export function orderedFrame(sessionId: string, seq: number, frame: FrameInput): { json: string; type: string; task_id: string | null } {
  const { type, task_id, ...rest } = frame as { type: string; task_id?: string };
  const ordered = task_id === undefined ? { type, session_id: sessionId, seq, ...rest } : { type, session_id: sessionId, task_id, seq, ...rest };
  return { json: JSON.stringify(ordered), type, task_id: task_id ?? null };
}

export class EventLog implements EventStore {
  readonly deliversWhenStored = false;
  /** Frames appended since start (read by /metrics). */
  appended = 0;
  private seqs = new Map<string, SeqState>();
  private queue: Pending[] = [];
  /** Characters of JSON in the queue (a batch is written once it holds MAX_BATCH_CHARS). */
  private queuedChars = 0;
  private timer: Timer | null = null;
  private insert: Statement;
  private maxSeqStmt: Statement<{ seq: number | null }, [string]>;
  private reservedStmt: Statement<{ seq_reserved: number }, [string]>;
  private reserveStmt: Statement<unknown, [number, string, number]>;
  private releaseStmt: Statement<unknown, [number, string, number]>;
  private readStmt: Statement<StoredFrame, [string, number, number]>;
  private readRangeStmt: Statement<StoredFrame, [string, number, number, number]>;
  /** The same two reads without the admin-only frames. */
  private readUserStmt: Statement<StoredFrame, [string, number, number]>;
  private readRangeUserStmt: Statement<StoredFrame, [string, number, number, number]>;
  private writeBatch: (rows: Pending[]) => void;
  private dropCutTextTx: (sessionId: string, taskId: string) => number;
  private hasStmt: Statement<{ one: number }, [string, string]>;
  private lastTypeStmt: Statement<{ type: string }, [string, string]>;
  private trailingStmt: Statement<{ frame: string }, [string, string, number]>;
  /** The task's last frame other than `task:token` (0: none): its trailing text comes after it. */
  private boundaryStmt: Statement<{ seq: number }, [string, string]>;

  constructor(
    sqlite: Database,
    private now: () => number,
    private opts: { maxBatch?: number; maxBatchChars?: number; flushDelayMs?: number } = {},
  ) {
    this.insert = sqlite.prepare("INSERT INTO events (session_id, seq, type, task_id, frame, created_at) VALUES (?, ?, ?, ?, ?, ?)");
    this.maxSeqStmt = sqlite.prepare("SELECT MAX(seq) AS seq FROM events WHERE session_id = ?");
    this.reservedStmt = sqlite.prepare("SELECT seq_reserved FROM sessions WHERE id = ?");
    this.reserveStmt = sqlite.prepare("UPDATE sessions SET seq_reserved = ? WHERE id = ? AND seq_reserved < ?");
    this.releaseStmt = sqlite.prepare("UPDATE sessions SET seq_reserved = ? WHERE id = ? AND seq_reserved = ?");
    this.readStmt = sqlite.prepare("SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?");
    this.readRangeStmt = sqlite.prepare("SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?");
    this.readUserStmt = sqlite.prepare(`SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? AND type NOT IN (${ADMIN_ONLY_SQL}) ORDER BY seq LIMIT ?`);
    this.readRangeUserStmt = sqlite.prepare(
      `SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? AND seq <= ? AND type NOT IN (${ADMIN_ONLY_SQL}) ORDER BY seq LIMIT ?`,
    );
    this.hasStmt = sqlite.prepare("SELECT 1 AS one FROM events WHERE session_id = ? AND type = ? LIMIT 1");
    this.lastTypeStmt = sqlite.prepare("SELECT type FROM events WHERE session_id = ? AND task_id = ? ORDER BY seq DESC LIMIT 1");
    this.trailingStmt = sqlite.prepare("SELECT frame FROM events WHERE session_id = ? AND task_id = ? AND type = 'task:token' AND seq > ? ORDER BY seq");
    const boundary = (this.boundaryStmt = sqlite.prepare("SELECT coalesce(max(seq), 0) AS seq FROM events WHERE session_id = ? AND task_id = ? AND type <> 'task:token'"));
    const top = sqlite.prepare<{ seq: number | null }, [string, string, number]>(
      "SELECT max(seq) AS seq FROM events WHERE session_id = ? AND task_id = ? AND type = 'task:token' AND seq > ?",
    );
    const drop = sqlite.prepare<unknown, [string, string, number]>("DELETE FROM events WHERE session_id = ? AND task_id = ? AND type = 'task:token' AND seq > ?");
    // The mark covers the removed seqs, so a later start (its counter read from MAX(seq) and the
    // mark) numbers above them even when they were the session's last frames.
    this.dropCutTextTx = sqlite.transaction((sessionId: string, taskId: string): number => {
      const after = boundary.get(sessionId, taskId)!.seq;
      const last = top.get(sessionId, taskId, after)?.seq;
      if (last == null) return 0;
      this.reserveStmt.run(last, sessionId, last);
      return drop.run(sessionId, taskId, after).changes;
    });
    this.writeBatch = sqlite.transaction((rows: Pending[]) => {
      for (const r of rows) this.insert.run(r.session_id, r.seq, r.type, r.task_id, r.frame, r.created_at);
    });
  }

  /** SQLite reads a session's counter synchronously at its first use: always ready. */
  ready(): boolean {
    return true;
  }

  load(): Promise<void> {
    return Promise.resolve();
  }

  /** The session's counter; at first use (after a start) it continues above everything stored or reserved. */
  private state(sessionId: string): SeqState {
    let s = this.seqs.get(sessionId);
    if (!s) {
      const stored = this.maxSeqStmt.get(sessionId)?.seq ?? 0;
      const reserved = this.reservedStmt.get(sessionId)?.seq_reserved ?? 0;
      const last = Math.max(stored, reserved);
      s = { last, reserved: last, block: SEQ_BLOCK_MIN, reservedAt: -Infinity };
      this.seqs.set(sessionId, s);
    }
    return s;
  }

  /**
   * Call before `seq` leaves the log while it may not be stored yet (a frame handed to a
   * subscriber): makes sure the stored high-water mark covers it, writing a new mark synchronously
   * when it does not. One write per block; the block doubles (up to SEQ_BLOCK_MAX) while each one
   * is used up within a second, and starts over at SEQ_BLOCK_MIN otherwise.
   */
  reserve(sessionId: string, seq: number) {
    const s = this.state(sessionId);
    if (seq <= s.reserved) return;
    const now = performance.now();
    s.block = now - s.reservedAt < 1000 ? Math.min(s.block * 2, SEQ_BLOCK_MAX) : SEQ_BLOCK_MIN;
    s.reservedAt = now;
    const mark = Math.max(seq, s.last) + s.block - 1;
    this.reserveStmt.run(mark, sessionId, mark);
    s.reserved = mark;
  }

  /**
   * Assigns the next seq and queues the frame for writing. `frame` must have `type`; `seq` is
   * inserted right after `type`/`session_id`/`task_id` in the JSON.
   */
  append(sessionId: string, frame: FrameInput): AppendResult {
    const state = this.state(sessionId);
    const seq = ++state.last;
    this.appended++;
    const { json, type, task_id } = orderedFrame(sessionId, seq, frame);
    this.queue.push({ session_id: sessionId, seq, type, task_id, frame: json, created_at: this.now() });
    this.queuedChars += json.length;
    if (this.queue.length >= (this.opts.maxBatch ?? 512) || this.queuedChars >= (this.opts.maxBatchChars ?? MAX_BATCH_CHARS)) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.opts.flushDelayMs ?? 5);
    return { seq, json };
  }

  /** Writes every queued frame now, in one transaction. */
  flush() {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.queue.length === 0) return;
    const rows = this.queue;
    this.queue = [];
    this.queuedChars = 0;
    try {
      this.writeBatch(rows);
    } catch {
      // One bad row (e.g. its session was deleted meanwhile) must not lose the others.
      for (const r of rows) {
        try {
          this.writeBatch([r]);
        } catch (e) {
          this.onDropped?.(r, e as Error);
        }
      }
    }
  }

  /** Called for a frame that could not be stored (its session is gone). */
  onDropped?: (frame: { session_id: string; seq: number; type: string }, err: Error) => void;

  /** Frames with seq > `after`, in order (at most `limit` of them), flushing first; admin-only ones only `withAdmin`. */
  read(sessionId: string, after = 0, limit = 1_000_000, withAdmin = true): StoredFrame[] {
    this.flush();
    return (withAdmin ? this.readStmt : this.readUserStmt).all(sessionId, after, limit);
  }

  /**
   * One page of a replay: frames with `after` < seq <= `bound.seq`, in order, at most `limit` of
   * them, flushing first (admin-only ones only `withAdmin`). `more` says whether a next page may
   * follow (`after` = the last seq of this one).
   */
  readPage(sessionId: string, after: number, bound: ReadBound, limit: number, withAdmin = true): { rows: StoredFrame[]; more: boolean } {
    this.flush();
    const rows = (withAdmin ? this.readRangeStmt : this.readRangeUserStmt).all(sessionId, after, bound.seq, limit);
    return { rows, more: rows.length === limit };
  }

  /** What a replay taken now must cover: every seq assigned so far. */
  bound(sessionId: string): ReadBound {
    return { seq: this.last(sessionId) };
  }

  /** Highest seq assigned so far for the session (flushed or not). */
  last(sessionId: string): number {
    return this.state(sessionId).last;
  }

  /**
   * Clean shutdown: writes the queue, then gives back the seqs reserved but not used (every seq
   * handed out is stored now), so the next start continues without a gap.
   */
  settle() {
    this.flush();
    for (const [sessionId, s] of this.seqs) {
      if (s.reserved <= s.last) continue;
      this.releaseStmt.run(s.last, sessionId, s.reserved);
      s.reserved = s.last;
    }
  }

  dropCutText(sessionId: string, taskId: string): number {
    this.flush();
    return this.dropCutTextTx(sessionId, taskId);
  }

  endsInText(sessionId: string, taskId: string): boolean {
    this.flush();
    return this.lastTypeStmt.get(sessionId, taskId)?.type === "task:token";
  }

  trailingText(sessionId: string, taskId: string): string {
    this.flush();
    return joinTokenFrames(this.trailingStmt.all(sessionId, taskId, this.boundaryStmt.get(sessionId, taskId)!.seq));
  }

  has(sessionId: string, type: string): boolean {
    this.flush();
    return this.hasStmt.get(sessionId, type) !== null;
  }

  /** Nothing kept per watched session here (frames leave at once). */
  unwatch(): void {}

  /** Forgets a deleted session's counter. */
  forget(sessionId: string) {
    this.flush();
    this.seqs.delete(sessionId);
  }
}
