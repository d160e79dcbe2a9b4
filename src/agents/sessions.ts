/** Agent session rows: creation, usage totals, the API record, owner-scoped lookups and lists. */
import { and, eq, inArray, sql } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { preparedInsertStep } from "../db/prepared.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { ACTIVE_TASK_STATUSES, type RepositoryConfig, type SessionRow } from "../db/schema.ts";
import { deletedTaskUsage, sessions, tasks, workspaces } from "../db/tables.ts";
import { all, run, transact, type Unit } from "../db/unit.ts";
import type { EventStore } from "../events/log.ts";
import { Errors } from "../lib/errors.ts";
import { iso } from "../lib/time.ts";
import { roundUsd } from "../lib/usd.ts";
import type { SessionRecord } from "../schema/session.ts";

export type { SessionRecord, SessionRow };

export const titleFrom = (prompt: string) => {
  const line = prompt.trim().split("\n")[0]!.trim();
  return line.length > 80 ? line.slice(0, 79) + "…" : line || null;
};

/** Rows per INSERT into deleted_task_usage (9 parameters each: well within either database's limit). */
const USAGE_BATCH = 500;

export class AgentSessions {
  /** Prepared once on SQLite (a new session on every session.start); a statement of the caller's unit. */
  private insertRow;

  constructor(
    private db: DB,
    private now: () => number,
    private log: EventStore,
  ) {
    this.insertRow = preparedInsertStep(db, sessions);
  }

  /** A new session in a transaction of its own (tests, tools: a session without a workspace). */
  async create(userId: string, profileId: string, title: string | null, repositories: RepositoryConfig[] | null = null): Promise<SessionRow> {
    return transact(this.db, (tx) => this.createIn(tx, userId, profileId, title, repositories));
  }

  /** A new session as a unit: it commits with the caller's transaction (SessionLifecycle.open's). */
  *createIn(tx: DB, userId: string, profileId: string, title: string | null, repositories: RepositoryConfig[] | null = null): Unit<SessionRow> {
    const now = this.now();
    const row: SessionRow = { id: newId("session"), user_id: userId, profile_id: profileId, title, input_tokens: 0, output_tokens: 0, cost_usd: 0, seq_reserved: 0, repositories, created_at: now, updated_at: now };
    yield* run(this.insertRow(tx, row));
    return row;
  }

  async byId(id: string): Promise<SessionRow | undefined> {
    return first(this.db.select().from(sessions).where(eq(sessions.id, id)));
  }

  async get(userId: string, id: string): Promise<SessionRow> {
    const s = await this.byId(id);
    if (!s || s.user_id !== userId) throw Errors.notFound("Session", id);
    return s;
  }

  async addUsage(sessionId: string, inputTokens: number, outputTokens: number, costUsd: number): Promise<void> {
    await this.db
      .update(sessions)
      .set({
        input_tokens: sql`${sessions.input_tokens} + ${inputTokens}`,
        output_tokens: sql`${sessions.output_tokens} + ${outputTokens}`,
        cost_usd: sql`${sessions.cost_usd} + ${costUsd}`,
        updated_at: this.now(),
      })
      .where(eq(sessions.id, sessionId));
  }

  async setTitleIfEmpty(sessionId: string, title: string | null): Promise<void> {
    if (title) await this.db.update(sessions).set({ title }).where(and(eq(sessions.id, sessionId), sql`${sessions.title} IS NULL`));
  }

  private async records(rows: SessionRow[]): Promise<SessionRecord[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((r) => r.id);
    const ctr = new Map((await this.db.select({ sid: workspaces.session_id, id: workspaces.id }).from(workspaces).where(inArray(workspaces.session_id, ids))).map((w) => [w.sid, w.id]));
    const active = new Set(
      (await this.db.selectDistinct({ sid: tasks.session_id }).from(tasks).where(and(inArray(tasks.session_id, ids), inArray(tasks.status, ACTIVE_TASK_STATUSES)))).map((r) => r.sid),
    );
    return rows.map((s) => ({
      id: s.id,
      profile_id: s.profile_id,
      container_id: ctr.get(s.id) ?? null,
      status: active.has(s.id) ? "active" : "idle",
      title: s.title,
      input_tokens: s.input_tokens,
      output_tokens: s.output_tokens,
      cost_usd: roundUsd(s.cost_usd),
      created_at: iso(s.created_at),
      updated_at: iso(s.updated_at),
    }));
  }

  async record(row: SessionRow): Promise<SessionRecord> {
    return (await this.records([row]))[0]!;
  }

  async list(userId: string, p: PageParams): Promise<Page<SessionRecord>> {
    const k = keyset(sessions.id, eq(sessions.user_id, userId), p);
    const rows = await this.db.select().from(sessions).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    const page = toPage(rows, k.limit, (r) => r);
    return { data: await this.records(page.data), next_cursor: page.next_cursor };
  }

  /**
   * The persisted transcript after `after`, oldest first, as the JSON text of
   * `{data: [frames], next_cursor}` (frames are stored serialized; they are not re-encoded).
   */
  async eventsJson(userId: string, id: string, isAdmin: boolean, after: number, limit: number): Promise<string> {
    await this.get(userId, id);
    // One more than the page, to know whether another follows (admin-only frames left out for others).
    const rows = await this.log.read(id, after, limit + 1, isAdmin);
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    const next = more ? String(page[page.length - 1]!.seq) : null;
    return `{"data":[${page.map((r) => r.frame).join(",")}],"next_cursor":${JSON.stringify(next)}}`;
  }

  /**
   * Deletes the session's row (its transcript and events cascade) and its tasks, keeping what the
   * tasks used in deleted_task_usage in the same transaction: the monthly spend cap and usage
   * reports go on counting it, so deleting a session never resets a user's spend. The tasks are
   * deleted first and their usage taken from what the delete returns: exactly the rows removed,
   * as they were when removed. `keepUsage` false: a session rolled back while it opened, whose
   * task the caller was never given. False when the row was already gone (deleted meanwhile).
   */
  async delete(id: string, keepUsage = true): Promise<boolean> {
    return await transact(this.db, (tx) => this.deleteIn(tx, id, keepUsage));
  }

  private *deleteIn(tx: DB, id: string, keepUsage: boolean): Unit<boolean> {
    const gone = yield* all(
      tx.delete(tasks).where(eq(tasks.session_id, id)).returning({
        task_id: tasks.id,
        user_id: tasks.user_id,
        profile_id: tasks.profile_id,
        server_paid: tasks.server_paid,
        input_tokens: tasks.input_tokens,
        output_tokens: tasks.output_tokens,
        cost_usd: tasks.cost_usd,
        created_at: tasks.created_at,
      }),
    );
    if (keepUsage) {
      const deleted_at = this.now();
      for (let i = 0; i < gone.length; i += USAGE_BATCH) {
        yield* run(tx.insert(deletedTaskUsage).values(gone.slice(i, i + USAGE_BATCH).map((t) => ({ ...t, deleted_at }))));
      }
    }
    return (yield* all(tx.delete(sessions).where(eq(sessions.id, id)).returning({ id: sessions.id }))).length > 0;
  }
}
