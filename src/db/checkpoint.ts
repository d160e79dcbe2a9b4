/**
 * WAL checkpoints off the server's thread. SQLite's automatic checkpoint runs inside whichever
 * commit crosses 1,000 pages of WAL, copying pages into the database file and (synchronous=NORMAL)
 * fsyncing it — on a busy server that stalls the event loop for tens to hundreds of milliseconds,
 * which showed as the long tail of the stream's relay latency. `serve` turns the automatic
 * checkpoint off and lets a worker thread, with its own connection, run a PASSIVE checkpoint once
 * the WAL has grown (checked every second); PASSIVE never blocks the server's writes or reads. If
 * the worker cannot start, the automatic checkpoint stays on.
 */
import type { Database } from "bun:sqlite";
import { statSync } from "node:fs";
import type { Logger } from "../log.ts";

/** Checkpoint once the WAL file is larger than this (SQLite's own default is 1,000 pages ≈ 4 MiB). */
export const CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024;
const CHECK_EVERY_MS = 1000;
const AUTO_PAGES = 1000;

const WORKER = `
import { Database } from "bun:sqlite";
let db;
self.onmessage = (e) => {
  try {
    if (e.data.open) {
      db = new Database(e.data.open);
      db.exec("PRAGMA busy_timeout = 5000");
      postMessage({ ok: true });
      return;
    }
    const r = db.query("PRAGMA wal_checkpoint(PASSIVE)").get();
    postMessage({ ok: true, busy: r.busy, log: r.log, checkpointed: r.checkpointed });
  } catch (err) {
    postMessage({ ok: false, message: String((err && err.message) || err) });
  }
};
`;

export class WalCheckpointer {
  private worker: Worker | null = null;
  private timer: Timer | null = null;
  private running = false;

  constructor(
    private sqlite: Database,
    private path: string,
    private log: Logger,
  ) {}

  private call(msg: unknown): Promise<{ ok: boolean; message?: string }> {
    return new Promise((resolve) => {
      this.worker!.onmessage = (e: MessageEvent<{ ok: boolean; message?: string }>) => resolve(e.data);
      this.worker!.onerror = (e) => resolve({ ok: false, message: e.message });
      this.worker!.postMessage(msg);
    });
  }

  async start(): Promise<void> {
    try {
      this.worker = new Worker(URL.createObjectURL(new Blob([WORKER], { type: "application/javascript" })));
      const r = await this.call({ open: this.path });
      if (!r.ok) throw new Error(r.message);
    } catch (e) {
      this.worker?.terminate();
      this.worker = null;
      this.log.warn("WAL checkpoints stay in the server's thread (the checkpoint worker did not start)", { error: e instanceof Error ? e.message : String(e) });
      return;
    }
    this.sqlite.exec("PRAGMA wal_autocheckpoint = 0");
    this.timer = setInterval(() => void this.tick(), CHECK_EVERY_MS);
    this.timer.unref?.();
  }

  private async tick() {
    if (this.running || !this.worker) return;
    let size = 0;
    try {
      size = statSync(`${this.path}-wal`).size;
    } catch {
      return;
    }
    if (size < CHECKPOINT_WAL_BYTES) return;
    this.running = true;
    try {
      const r = await this.call({ checkpoint: true });
      if (!r.ok) this.log.warn("WAL checkpoint failed", { error: r.message });
    } finally {
      this.running = false;
    }
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.worker?.terminate();
    this.worker = null;
    // The connection may live on (tests, CLI): back to SQLite's own checkpoints.
    try {
      this.sqlite.exec(`PRAGMA wal_autocheckpoint = ${AUTO_PAGES}`);
    } catch {
      // closed already
    }
  }
}
