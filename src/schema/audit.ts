/**
 * The audit log: the record GET /admin/audit and `runcell audit --json` show, the stable action
 * names, and what a service that performs an audited action hands to the log (`AuditSink`,
 * implemented by src/admin/audit.ts; a type here so every domain module can take one without
 * depending on admin/).
 */
import { AUDIT_ACTORS, auditLog } from "../db/schema.ts";
import { recordColumns, type Static, T, Timestamp } from "./common.ts";

/** Every action the server records; stable names (rows outlive versions, so the column stays free text). */
export const AUDIT_ACTIONS = [
  "auth.sign_in",
  "auth.sign_in_failed",
  "auth.sign_up",
  "auth.setup",
  "auth.oauth_linked",
  "token.created",
  "token.deleted",
  "user.created",
  "user.password_changed",
  "user.role_changed",
  "user.disabled",
  "user.enabled",
  "user.policy_changed",
  "admin.password_changed",
  "admin.sign_in_failed",
  "admin.config_changed",
  "secret.set",
  "secret.deleted",
  "integration.changed",
  "integration.deleted",
  "playbook.trigger_rotated",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];
export type AuditActor = (typeof AUDIT_ACTORS)[number];

export const AuditRecord = T.Object(
  {
    ...recordColumns(auditLog, ["id", "actor", "user_id"]),
    action: T.String({ description: `What happened: ${AUDIT_ACTIONS.join(", ")}`, examples: ["auth.sign_in"] }),
    ...recordColumns(auditLog, ["target_id", "ip"]),
    at: Timestamp,
    details: T.Record(T.String(), T.Unknown(), { description: "Names, ids and changed fields; never a secret value, a password or a token" }),
  },
  { title: "AuditEntry" },
);
export type AuditRecord = Static<typeof AuditRecord>;

/** Who does an audited action and from where, as the caller of a service knows it. */
export interface AuditOrigin {
  /** Default: what the service's action implies (a user on their own records, the operator on /admin). */
  actor?: AuditActor;
  /** The client's address (the HTTP request context); none from the CLI. */
  ip?: string | null;
  /** "cli": done with `runcell …` on the data dir (kept as details.via). */
  via?: "cli";
}

export interface AuditEvent extends AuditOrigin {
  action: AuditAction;
  actor: AuditActor;
  /** The acting user, or the user acted on (sign-in failures, the operator's changes). */
  user_id?: string | null;
  target_id?: string | null;
  /** Names, ids, changed fields: never a secret value, a password or a token. */
  details?: Record<string, unknown>;
}

/**
 * What services that perform audited actions are given (src/admin/audit.ts `Audit`). `record`
 * returns a promise that never rejects (a failed write is logged), so a caller that does not
 * await it cannot cause an unhandled rejection. Callers that are async await it, so the row
 * exists before the action's answer (GET /admin/audit right after sees it) on every dialect; a
 * sync caller may leave it un-awaited (on SQLite the insert then runs in a microtask of the same
 * tick, before any later query).
 */
export interface AuditSink {
  record(e: AuditEvent): Promise<void>;
}
