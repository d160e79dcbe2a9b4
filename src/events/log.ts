/**
 * The per-session event log. Every frame the stream sends for a session gets the next gap-free
 * `seq` of that session and is stored as the exact JSON sent to clients. Appends are batched:
 * frames are queued in memory and written in one transaction per batch (at most `maxBatch`
 * frames, or after `flushDelayMs`), which is what makes thousands of token events a second cheap.
 * `flush()` writes the queue synchronously; readers call it first, so a read never misses a frame
 * that was already published.
 */
import type { Database, Statement } from "bun:sqlite";

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

export class EventLog {
  private lastSeq = new Map<string, number>();
  private queue: Pending[] = [];
  private timer: Timer | null = null;
  private insert: Statement;
  private bumpSeq: Statement;
  private maxSeqStmt: Statement<{ seq: number | null }, [string]>;
  private readStmt: Statement<StoredFrame, [string, number, number]>;
  private writeBatch: (rows: Pending[]) => void;

  constructor(
    private sqlite: Database,
    private now: () => number,
    private opts: { maxBatch?: number; flushDelayMs?: number } = {},
  ) {
    this.insert = sqlite.prepare("INSERT INTO events (session_id, seq, type, task_id, frame, created_at) VALUES (?, ?, ?, ?, ?, ?)");
    this.bumpSeq = sqlite.prepare("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ? AND last_seq < ?");
    this.maxSeqStmt = sqlite.prepare("SELECT MAX(seq) AS seq FROM events WHERE session_id = ?");
    this.readStmt = sqlite.prepare("SELECT seq, type, task_id, frame FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?");
    this.writeBatch = sqlite.transaction((rows: Pending[]) => {
      const top = new Map<string, number>();
      for (const r of rows) {
        this.insert.run(r.session_id, r.seq, r.type, r.task_id, r.frame, r.created_at);
        top.set(r.session_id, r.seq);
      }
      const at = this.now();
      for (const [id, seq] of top) this.bumpSeq.run(seq, at, id, seq);
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
  append(sessionId: string, frame: { type: string; task_id?: string | null } & Record<string, unknown>): AppendResult {
    const seq = this.nextSeq(sessionId);
    const { type, task_id, ...rest } = frame;
    const ordered = task_id === undefined ? { type, session_id: sessionId, seq, ...rest } : { type, session_id: sessionId, task_id, seq, ...rest };
    const json = JSON.stringify(ordered);
    this.queue.push({ session_id: sessionId, seq, type, task_id: task_id ?? null, frame: json, created_at: this.now() });
    if (this.queue.length >= (this.opts.maxBatch ?? 512)) this.flush();
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

  /** Frames with seq > `after`, in order (at most `limit`). Flushes first. */
  read(sessionId: string, after = 0, limit = 1_000_000): StoredFrame[] {
    this.flush();
    return this.readStmt.all(sessionId, after, limit);
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
