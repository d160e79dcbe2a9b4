/**
 * The counts behind GET /admin/stats and GET /metrics, read in a handful of indexed or small
 * aggregate queries (prepared once). Every status of the enum columns is present (0 when none),
 * so dashboards and alerts see stable keys.
 */
import type { Database } from "bun:sqlite";
import { NOTIFICATION_STATUSES, TASK_STATUSES, WORKSPACE_STATUSES } from "../db/schema.ts";
import type { StatsRecord } from "../schema/admin.ts";
import { COMMIT, VERSION } from "../version.ts";

type Counts<K extends string> = { total: number } & Record<K, number>;
export type { StatsRecord };

interface Totals {
  users: number;
  admins: number;
  disabled: number;
  active_logins: number;
  api_tokens: number;
  profiles: number;
  sessions: number;
}

export class Stats {
  readonly startedAt: number;
  private totals;
  private byStatus;

  constructor(
    sqlite: Database,
    private now: () => number,
  ) {
    this.startedAt = now();
    this.totals = sqlite.prepare<Totals, [number]>(`SELECT
      (SELECT count(*) FROM users) AS users,
      (SELECT count(*) FROM users WHERE role = 'admin') AS admins,
      (SELECT count(*) FROM users WHERE disabled = 1) AS disabled,
      (SELECT count(*) FROM login_sessions WHERE expires_at > ?1 AND absolute_expires_at > ?1) AS active_logins,
      (SELECT count(*) FROM api_tokens) AS api_tokens,
      (SELECT count(*) FROM profiles) AS profiles,
      (SELECT count(*) FROM sessions) AS sessions`);
    this.byStatus = {
      tasks: sqlite.prepare<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM tasks GROUP BY status"),
      workspaces: sqlite.prepare<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM workspaces GROUP BY status"),
      notifications: sqlite.prepare<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM notification_log GROUP BY status"),
    };
  }

  private counts<K extends string>(stmt: { all(): { status: string; n: number }[] }, statuses: readonly K[]): Counts<K> {
    const out = { total: 0 } as Counts<K>;
    for (const s of statuses) (out as Record<string, number>)[s] = 0;
    for (const row of stmt.all()) {
      (out as Record<string, number>)[row.status] = row.n;
      out.total += row.n;
    }
    return out;
  }

  collect(): StatsRecord {
    const now = this.now();
    const t = this.totals.get(now)!;
    return {
      version: VERSION,
      commit: COMMIT,
      started_at: new Date(this.startedAt).toISOString(),
      uptime_seconds: Math.max(0, Math.floor((now - this.startedAt) / 1000)),
      users: { total: t.users, admins: t.admins, disabled: t.disabled },
      login_sessions: { active: t.active_logins },
      api_tokens: { total: t.api_tokens },
      profiles: { total: t.profiles },
      sessions: { total: t.sessions },
      tasks: this.counts(this.byStatus.tasks, TASK_STATUSES),
      workspaces: this.counts(this.byStatus.workspaces, WORKSPACE_STATUSES),
      notifications: this.counts(this.byStatus.notifications, NOTIFICATION_STATUSES),
    };
  }
}
