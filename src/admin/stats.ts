/**
 * The counts behind GET /admin/stats and GET /metrics, read in a handful of indexed or small
 * aggregate queries. Every status of the enum columns is present (0 when none), so dashboards and
 * alerts see stable keys.
 */
import { and, count, eq, gt, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { type DB, first } from "../db/client.ts";
import { NOTIFICATION_STATUSES, TASK_STATUSES, WORKSPACE_STATUSES } from "../db/schema.ts";
import { apiTokens, loginSessions, notificationLog, profiles, sessions, tasks, users, workspaces } from "../db/tables.ts";
import type { StatsRecord } from "../schema/admin.ts";
import { COMMIT, VERSION } from "../version.ts";

type Counts<K extends string> = { total: number } & Record<K, number>;
export type { StatsRecord };

export class Stats {
  readonly startedAt: number;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.startedAt = now();
  }

  /** Rows of `table` (matching `where`). */
  private async total(table: SQLiteTable, where?: SQL): Promise<number> {
    return (await first(this.db.select({ n: count() }).from(table).where(where)))?.n ?? 0;
  }

  private async counts<K extends string>(table: SQLiteTable & { status: SQLiteColumn }, statuses: readonly K[]): Promise<Counts<K>> {
    const out = { total: 0 } as Counts<K>;
    for (const s of statuses) (out as Record<string, number>)[s] = 0;
    for (const row of await this.db.select({ status: table.status, n: count() }).from(table).groupBy(table.status)) {
      (out as Record<string, number>)[row.status as string] = row.n;
      out.total += row.n;
    }
    return out;
  }

  async collect(): Promise<StatsRecord> {
    const now = this.now();
    const [usersTotal, admins, disabled, activeLogins, apiTokensTotal, profilesTotal, sessionsTotal, tasksBy, workspacesBy, notificationsBy] = await Promise.all([
      this.total(users),
      this.total(users, eq(users.role, "admin")),
      this.total(users, eq(users.disabled, true)),
      this.total(loginSessions, and(gt(loginSessions.expires_at, now), gt(loginSessions.absolute_expires_at, now))),
      this.total(apiTokens),
      this.total(profiles),
      this.total(sessions),
      this.counts(tasks, TASK_STATUSES),
      this.counts(workspaces, WORKSPACE_STATUSES),
      this.counts(notificationLog, NOTIFICATION_STATUSES),
    ]);
    return {
      version: VERSION,
      commit: COMMIT,
      started_at: new Date(this.startedAt).toISOString(),
      uptime_seconds: Math.max(0, Math.floor((now - this.startedAt) / 1000)),
      users: { total: usersTotal, admins, disabled },
      login_sessions: { active: activeLogins },
      api_tokens: { total: apiTokensTotal },
      profiles: { total: profilesTotal },
      sessions: { total: sessionsTotal },
      tasks: tasksBy,
      workspaces: workspacesBy,
      notifications: notificationsBy,
    };
  }
}
