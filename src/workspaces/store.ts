/**
 * The `workspaces` rows. The concurrency rule lives here, in one unit per reservation: counting
 * the profile's and the user's starting|running rows and inserting (or flipping a stopped row to
 * `starting`) commit together, before any Docker object exists, so N parallel starts can never let
 * more than the limit through — on SQLite by an IMMEDIATE transaction (the write lock from BEGIN),
 * on PostgreSQL by row locks taken first (see `lockOwners`), also across servers.
 */
import { and, count, desc, eq, gt, inArray, lt, ne, sql, type SQL } from "drizzle-orm";
import { affected, type DB, first } from "../db/client.ts";
import { keyset, type PageParams } from "../db/paginate.ts";
import { boundStatement, preparedInsertStep, preparedLookup } from "../db/prepared.ts";
import { forNoKeyUpdate } from "../db/row-lock.ts";
import { ACTIVE_WORKSPACE_STATUSES, type NewWorkspaceRow, type ProfileRow, type WorkspaceRow, type WorkspaceStatus } from "../db/schema.ts";
import { profiles, sessions, users, workspaces } from "../db/tables.ts";
import { all, driveAsync, first as firstOf, isPostgres, run, transact, type Unit } from "../db/unit.ts";
import { AppError } from "../lib/errors.ts";

export type { NewWorkspaceRow, WorkspaceRow, WorkspaceStatus };

const ACTIVE: readonly WorkspaceStatus[] = ACTIVE_WORKSPACE_STATUSES;

/**
 * The Retry-After (seconds) of CONCURRENCY_LIMIT. A workspace is freed when one is stopped (idle
 * timeout, a playbook run's end, DELETE) or deleted: at no time the server knows in advance, so
 * this is a fixed polling interval, not a promise that room will be there.
 */
export const CONCURRENCY_RETRY_AFTER_SEC = 10;

export function concurrencyLimit(profileId: string, active: number, limit: number): AppError {
  return new AppError(
    "CONCURRENCY_LIMIT",
    `Profile ${profileId} already has ${active} running workspace${active === 1 ? "" : "s"} (max_concurrency ${limit}); ` +
      "wait for one to finish or go idle, delete one, or raise the profile's limits.max_concurrency",
    { limit: "max_concurrency", profile_id: profileId, max_concurrency: limit, retry_after: CONCURRENCY_RETRY_AFTER_SEC },
  );
}

/** CONCURRENCY_LIMIT for a user at the operator's max_running_workspaces. */
export function userRunningLimit(active: number, limit: number): AppError {
  return new AppError(
    "CONCURRENCY_LIMIT",
    `You already have ${active} running workspace${active === 1 ? "" : "s"}, the most this server allows per user (max_running_workspaces ${limit}); ` +
      "wait for one to finish or go idle, or stop or delete one",
    { limit: "max_running_workspaces", max: limit, retry_after: CONCURRENCY_RETRY_AFTER_SEC },
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
  /**
   * SQLite: active workspaces of a profile / of a user, but `except` (an id, or "" for none),
   * prepared once (they run on every start). Null on PostgreSQL, where the count is a drizzle
   * query built on the reservation's transaction.
   */
  private activeStmts;
  /** A row by its session / by its id, prepared once (read on every start). */
  private rowBySession;
  private rowById;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.insertRow = preparedInsertStep(db, workspaces);
    const active = (column: typeof workspaces.profile_id | typeof workspaces.user_id) =>
      db
        .select({ n: count() })
        .from(workspaces)
        .where(and(eq(column, sql.placeholder("owner")), inArray(workspaces.status, ACTIVE), ne(workspaces.id, sql.placeholder("except"))))
        .prepare();
    this.activeStmts = isPostgres(db) ? null : { profile: active(workspaces.profile_id), user: active(workspaces.user_id) };
    this.rowBySession = preparedLookup(db, workspaces, ["session_id"]);
    this.rowById = preparedLookup(db, workspaces, ["id"]);
    // On every exec (before and after it): kept prepared, run through execute() (both dialects).
    this.touchStmt = db
      .update(workspaces)
      .set({ last_active_at: sql`${sql.placeholder("at")}` })
      .where(eq(workspaces.id, sql.placeholder("id")))
      .prepare();
  }

  async bySession(sessionId: string): Promise<WorkspaceRow | null> {
    return (await this.rowBy(this.db, "session", sessionId))[0] ?? null;
  }

  async byId(id: string): Promise<WorkspaceRow | null> {
    return (await this.rowBy(this.db, "id", id))[0] ?? null;
  }

  /** The row of a session or of an id, as a statement of `tx` (or of `db` outside a unit). */
  private rowBy(tx: DB, by: "session" | "id", key: string): PromiseLike<WorkspaceRow[]> {
    return by === "session" ? this.rowBySession([key], tx) : this.rowById([key], tx);
  }

  async byIdForUser(userId: string, id: string): Promise<WorkspaceRow | null> {
    return (await first(this.db.select().from(workspaces).where(and(eq(workspaces.id, id), eq(workspaces.user_id, userId))))) ?? null;
  }

  /** The active-workspace count of a profile or a user, but `except`, as a statement of `tx` (or of `db` outside a unit). */
  private activeCount(tx: DB, of: "profile" | "user", owner: string, except = ""): PromiseLike<{ n: number }[]> {
    if (this.activeStmts) return boundStatement(this.activeStmts[of], { owner, except });
    const column = of === "profile" ? workspaces.profile_id : workspaces.user_id;
    return tx
      .select({ n: count() })
      .from(workspaces)
      .where(and(eq(column, owner), inArray(workspaces.status, ACTIVE), ne(workspaces.id, except)));
  }

  /**
   * Throws CONCURRENCY_LIMIT when one more active workspace would exceed the profile's or the
   * user's limit. A step of a reservation's unit.
   */
  private *checkRoom(tx: DB, profileId: string, userId: string, limits: RoomLimits, except?: string): Unit<void> {
    const n = (yield* firstOf(this.activeCount(tx, "profile", profileId, except)))!.n;
    if (n >= limits.profile) throw concurrencyLimit(profileId, n, limits.profile);
    if (limits.user !== null) {
      const u = (yield* firstOf(this.activeCount(tx, "user", userId, except)))!.n;
      if (u >= limits.user) throw userRunningLimit(u, limits.user);
    }
  }

  /**
   * PostgreSQL only: locks the user's and the profile's rows (FOR NO KEY UPDATE, src/db/row-lock.ts)
   * before a reservation reads anything. Without it two servers (or two pool connections of one)
   * could both count N-1 active workspaces under READ COMMITTED and both insert: the count is a
   * check-then-insert no constraint enforces. Every reservation takes these locks, so reservations
   * for the same user or profile run one after the other, and each one's count (a fresh snapshot
   * per statement) sees the rows the previous one committed; the session's existing-row check is
   * covered too (a session belongs to the locked user). Always the user first, then the profile:
   * one order, so two reservations cannot deadlock. SQLite needs none of this: its IMMEDIATE
   * transaction holds the database's write lock from BEGIN.
   */
  private *lockOwners(tx: DB, userId: string, profileId: string): Unit<void> {
    if (!isPostgres(tx)) return;
    yield* all(forNoKeyUpdate(tx.select({ id: users.id }).from(users).where(eq(users.id, userId))));
    yield* all(forNoKeyUpdate(tx.select({ id: profiles.id }).from(profiles).where(eq(profiles.id, profileId))));
  }

  /**
   * Throws CONCURRENCY_LIMIT when the session's workspace would have to start and the profile has
   * no room: a pre-check so a task is refused before it is queued (reserve* stay the race-free
   * decision when the container actually starts).
   */
  async assertRoom(sessionId: string, profileId: string, userId: string, limits: RoomLimits): Promise<void> {
    const ws = await this.bySession(sessionId);
    if (ws && (ACTIVE as string[]).includes(ws.status)) return;
    await driveAsync(this.checkRoom(this.db, profileId, userId, limits));
  }

  /** Inserts a `starting` row, or throws CONCURRENCY_LIMIT; returns the session's row if one exists. */
  async reserveNew(row: WorkspaceRow, limits: RoomLimits): Promise<{ row: WorkspaceRow; created: boolean }> {
    return transact(this.db, (tx) => this.reserveNewUnit(tx, row, limits), { immediate: true });
  }

  /** The session's existing row, or the room check and the new row's insert, committed together. */
  private *reserveNewUnit(tx: DB, row: WorkspaceRow, limits: RoomLimits): Unit<{ row: WorkspaceRow; created: boolean }> {
    yield* this.lockOwners(tx, row.user_id, row.profile_id);
    const existing = yield* firstOf(this.rowBy(tx, "session", row.session_id));
    if (existing) return { row: existing, created: false };
    yield* this.checkRoom(tx, row.profile_id, row.user_id, limits);
    yield* run(this.insertRow(tx, row));
    return { row: (yield* firstOf(this.rowBy(tx, "id", row.id)))!, created: true };
  }

  /** Flips a stopped/failed row to `starting`, or throws CONCURRENCY_LIMIT. */
  async reserveRestart(id: string, profileId: string, userId: string, limits: RoomLimits): Promise<WorkspaceRow> {
    return transact(this.db, (tx) => this.reserveRestartUnit(tx, id, profileId, userId, limits), { immediate: true });
  }

  /** The room check (not counting the row itself) and the flip to `starting`, committed together. */
  private *reserveRestartUnit(tx: DB, id: string, profileId: string, userId: string, limits: RoomLimits): Unit<WorkspaceRow> {
    yield* this.lockOwners(tx, userId, profileId);
    yield* this.checkRoom(tx, profileId, userId, limits, id);
    yield* run(tx.update(workspaces).set({ status: "starting", updated_at: this.now() }).where(eq(workspaces.id, id)));
    return (yield* firstOf(this.rowBy(tx, "id", id)))!;
  }

  /** Updates the row (with `onlyIf`: only while its status is that one); the row as updated, or null. */
  async update(id: string, set: Partial<Pick<WorkspaceRow, "status" | "docker_id" | "error" | "last_active_at" | "disk_bytes" | "disk_checked_at">>, onlyIf?: WorkspaceStatus): Promise<WorkspaceRow | null> {
    const where = onlyIf ? and(eq(workspaces.id, id), eq(workspaces.status, onlyIf)) : eq(workspaces.id, id);
    return (await this.db.update(workspaces).set({ ...set, updated_at: this.now() }).where(where).returning())[0] ?? null;
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

  /** The ids among `ids` that have a row (placement: another replica's pool member taken by a session). */
  async withRows(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.select({ id: workspaces.id }).from(workspaces).where(inArray(workspaces.id, ids));
    return new Set(rows.map((r) => r.id));
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

  /** Profiles that want a warm pool (a disabled user's want none: their pools are emptied and held). */
  async pooledProfiles(): Promise<ProfileRow[]> {
    return (await this.ofEnabledOwners(gt(profiles.warm_pool, 0))).map((r) => r.profile);
  }

  /** A profile as its warm pool sees it: none when it is gone or its owner is disabled. */
  async poolProfile(id: string): Promise<ProfileRow | null> {
    return (await first(this.ofEnabledOwners(eq(profiles.id, id))))?.profile ?? null;
  }

  /** The profiles matching `where` whose owner is not disabled. */
  private ofEnabledOwners(where: SQL) {
    return this.db.select({ profile: profiles }).from(profiles).innerJoin(users, eq(users.id, profiles.user_id)).where(and(where, eq(users.disabled, false)));
  }

  async profile(id: string): Promise<ProfileRow | null> {
    return (await first(this.db.select().from(profiles).where(eq(profiles.id, id)))) ?? null;
  }

  async session(id: string) {
    return (await first(this.db.select().from(sessions).where(eq(sessions.id, id)))) ?? null;
  }
}
