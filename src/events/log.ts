/**
 * The per-session event log. Every frame the stream sends for a session gets the next gap-free
 * `seq` of that session and is stored as the exact JSON sent to clients. Appends are batched:
 * frames are queued in memory and written in one transaction per batch (at most `maxBatch`
 * frames, or after `flushDelayMs`), which is what makes thousands of token events a second cheap.
 * `flush()` writes the queue synchronously; readers call it first, so a read never misses a frame
 * that was already published.
 */
import type { Database, Statement } from "bun:sqlite";
import type { FrameInput } from "../schema/stream.ts";

export interface StoredFrame {
  /** null for an admin-only debug frame (it has `after_seq` instead). */
  seq: number | null;
  type: string;
  task_id: string | null;
  frame: string;
}

interface DebugRow {
  after_seq: number;
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

export class EventLog {
  private lastSeq = new Map<string, number>();
  private queue: Pending[] = [];
  private timer: Timer | null = null;
  private insert: Statement;
  private maxSeqStmt: Statement<{ seq: number | null }, [string]>;
  private readStmt: Statement<StoredFrame, [string, number, number]>;
  private insertDebug: Statement;
  private readDebugStmt: Statement<DebugRow, [string, number, number]>;
  private writeBatch: (rows: Pending[]) => void;

  constructor(
    private sqlite: Database,
    private now: () => number,
    private opts: { maxBatch?: number; flushDelayMs?: number } = {},
  ) {
    this.insert = sqlite.prepare("INSERT INTO events (session_id, seq, type, task_id, frame, created_at) VALUES (?, ?, ?, ?, ?, ?)");
    this.maxSeqStmt = sqlite.prepare("SELECT MAX(seq) AS seq FROM events WHERE session_id = ?");
    this.readStmt = sqlite.prepare("SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?");
    this.insertDebug = sqlite.prepare("INSERT INTO debug_events (session_id, after_seq, type, task_id, frame, created_at) VALUES (?, ?, ?, ?, ?, ?)");
    this.readDebugStmt = sqlite.prepare(
      "SELECT after_seq, type, task_id, frame FROM debug_events WHERE session_id = ? AND after_seq >= ? AND after_seq < ? ORDER BY id",
    );
    this.writeBatch = sqlite.transaction((rows: Pending[]) => {
      for (const r of rows) this.insert.run(r.session_id, r.seq, r.type, r.task_id, r.frame, r.created_at);
    });
  }

  private nextSeq(sessionId: string): number {
    let last = this.lastSeq.get(sessionId);
    if (last === undefined) last = this.maxSeqStmt.get(sessionId)?.seq ?? 0;
    this.lastSeq.set(sessionId, last + 1);
    return last + 1;
  }

  /**
   * Assigns the next seq and queues the frame for writing. `frame` must have `type`; `seq` is
   * inserted right after `type`/`session_id`/`task_id` in the JSON.
   */
  append(sessionId: string, frame: FrameInput): AppendResult {
    const seq = this.nextSeq(sessionId);
    const { type, task_id, ...rest } = frame as { type: string; task_id?: string };
    const ordered = task_id === undefined ? { type, session_id: sessionId, seq, ...rest } : { type, session_id: sessionId, task_id, seq, ...rest };
    const json = JSON.stringify(ordered);
    this.queue.push({ session_id: sessionId, seq, type, task_id: task_id ?? null, frame: json, created_at: this.now() });
    if (this.queue.length >= (this.opts.maxBatch ?? 512)) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.opts.flushDelayMs ?? 5);
    return { seq, json };
  }

  /**
   * Stores an admin-only debug frame. It takes no seq (the shared sequence stays gap-free for
   * users who may not see it): it carries `after_seq`, the seq of the frame it follows.
   */
  appendDebug(sessionId: string, frame: FrameInput): { json: string; afterSeq: number } {
    const afterSeq = this.last(sessionId);
    const { type, task_id, ...rest } = frame as { type: string; task_id?: string };
    const json = JSON.stringify({ type, session_id: sessionId, task_id: task_id ?? null, after_seq: afterSeq, ...rest });
    this.insertDebug.run(sessionId, afterSeq, type, task_id ?? null, json, this.now());
    return { json, afterSeq };
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

  /**
   * Frames with seq > `after`, in order (at most `limit` of them), flushing first. With
   * `withDebug`, the admin-only debug frames emitted after `after` are merged in at their place.
   */
  read(sessionId: string, after = 0, limit = 1_000_000, withDebug = false): StoredFrame[] {
    this.flush();
    const rows = this.readStmt.all(sessionId, after, limit);
    if (!withDebug) return rows;
    const upTo = rows.length === limit ? rows[rows.length - 1]!.seq! : Number.MAX_SAFE_INTEGER;
    const debug = this.readDebugStmt.all(sessionId, after, upTo);
    if (debug.length === 0) return rows;
    const merged: StoredFrame[] = [];
    let j = 0;
    for (const row of rows) {
      while (j < debug.length && debug[j]!.after_seq < row.seq!) merged.push({ ...debug[j++]!, seq: null });
      merged.push(row);
    }
    while (j < debug.length) merged.push({ ...debug[j++]!, seq: null });
    return merged;
  }

  /** Highest seq assigned so far for the session (flushed or not). */
  last(sessionId: string): number {
    return this.lastSeq.get(sessionId) ?? this.maxSeqStmt.get(sessionId)?.seq ?? 0;
  }

  /** Forgets a deleted session's counter. */
  forget(sessionId: string) {
    this.flush();
    this.lastSeq.delete(sessionId);
  }
}
