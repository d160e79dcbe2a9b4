/**
 * The `workspaces` rows. The concurrency rule lives here, in one IMMEDIATE transaction per
 * reservation: counting the profile's starting|running rows and inserting (or flipping a stopped
 * row to `starting`) happen atomically, before any Docker object exists, so N parallel starts can
 * never let more than the limit through.
 */
import { and, count, desc, eq, gt, inArray, lt, ne, sql, type SQL } from "drizzle-orm";
import { affected, type DB, first } from "../db/client.ts";
import { keyset, type PageParams } from "../db/paginate.ts";
import { preparedInsert } from "../db/prepared.ts";
import { ACTIVE_WORKSPACE_STATUSES, type NewWorkspaceRow, type ProfileRow, type WorkspaceRow, type WorkspaceStatus } from "../db/schema.ts";
import { profiles, sessions, workspaces } from "../db/tables.ts";
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
  private touchStmt;
  private insertRow;
  /** Active workspaces of a profile / of a user, but `except` (an id, or "" for none): prepared once, they run on every start. */
  private activeOfProfileStmt;
  private activeOfUserStmt;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.insertRow = preparedInsert(db, workspaces);
    const active = (column: typeof workspaces.profile_id | typeof workspaces.user_id) =>
      db
        .select({ n: count() })
        .from(workspaces)
        .where(and(eq(column, sql.placeholder("owner")), inArray(workspaces.status, ACTIVE), ne(workspaces.id, sql.placeholder("except"))))
        .prepare();
    this.activeOfProfileStmt = active(workspaces.profile_id);
    this.activeOfUserStmt = active(workspaces.user_id);
    // On every exec (before and after it): kept prepared, run through execute().
    this.touchStmt = db
      .update(workspaces)
      .set({ last_active_at: sql`${sql.placeholder("at")}` })
      .where(eq(workspaces.id, sql.placeholder("id")))
      .prepare();
  }

  async bySession(sessionId: string): Promise<WorkspaceRow | null> {
    return (await first(this.db.select().from(workspaces).where(eq(workspaces.session_id, sessionId)))) ?? null;
  }

  async byId(id: string): Promise<WorkspaceRow | null> {
    return (await first(this.db.select().from(workspaces).where(eq(workspaces.id, id)))) ?? null;
  }

  async byIdForUser(userId: string, id: string): Promise<WorkspaceRow | null> {
    return (await first(this.db.select().from(workspaces).where(and(eq(workspaces.id, id), eq(workspaces.user_id, userId))))) ?? null;
  }

  /**
   * Throws CONCURRENCY_LIMIT when one more active workspace would exceed the profile's or the
   * user's limit. Synchronous: it runs inside a reservation's transaction (one connection: a
   * statement prepared on `db` runs in the caller's transaction).
   */
  private checkRoom(profileId: string, userId: string, limits: RoomLimits, except?: string) {
    const n = this.activeOfProfileStmt.get({ owner: profileId, except: except ?? "" })!.n;
    if (n >= limits.profile) throw concurrencyLimit(profileId, n, limits.profile);
    if (limits.user !== null) {
      const u = this.activeOfUserStmt.get({ owner: userId, except: except ?? "" })!.n;
      if (u >= limits.user) throw userRunningLimit(u, limits.user);
    }
  }

  /**
   * Throws CONCURRENCY_LIMIT when the session's workspace would have to start and the profile has
   * no room: a pre-check so a task is refused before it is queued (reserve* stay the race-free
   * decision when the container actually starts).
   */
  async assertRoom(sessionId: string, profileId: string, userId: string, limits: RoomLimits): Promise<void> {
    const ws = await this.bySession(sessionId);
    if (ws && (ACTIVE as string[]).includes(ws.status)) return;
    const n = (await this.activeOfProfileStmt.execute({ owner: profileId, except: "" }))[0]!.n;
    if (n >= limits.profile) throw concurrencyLimit(profileId, n, limits.profile);
    if (limits.user !== null) {
      const u = (await this.activeOfUserStmt.execute({ owner: userId, except: "" }))[0]!.n;
      if (u >= limits.user) throw userRunningLimit(u, limits.user);
    }
  }

  /** Inserts a `starting` row, or throws CONCURRENCY_LIMIT; returns the session's row if one exists. */
  async reserveNew(row: WorkspaceRow, limits: RoomLimits): Promise<{ row: WorkspaceRow; created: boolean }> {
    // one statement block: gets a transaction of its own per dialect (issue 17)
    return this.db.transaction(
      (tx) => {
        const existing = tx.select().from(workspaces).where(eq(workspaces.session_id, row.session_id)).get();
        if (existing) return { row: existing, created: false };
        this.checkRoom(row.profile_id, row.user_id, limits);
        this.insertRow(row);
        return { row: tx.select().from(workspaces).where(eq(workspaces.id, row.id)).get()!, created: true };
      },
      { behavior: "immediate" },
    );
  }

  /** Flips a stopped/failed row to `starting`, or throws CONCURRENCY_LIMIT. */
  async reserveRestart(id: string, profileId: string, userId: string, limits: RoomLimits): Promise<WorkspaceRow> {
    // one statement block: gets a transaction of its own per dialect (issue 17)
    return this.db.transaction(
      (tx) => {
        this.checkRoom(profileId, userId, limits, id);
        tx.update(workspaces).set({ status: "starting", updated_at: this.now() }).where(eq(workspaces.id, id)).run();
        return tx.select().from(workspaces).where(eq(workspaces.id, id)).get()!;
      },
      { behavior: "immediate" },
    );
  }

  async update(id: string, set: Partial<Pick<WorkspaceRow, "status" | "docker_id" | "error" | "last_active_at" | "disk_bytes" | "disk_checked_at">>): Promise<WorkspaceRow | null> {
    return (await this.db.update(workspaces).set({ ...set, updated_at: this.now() }).where(eq(workspaces.id, id)).returning())[0] ?? null;
  }

  async touch(id: string): Promise<void> {
    await this.touchStmt.execute({ id, at: this.now() });
  }

  async delete(id: string): Promise<boolean> {
    return affected(await this.db.delete(workspaces).where(eq(workspaces.id, id))) > 0;
  }

  async page(where: SQL | undefined, p: PageParams) {
    const k = keyset(workspaces.id, where, p);
    return { rows: await this.db.select().from(workspaces).where(k.where).orderBy(k.orderBy).limit(k.fetch), limit: k.limit };
  }

  /** Every row, or every row on one Docker host (reconciliation). */
  async all(host?: string): Promise<WorkspaceRow[]> {
    return this.db
      .select()
      .from(workspaces)
      .where(host === undefined ? undefined : eq(workspaces.host, host))
      .orderBy(desc(workspaces.id));
  }

  /** Starting and running workspaces per Docker host (placement). */
  async activeByHost(): Promise<Map<string, number>> {
    const rows = await this.db.select({ host: workspaces.host, n: count() }).from(workspaces).where(inArray(workspaces.status, ACTIVE)).groupBy(workspaces.host);
    return new Map(rows.map((r) => [r.host, r.n]));
  }

  /** A Docker host stopped answering: its workspaces, but failed ones, become `unavailable`. Returns their ids. */
  async markHostUnavailable(host: string, error: string): Promise<string[]> {
    const rows = await this.db
      .update(workspaces)
      .set({ status: "unavailable", error, updated_at: this.now() })
      .where(and(eq(workspaces.host, host), ne(workspaces.status, "failed"), ne(workspaces.status, "unavailable")))
      .returning({ id: workspaces.id });
    return rows.map((r) => r.id);
  }

  /** The host answers again: its unavailable workspaces become `stopped` (the next turn starts them). Returns their ids. */
  async markHostBack(host: string): Promise<string[]> {
    const rows = await this.db
      .update(workspaces)
      .set({ status: "stopped", error: null, updated_at: this.now() })
      .where(and(eq(workspaces.host, host), eq(workspaces.status, "unavailable")))
      .returning({ id: workspaces.id });
    return rows.map((r) => r.id);
  }

  /** The user's starting and running rows. */
  async activeForUser(userId: string): Promise<WorkspaceRow[]> {
    return this.db.select().from(workspaces).where(and(eq(workspaces.user_id, userId), inArray(workspaces.status, ACTIVE)));
  }

  /** Running rows (the disk check). */
  async running(): Promise<WorkspaceRow[]> {
    return this.db.select().from(workspaces).where(eq(workspaces.status, "running"));
  }

  /** Running rows untouched since `cutoff`. */
  async idleSince(cutoff: number): Promise<WorkspaceRow[]> {
    return this.db
      .select()
      .from(workspaces)
      .where(and(eq(workspaces.status, "running"), lt(workspaces.last_active_at, cutoff)));
  }

  /** Profiles that want a warm pool. */
  async pooledProfiles(): Promise<ProfileRow[]> {
    return this.db.select().from(profiles).where(gt(profiles.warm_pool, 0));
  }

  async profile(id: string): Promise<ProfileRow | null> {
    return (await first(this.db.select().from(profiles).where(eq(profiles.id, id)))) ?? null;
  }

  async session(id: string) {
    return (await first(this.db.select().from(sessions).where(eq(sessions.id, id)))) ?? null;
  }
}
