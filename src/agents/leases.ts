/**
 * Task leases: with several replicas on one PostgreSQL database (issue 17), a task runs on exactly
 * one of them at a time. The replica that runs a task holds its lease (`tasks.lease_owner`, its
 * replica id; `lease_expires_at`), taken in one conditional UPDATE and renewed every third of the
 * lease while its loop runs. A replica that dies stops renewing; once the lease has run out,
 * another one takes the task over and continues it from its last stored step, as a restarted
 * server does (orchestrator.ts `recover`).
 *
 * A lease is free when it has no owner, is this replica's own, or has expired. A replica keeps its
 * id across restarts on the same data dir (src/replicas/registry.ts), so a server restarted after a
 * crash takes its own tasks back at once rather than after the lease. Releasing it (the
 * task ended, waits for an answer, or the server stops cleanly) lets another replica continue the
 * task at once instead of after the lease.
 *
 * On SQLite (`shared` false) there is one server, guaranteed by the data dir's lock: leases are
 * written but never contended — every take wins, nothing is renewed, and no other replica exists
 * to hold one.
 */
import { and, eq, gte, inArray, isNotNull, isNull, lt, not, notInArray, or, type SQL } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import type { TaskRow } from "../db/schema.ts";
import { tasks } from "../db/tables.ts";

/** What taking a lease writes, and when it may (for `Tasks.claim`'s statement). */
export interface LeaseTerms {
  set: { lease_owner: string; lease_expires_at: number };
  /** Undefined on one server: the lease is always free. */
  where: SQL | undefined;
}

export class TaskLeases {
  constructor(
    private db: DB,
    private now: () => number,
    /** This replica's id (src/replicas/registry.ts). */
    readonly owner: string,
    readonly leaseMs: number,
    /** Whether other replicas may exist (PostgreSQL). */
    readonly shared: boolean,
  ) {}

  /** How often a held lease is renewed: a third of it, so that two renewals may fail before it runs out. */
  get renewMs(): number {
    return Math.max(250, Math.floor(this.leaseMs / 3));
  }

  /** The lease as this replica takes it now, and the condition for taking it. */
  terms(now = this.now()): LeaseTerms {
    return { set: { lease_owner: this.owner, lease_expires_at: now + this.leaseMs }, where: this.free(now) };
  }

  /** The rows whose lease this replica may take at `now`: no owner, its own, or expired. */
  private free(now: number): SQL | undefined {
    if (!this.shared) return undefined;
    return or(isNull(tasks.lease_owner), eq(tasks.lease_owner, this.owner), isNull(tasks.lease_expires_at), lt(tasks.lease_expires_at, now));
  }

  /**
   * Takes the lease of a task to run or resume, if it is still queued or running and its lease is
   * free. The task as leased, or undefined: it ended, or another replica holds it.
   */
  async acquire(taskId: string): Promise<TaskRow | undefined> {
    const { set, where } = this.terms();
    const [row] = await this.db
      .update(tasks)
      .set(set)
      .where(and(eq(tasks.id, taskId), inArray(tasks.status, ["queued", "running"]), where))
      .returning();
    return row;
  }

  /**
   * Extends this replica's lease. False when it no longer holds it: another replica took the task
   * over (this one stalled past the lease), or the task ended or was deleted elsewhere. A task that
   * has just gone to `waiting_input` still counts (its loop is returning), and so does a new
   * session's first task, still `queued` while its submitter creates the workspace (`opening`).
   */
  async renew(taskId: string): Promise<boolean> {
    const [row] = await this.db
      .update(tasks)
      .set({ lease_expires_at: this.now() + this.leaseMs })
      .where(and(eq(tasks.id, taskId), eq(tasks.lease_owner, this.owner), inArray(tasks.status, ["queued", "running", "waiting_input"])))
      .returning({ id: tasks.id });
    return !!row;
  }

  /**
   * Renews the task's lease every `renewMs` until the returned function is called; `onLost` runs
   * once if a renewal finds the lease gone (then renewals stop). A renewal that fails (the database
   * unreachable, or too slow) is reported and retried at the next tick: the lease may still be
   * held — but once no renewal has succeeded for the lease minus one renewal period, this replica
   * gives the task up itself (`onLost`), before another one could take it over: a replica that
   * cannot renew stops writing before its lease runs out. Nothing to renew on one server.
   */
  hold(taskId: string, onLost: () => void, onError: (err: unknown) => void): () => void {
    if (!this.shared) return () => {};
    let busy = false;
    /** When the last successful renewal was sent (the lease holds until then + leaseMs). */
    let heldSince = this.now();
    const lost = () => {
      clearInterval(timer);
      onLost();
    };
    const timer = setInterval(() => {
      if (this.now() - heldSince >= this.leaseMs - this.renewMs) return lost();
      if (busy) return;
      busy = true;
      const sent = this.now();
      this.renew(taskId)
        .then((held) => {
          if (held) heldSince = sent;
          else lost();
        }, onError)
        .finally(() => (busy = false));
    }, this.renewMs);
    timer.unref?.();
    return () => clearInterval(timer);
  }

  /** Gives this replica's lease of the task up (it waits for an answer, or the server stops): another replica may take it at once. */
  async release(taskId: string): Promise<void> {
    await this.db.update(tasks).set({ lease_owner: null, lease_expires_at: null }).where(and(eq(tasks.id, taskId), eq(tasks.lease_owner, this.owner)));
  }

  /**
   * The lease a new session's first task is stored with (PostgreSQL): it stays `queued` while this
   * replica creates the session's workspace, and another replica's takeover must not start it
   * meanwhile (it would create the same container). Renewed with `hold` until this replica pumps
   * it; its claim then takes it as its own. Undefined on one server.
   */
  opening(): LeaseTerms["set"] | undefined {
    return this.shared ? this.terms().set : undefined;
  }

  /** Whether the task (as read) is running under another replica's live lease. */
  heldElsewhere(task: TaskRow, now = this.now()): boolean {
    return this.shared && task.status === "running" && !!task.lease_owner && task.lease_owner !== this.owner && (task.lease_expires_at ?? 0) >= now;
  }

  /**
   * Sessions with work no live replica holds (PostgreSQL): a `running` task whose lease is free
   * (its replica died or stopped), or a `queued` task in a session where nothing runs or opens
   * under a live lease and no question waits for an answer (its submitter's queue lost a race, or
   * its replica died between two tasks, or while it created the session's workspace). Whoever
   * pumps them first takes the lease; the others find it held.
   * With `ours`, this replica's own leases count as free too: at start, nothing runs here yet, so
   * they are left from its previous life (a crash); later its own tasks run here and are skipped.
   */
  async orphaned(opts: { ours?: boolean } = {}): Promise<string[]> {
    const now = this.now();
    const ours = opts.ours ? eq(tasks.lease_owner, this.owner) : undefined;
    const live = and(isNotNull(tasks.lease_owner), gte(tasks.lease_expires_at, now), ours && not(ours));
    const expired = or(isNull(tasks.lease_owner), isNull(tasks.lease_expires_at), lt(tasks.lease_expires_at, now), ours);
    // Sessions whose queue is busy: a task running under a live lease, a first task whose
    // workspace its replica is creating (queued under a live lease: `opening`), or a question waiting.
    const busy = this.db
      .select({ sid: tasks.session_id })
      .from(tasks)
      .where(or(eq(tasks.status, "waiting_input"), and(inArray(tasks.status, ["running", "queued"]), live)));
    const rows = await this.db
      .selectDistinct({ sid: tasks.session_id })
      .from(tasks)
      .where(or(and(eq(tasks.status, "running"), expired), and(eq(tasks.status, "queued"), notInArray(tasks.session_id, busy))));
    return rows.map((r) => r.sid);
  }
}
