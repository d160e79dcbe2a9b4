/**
 * The `workspaces` rows. The concurrency rule lives here, in one IMMEDIATE transaction per
 * reservation: counting the profile's starting|running rows and inserting (or flipping a stopped
 * row to `starting`) happen atomically, before any Docker object exists, so N parallel starts can
 * never let more than the limit through.
 */
import { and, count, desc, eq, gt, inArray, lt, ne, sql, type SQL } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { keyset, type PageParams } from "../db/paginate.ts";
import { preparedInsert } from "../db/prepared.ts";
import { ACTIVE_WORKSPACE_STATUSES, type NewWorkspaceRow, profiles, sessions, type WorkspaceRow, workspaces, type WorkspaceStatus } from "../db/schema.ts";
import { AppError } from "../lib/errors.ts";

export type { NewWorkspaceRow, WorkspaceRow, WorkspaceStatus };

const ACTIVE: readonly WorkspaceStatus[] = ACTIVE_WORKSPACE_STATUSES;

export function concurrencyLimit(profileId: string, active: number, limit: number): AppError {
  return new AppError(
    "CONCURRENCY_LIMIT",
    `Profile ${profileId} already has ${active} running workspace${active === 1 ? "" : "s"} (max_concurrency ${limit}); ` +
      "wait for one to finish or go idle, delete one, or raise the profile's limits.max_concurrency",
    { profile_id: profileId, max_concurrency: limit },
  );
}

/** CONCURRENCY_LIMIT for a user at the operator's max_running_workspaces. */
export function userRunningLimit(active: number, limit: number): AppError {
  return new AppError(
    "CONCURRENCY_LIMIT",
    `You already have ${active} running workspace${active === 1 ? "" : "s"}, the most this server allows per user (max_running_workspaces ${limit}); ` +
      "wait for one to finish or go idle, or stop or delete one",
    { limit: "max_running_workspaces", max: limit },
  );
}

/** The limits a reservation must stay within: the profile's max_concurrency and the user's running cap (null: none). */
export interface RoomLimits {
  profile: number;
  user: number | null;
}

export class WorkspaceStore {
  private bySessionStmt;
  private byIdStmt;
  private touchStmt;
  private insertRow;
  /** Active workspaces of a profile / of a user, but `except` (an id, or "" for none): prepared once, they run on every start. */
  private activeOfProfileStmt;
  private activeOfUserStmt;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.bySessionStmt = db.select().from(workspaces).where(eq(workspaces.session_id, sql.placeholder("sid"))).prepare();
    this.byIdStmt = db.select().from(workspaces).where(eq(workspaces.id, sql.placeholder("id"))).prepare();
    this.insertRow = preparedInsert(db, workspaces);
    const active = (column: typeof workspaces.profile_id | typeof workspaces.user_id) =>
      db
        .select({ n: count() })
        .from(workspaces)
        .where(and(eq(column, sql.placeholder("owner")), inArray(workspaces.status, ACTIVE), ne(workspaces.id, sql.placeholder("except"))))
        .prepare();
    this.activeOfProfileStmt = active(workspaces.profile_id);
    this.activeOfUserStmt = active(workspaces.user_id);
    this.touchStmt = db
      .update(workspaces)
      .set({ last_active_at: sql`${sql.placeholder("at")}` })
      .where(eq(workspaces.id, sql.placeholder("id")))
      .prepare();
  }

  bySession(sessionId: string): WorkspaceRow | null {
    return this.bySessionStmt.get({ sid: sessionId }) ?? null;
  }

  byId(id: string): WorkspaceRow | null {
    return this.byIdStmt.get({ id }) ?? null;
  }

  byIdForUser(userId: string, id: string): WorkspaceRow | null {
    return this.db.select().from(workspaces).where(and(eq(workspaces.id, id), eq(workspaces.user_id, userId))).get() ?? null;
  }

  // One connection: a statement prepared on `db` runs inside the caller's transaction.
  private activeCount(profileId: string, except?: string): number {
    return this.activeOfProfileStmt.get({ owner: profileId, except: except ?? "" })!.n;
  }

  private userActiveCount(userId: string, except?: string): number {
    return this.activeOfUserStmt.get({ owner: userId, except: except ?? "" })!.n;
  }

  /** Throws CONCURRENCY_LIMIT when one more active workspace would exceed the profile's or the user's limit. */
  private checkRoom(profileId: string, userId: string, limits: RoomLimits, except?: string) {
    const n = this.activeCount(profileId, except);
    if (n >= limits.profile) throw concurrencyLimit(profileId, n, limits.profile);
    if (limits.user !== null) {
      const u = this.userActiveCount(userId, except);
      if (u >= limits.user) throw userRunningLimit(u, limits.user);
    }
  }

  /**
   * Throws CONCURRENCY_LIMIT when the session's workspace would have to start and the profile has
   * no room: a pre-check so a task is refused before it is queued (reserve* stay the race-free
   * decision when the container actually starts).
   */
  assertRoom(sessionId: string, profileId: string, userId: string, limits: RoomLimits) {
    const ws = this.bySession(sessionId);
    if (ws && (ACTIVE as string[]).includes(ws.status)) return;
    this.checkRoom(profileId, userId, limits);
  }

  /** Inserts a `starting` row, or throws CONCURRENCY_LIMIT; returns the session's row if one exists. */
  reserveNew(row: WorkspaceRow, limits: RoomLimits): { row: WorkspaceRow; created: boolean } {
    return this.db.transaction(
      () => {
        const existing = this.bySession(row.session_id);
        if (existing) return { row: existing, created: false };
        this.checkRoom(row.profile_id, row.user_id, limits);
        this.insertRow(row);
        return { row: this.byId(row.id)!, created: true };
      },
      { behavior: "immediate" },
    );
  }

  /** Flips a stopped/failed row to `starting`, or throws CONCURRENCY_LIMIT. */
  reserveRestart(id: string, profileId: string, userId: string, limits: RoomLimits): WorkspaceRow {
    return this.db.transaction(
      (tx) => {
        this.checkRoom(profileId, userId, limits, id);
        tx.update(workspaces).set({ status: "starting", updated_at: this.now() }).where(eq(workspaces.id, id)).run();
        return tx.select().from(workspaces).where(eq(workspaces.id, id)).get()!;
      },
      { behavior: "immediate" },
    );
  }

  update(id: string, set: Partial<Pick<WorkspaceRow, "status" | "docker_id" | "error" | "last_active_at" | "disk_bytes" | "disk_checked_at">>): WorkspaceRow | null {
    this.db.update(workspaces).set({ ...set, updated_at: this.now() }).where(eq(workspaces.id, id)).run();
    return this.byId(id);
  }

  touch(id: string) {
    this.touchStmt.run({ id, at: this.now() });
  }

  delete(id: string): boolean {
    return (this.db.delete(workspaces).where(eq(workspaces.id, id)).run() as unknown as { changes: number }).changes > 0;
  }

  page(where: SQL | undefined, p: PageParams) {
    const k = keyset(workspaces.id, where, p);
    return { rows: this.db.select().from(workspaces).where(k.where).orderBy(k.orderBy).limit(k.fetch).all(), limit: k.limit };
  }

  /** Every row, or every row on one Docker host (reconciliation). */
  all(host?: string): WorkspaceRow[] {
    return this.db
      .select()
      .from(workspaces)
      .where(host === undefined ? undefined : eq(workspaces.host, host))
      .orderBy(desc(workspaces.id))
      .all();
  }

  /** Starting and running workspaces per Docker host (placement). */
  activeByHost(): Map<string, number> {
    const rows = this.db.select({ host: workspaces.host, n: count() }).from(workspaces).where(inArray(workspaces.status, ACTIVE)).groupBy(workspaces.host).all();
    return new Map(rows.map((r) => [r.host, r.n]));
  }

  /** A Docker host stopped answering: its workspaces, but failed ones, become `unavailable`. Returns their ids. */
  markHostUnavailable(host: string, error: string): string[] {
    return this.db
      .update(workspaces)
      .set({ status: "unavailable", error, updated_at: this.now() })
      .where(and(eq(workspaces.host, host), ne(workspaces.status, "failed"), ne(workspaces.status, "unavailable")))
      .returning({ id: workspaces.id })
      .all()
      .map((r) => r.id);
  }

  /** The host answers again: its unavailable workspaces become `stopped` (the next turn starts them). Returns their ids. */
  markHostBack(host: string): string[] {
    return this.db
      .update(workspaces)
      .set({ status: "stopped", error: null, updated_at: this.now() })
      .where(and(eq(workspaces.host, host), eq(workspaces.status, "unavailable")))
      .returning({ id: workspaces.id })
      .all()
      .map((r) => r.id);
  }

  /** The user's starting and running rows. */
  activeForUser(userId: string): WorkspaceRow[] {
    return this.db.select().from(workspaces).where(and(eq(workspaces.user_id, userId), inArray(workspaces.status, ACTIVE))).all();
  }

  /** Running rows (the disk check). */
  running(): WorkspaceRow[] {
    return this.db.select().from(workspaces).where(eq(workspaces.status, "running")).all();
  }

  /** Running rows untouched since `cutoff`. */
  idleSince(cutoff: number): WorkspaceRow[] {
    return this.db
      .select()
      .from(workspaces)
      .where(and(eq(workspaces.status, "running"), lt(workspaces.last_active_at, cutoff)))
      .all();
  }

  /** Profiles that want a warm pool. */
  pooledProfiles() {
    return this.db.select().from(profiles).where(gt(profiles.warm_pool, 0)).all();
  }

  profile(id: string) {
    return this.db.select().from(profiles).where(eq(profiles.id, id)).get() ?? null;
  }

  session(id: string) {
    return this.db.select().from(sessions).where(eq(sessions.id, id)).get() ?? null;
  }
}
