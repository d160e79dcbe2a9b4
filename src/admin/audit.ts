/**
 * The audit log: security-relevant actions as rows of `audit_log` (sign-ins and their failures,
 * sign-up, first-run setup, API tokens, accounts' passwords, roles and disabling, secrets by name,
 * webhook integrations, the operator's settings and password, playbook trigger rotation). The
 * services that perform an action record it (they are given this service as an `AuditSink`,
 * src/schema/audit.ts); the caller tells them who asked and from where (`AuditOrigin`: the client
 * IP of the HTTP request, or the CLI).
 *
 * Details hold names, ids and changed fields only; as a last guard they pass through the logger's
 * `redact`, which blanks any value under a credential-like key and credential shapes in strings.
 * Recording never fails the action it describes (it has already happened): a write that fails is
 * logged, and the promise `record` returns never rejects (see AuditSink). Rows are kept for
 * `--audit-retention` (default 90 days); `purge` drops older ones and runs hourly (src/app.ts).
 */
import { and, eq, lt, type SQL } from "drizzle-orm";
import { affected, type DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type AuditRow } from "../db/schema.ts";
import { auditLog } from "../db/tables.ts";
import { iso } from "../lib/time.ts";
import { type Logger, redact } from "../log.ts";
import type { AuditEvent, AuditRecord, AuditSink } from "../schema/audit.ts";

export type { AuditEvent, AuditRecord };

export interface AuditQuery extends PageParams {
  user_id?: string;
  action?: string;
}

export function auditRecord(r: AuditRow): AuditRecord {
  return { id: r.id, actor: r.actor, user_id: r.user_id, action: r.action, target_id: r.target_id, ip: r.ip, at: iso(r.at), details: r.details ?? {} };
}

export class Audit implements AuditSink {
  constructor(
    private db: DB,
    private now: () => number,
    private log?: Logger,
  ) {}

  /** Writes one row. Never throws and never rejects: a failed write is logged. */
  async record(e: AuditEvent): Promise<void> {
    const details = { ...e.details, ...(e.via ? { via: e.via } : {}) };
    const row = {
      id: newId("audit"),
      at: this.now(),
      actor: e.actor,
      user_id: e.user_id ?? null,
      action: e.action,
      target_id: e.target_id ?? null,
      ip: e.ip || null,
      details: Object.keys(details).length ? (redact(details) as Record<string, unknown>) : null,
    };
    try {
      await this.db.insert(auditLog).values(row);
    } catch (err) {
      this.log?.error("audit log row not written", { action: e.action, user_id: row.user_id, target_id: row.target_id, err });
    }
  }

  /** Newest first, keyset-paged by id; filtered by the user (acting or acted on) and/or the action. */
  async list(q: AuditQuery): Promise<Page<AuditRecord>> {
    const filters: SQL[] = [];
    if (q.user_id) filters.push(eq(auditLog.user_id, q.user_id));
    if (q.action) filters.push(eq(auditLog.action, q.action));
    const k = keyset(auditLog.id, filters.length ? and(...filters) : undefined, q);
    const rows = await this.db.select().from(auditLog).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    return toPage(rows, k.limit, auditRecord);
  }

  /** Deletes the rows recorded before `before` (ms); returns how many. */
  async purge(before: number): Promise<number> {
    return affected(await this.db.delete(auditLog).where(lt(auditLog.at, before)));
  }
}
