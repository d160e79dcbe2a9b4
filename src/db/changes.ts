/**
 * Knowing, without a query, whether a table may have changed — so that hot read paths (the caller
 * of every authenticated request, a list page) can be answered from memory and still never be
 * stale by one request.
 *
 * Two sources of change, both covered:
 * - this connection's own writes: SQLite's update hook (bun:sqlite's onInsert/onUpdate/onDelete)
 *   reports every row written through it, with its table, before the commit — a counter per table
 *   goes up (a write rolled back afterwards only costs a needless reload). Cascaded foreign-key
 *   deletes are reported too. SQLite does not report the truncate optimization (an unconditional
 *   DELETE on a table without foreign keys or triggers), which nothing here uses on a watched
 *   table, nor changes to WITHOUT ROWID tables, which the schema has none of.
 * - every other connection's commits (the CLI beside a running server, a second process):
 *   `PRAGMA data_version` changes when another connection committed since this one last asked;
 *   then every table counts as changed. It costs one WAL read-lock round trip (~2.5 µs in a tight
 *   loop, several times that under load: a third of a busy server's CPU per request when every
 *   request asked), so it is asked at most once per turn of the event loop (see `stamp`).
 *
 * The update hook is the connection's only one: nothing else may set onInsert/onUpdate/onDelete.
 *
 * On PostgreSQL (no bun:sqlite connection) every stamp is new, so memos never answer from memory
 * and every read goes to the database: correct with any number of servers, without the savings.
 */
import type { Database, Statement } from "bun:sqlite";

export class TableChanges {
  /** Per watched table: how often this connection wrote it. */
  private local = new Map<string, number>();
  /** Bumped whenever another connection's commit was seen. */
  private external = 0;
  private dataVersion: Statement | null = null;
  private lastDataVersion = 0;
  /** PostgreSQL: counts stamps, each one different (and negative: never a SQLite stamp). */
  private unwatched = 0;
  /** data_version was asked in this turn of the event loop (cleared by a setImmediate). */
  private askedThisTurn = false;
  private readonly turnEnded = () => {
    this.askedThisTurn = false;
  };

  constructor(sqlite: Database | null) {
    if (!sqlite) return;
    const bump = (_db: unknown, table: string) => this.local.set(table, (this.local.get(table) ?? 0) + 1);
    sqlite.onInsert = bump;
    sqlite.onUpdate = bump;
    sqlite.onDelete = bump;
    this.dataVersion = sqlite.prepare("PRAGMA data_version");
    this.lastDataVersion = this.readDataVersion();
  }

  /** Whether stamps can ever repeat (false on PostgreSQL: memos then only load). */
  get watching(): boolean {
    return this.dataVersion !== null;
  }

  private readDataVersion(): number {
    return (this.dataVersion!.values()[0]![0] as number) ?? 0;
  }

  /**
   * A stamp of `tables` now: equal to a later stamp only if none of them was written in between,
   * by this connection or any other. This connection's own writes are counted as they happen,
   * always. Other connections' commits are asked of SQLite (data_version) once per turn of the
   * event loop: every request a turn serves had arrived before the turn began (the poll that
   * returned it), hence before its first stamp, so a commit that finished before a request was
   * sent — another process's `UPDATE users SET disabled = 1`, then the request — is seen by that
   * request. A commit that lands during a turn is concurrent with the requests it serves and shows
   * from the next turn on. (Only this process's main connection writes in this process.)
   */
  stamp(tables: readonly string[]): number {
    if (!this.dataVersion) return -++this.unwatched;
    if (!this.askedThisTurn) {
      this.askedThisTurn = true;
      setImmediate(this.turnEnded);
      const dv = this.readDataVersion();
      if (dv !== this.lastDataVersion) {
        this.lastDataVersion = dv;
        this.external++;
      }
    }
    // Every counter only grows, so their sum changes exactly when one of them did (a number: no
    // string is built per request).
    let s = this.external;
    for (const t of tables) s += this.local.get(t) ?? 0;
    return s;
  }
}

/**
 * Values read from watched tables, kept until any of those tables changes (see TableChanges).
 * Bounded: the oldest entry goes first. Values are frozen — callers share them.
 */
export class TableMemo<V> {
  private entries = new Map<string, V>();
  private stampOf = Number.NaN; // equal to no stamp

  constructor(
    private changes: TableChanges,
    private tables: readonly string[],
    private max = 10_000,
  ) {}

  /**
   * The value for `key`: the stored one while the tables are unchanged, else `load()`'s (undefined
   * is not stored). A stored value is answered without a promise; only an asynchronous `load`
   * (a miss) makes one. Another connection's commit shows from the next turn of the event loop
   * (TableChanges.stamp).
   */
  get(key: string, load: () => V | undefined): V | undefined;
  get(key: string, load: () => Promise<V | undefined>): V | undefined | Promise<V | undefined>;
  get(key: string, load: () => V | undefined | Promise<V | undefined>): V | undefined | Promise<V | undefined> {
    // PostgreSQL: every stamp is new, so nothing kept could ever be answered — do not keep it.
    if (!this.changes.watching) return load();
    const stamp = this.changes.stamp(this.tables);
    if (stamp !== this.stampOf) {
      this.entries.clear();
      this.stampOf = stamp;
    } else {
      const hit = this.entries.get(key);
      if (hit !== undefined) return hit;
    }
    const v = load();
    return v instanceof Promise ? v.then((loaded) => this.keep(key, loaded, stamp)) : this.keep(key, v, stamp);
  }

  /**
   * Stores a value loaded at `stamp` — unless a later stamp was seen while it loaded (it may
   * predate that write; a write seen only afterwards clears it at the next stamp anyway).
   */
  private keep(key: string, v: V | undefined, stamp: number): V | undefined {
    if (v === undefined || stamp !== this.stampOf) return v;
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, Object.freeze(v));
    return v;
  }
}
