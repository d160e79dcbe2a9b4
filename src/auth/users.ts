/**
 * User accounts: creation with validation, lookup, the public and admin records, and the admin
 * changes (role, disabled). Disabling fires `onDisabled` so every way in closes at once: the
 * identity wiring deletes the user's login sessions and evicts their cached tokens, and the
 * WebSocket server closes their sockets.
 */
import { HIDDEN_IN_NAMES, TAG_CHARACTER } from "../schema/common.ts";
import { preparedLookup } from "../db/prepared.ts";
import { type TableChanges, TableMemo } from "../db/changes.ts";
import { asc, count, eq, sql } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { forNoKeyUpdate } from "../db/row-lock.ts";
import { first as firstOf, isPostgres, run, transact, type Unit } from "../db/unit.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type PolicyOverrides, type Role, type UserRow } from "../db/schema.ts";
import { users } from "../db/tables.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { iso } from "../lib/time.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";
import type { Logger } from "../log.ts";
import type { AdminUser, PublicUser } from "../schema/user.ts";
import { hashPassword, PASSWORD_MAX, PASSWORD_MIN, passwordLength } from "./passwords.ts";

export type { UserRow };
export type { Role };

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** Control characters and the invisible ones (zero-width spaces and joiners, soft hyphen, BOM, bidi marks). */
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]/;
export const NAME_MAX = 200;
/** What an account's name may not hold (src/schema/common.ts HIDDEN_IN_NAMES, and tag characters). */
export const NAME_FORBIDDEN = new RegExp(`[${HIDDEN_IN_NAMES}]|${TAG_CHARACTER}`, "g");

/**
 * An email as accounts are keyed by it: compatibility-composed (NFKC: a full-width "ＡＢ" is "AB"),
 * trimmed and lower-cased, so look-alike spellings are one account.
 */
export function normalizeEmail(email: string): string {
  return email.normalize("NFKC").trim().toLowerCase();
}

/** A normalized email runcell accepts as an account's: one @, a dot in the domain, no spaces, control or invisible characters. */
export function isEmail(e: string): boolean {
  return e.length <= 254 && EMAIL.test(e) && !INVISIBLE.test(e);
}

export function validateEmail(email: unknown): string {
  if (typeof email !== "string") throw Errors.validation("email", "email is required");
  const e = normalizeEmail(email);
  if (!isEmail(e)) throw Errors.validation("email", "email is not a valid address");
  return e;
}

export function validatePassword(password: unknown): string {
  if (typeof password !== "string") throw Errors.validation("password", "password is required");
  const length = passwordLength(password);
  if (length < PASSWORD_MIN) throw Errors.validation("password", `password must be at least ${PASSWORD_MIN} characters`);
  if (length > PASSWORD_MAX) throw Errors.validation("password", `password must be at most ${PASSWORD_MAX} characters`);
  return password;
}

export function validateName(name: unknown, fallback: string): string {
  if (name === undefined || name === null || name === "") return fallback;
  if (typeof name !== "string") throw Errors.validation("name", "name must be a string");
  const n = name.trim();
  if (n.search(NAME_FORBIDDEN) >= 0) throw Errors.validation("name", "name must not contain control characters or invisible formatting characters (zero-width spaces, bidi overrides)");
  if (n.length > NAME_MAX) throw Errors.validation("name", `name must be at most ${NAME_MAX} characters`);
  return n || fallback;
}

export function publicUser(u: { id: string; email: string; name: string; role: Role; created_at: number }): PublicUser {
  return { id: u.id, email: u.email, name: u.name, role: u.role, created_at: iso(u.created_at) };
}

export function adminUser(u: UserRow): AdminUser {
  return { ...publicUser(u), disabled: u.disabled, email_verified: u.email_verified, policy: u.policy ?? null, updated_at: iso(u.updated_at) };
}

export class Users {
  /** Called with the id of a user who was just disabled (sessions, tokens and sockets close). */
  onDisabled: ((userId: string) => void | Promise<void>)[] = [];
  /** Called with the id of a user who was just enabled again (held schedules resume). */
  onEnabled: ((userId: string) => void | Promise<void>)[] = [];
  /** Called with the id of a user whose role just changed (their open sockets reconnect under it). */
  onRoleChanged: ((userId: string) => void | Promise<void>)[] = [];

  /** A user by id, prepared once (read on every session start and task by the policy checks). */
  private readonly lookupById;
  /**
   * Rows by id, kept until the users table changes (SQLite; any connection's commit, db/changes.ts):
   * a task's start asks for its owner several times (policy, ceilings, role) and reads it once.
   */
  private readonly rows: TableMemo<UserRow> | null;

  constructor(
    private db: DB,
    private now: () => number,
    private audit?: AuditSink,
    changes?: TableChanges,
  ) {
    this.lookupById = preparedLookup(db, users, ["id"]);
    this.rows = changes ? new TableMemo(changes, ["users"]) : null;
  }

  /** The user (a shared row while unchanged: read it, never change it). */
  async byId(id: string): Promise<UserRow | undefined> {
    const load = async () => (await this.lookupById([id]))[0];
    return this.rows ? this.rows.get(id, load) : load();
  }

  async byEmail(email: string): Promise<UserRow | undefined> {
    return first(this.db.select().from(users).where(eq(users.email, normalizeEmail(email))));
  }

  /**
   * Emails stored before they were NFKC-normalised (only non-ASCII ones can differ), rewritten
   * to their normal form once, at start, so sign-in, the CLI and duplicate checks find them. One
   * whose normal form another account holds is left as it is and logged: that address now reaches
   * the other account, and the operator decides (PATCH /admin/users, runcell admin).
   */
  async normalizeStoredEmails(log?: Logger): Promise<number> {
    const nonAscii = isPostgres(this.db) ? sql`${users.email} ~ '[^ -~]'` : sql`${users.email} GLOB '*[^ -~]*'`;
    let changed = 0;
    for (const u of await this.db.select({ id: users.id, email: users.email }).from(users).where(nonAscii)) {
      const e = normalizeEmail(u.email);
      if (e === u.email) continue;
      if (await first(this.db.select({ id: users.id }).from(users).where(eq(users.email, e)))) {
        log?.warn("an account's email differs from another account's only in its spelling; left as it is", { user_id: u.id });
        continue;
      }
      await this.db.update(users).set({ email: e }).where(eq(users.id, u.id));
      changed++;
    }
    if (changed) log?.info("account emails normalised (NFKC)", { accounts: changed });
    return changed;
  }

  /** The id of the account made first (ids are time-ordered), if any. */
  async firstId(): Promise<string | undefined> {
    return (await first(this.db.select({ id: users.id }).from(users).orderBy(asc(users.id))))?.id;
  }

  async count(): Promise<number> {
    return (await first(this.db.select({ n: count() }).from(users)))!.n;
  }

  /**
   * Creates an account; validates every field. A password of null makes an OAuth-only account.
   * With `origin` (the operator: /admin/users, the CLI) it is audited as user.created; sign-up,
   * setup and OAuth audit their own actions.
   */
  async create(input: { email: unknown; name?: unknown; password: unknown | null; role?: Role; emailVerified?: boolean }, origin?: AuditOrigin): Promise<UserRow> {
    const email = validateEmail(input.email);
    const password = input.password === null ? null : validatePassword(input.password);
    const name = validateName(input.name, email.split("@")[0]!);
    if (await this.byEmail(email)) throw Errors.validation("email", "An account with this email already exists");
    const hash = password === null ? null : await hashPassword(password);
    const now = this.now();
    const row = { id: newId("user"), email, name, password_hash: hash, role: input.role ?? "user", disabled: false, email_verified: input.emailVerified ?? false, created_at: now, updated_at: now } as const;
    try {
      await this.db.insert(users).values(row);
    } catch (e) {
      // Two sign-ups racing for one email: the unique index decides.
      if (isUniqueViolation(e)) throw Errors.validation("email", "An account with this email already exists");
      throw e;
    }
    if (origin) await this.audit?.record({ ...origin, actor: origin.actor ?? "admin", action: "user.created", user_id: row.id, target_id: row.id, details: { email, role: row.role } });
    return (await this.byId(row.id))!;
  }

  /** Audited as user.password_changed (actor: the user themself unless `origin` says otherwise). */
  async setPassword(id: string, password: unknown, origin: AuditOrigin = {}) {
    const hash = await hashPassword(validatePassword(password));
    await this.db.update(users).set({ password_hash: hash, updated_at: this.now() }).where(eq(users.id, id));
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "user.password_changed", user_id: id, target_id: id });
  }

  async update(id: string, patch: Partial<Pick<UserRow, "role" | "disabled" | "name" | "email_verified">>): Promise<void> {
    await this.db.update(users).set({ ...patch, updated_at: this.now() }).where(eq(users.id, id));
  }

  /** Every account, newest first (the admin list). */
  async list(p: PageParams): Promise<Page<AdminUser>> {
    const k = keyset(users.id, undefined, p);
    const rows = await this.db.select().from(users).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    return toPage(rows, k.limit, adminUser);
  }

  /**
   * The admin change of role and/or disabled. Unknown id: NOT_FOUND. Disabling an enabled user
   * runs the `onDisabled` hooks after the row is written (the per-request checks already refuse
   * the user from then on; the hooks close what is open). Each actual change is audited
   * (user.role_changed, user.disabled, user.enabled; actor: the operator unless `origin` says).
   */
  async adminPatch(id: string, patch: AdminUserPatch, origin: AuditOrigin = {}): Promise<UserRow> {
    const { before, set } = await this.patchRow(id, patch);
    const audit = (action: "user.role_changed" | "user.disabled" | "user.enabled" | "user.policy_changed", details?: Record<string, unknown>) =>
      this.audit?.record({ ...origin, actor: origin.actor ?? "admin", action, user_id: id, target_id: id, details });
    if (patch.role !== undefined && patch.role !== before.role) await audit("user.role_changed", { from: before.role, to: patch.role });
    if (patch.disabled !== undefined && patch.disabled !== before.disabled) await audit(patch.disabled ? "user.disabled" : "user.enabled");
    if (set.policy !== undefined && JSON.stringify(set.policy) !== JSON.stringify(before.policy)) await audit("user.policy_changed", { from: before.policy, to: set.policy });
    if (patch.disabled === true && !before.disabled) for (const f of this.onDisabled) await f(id);
    if (patch.disabled === false && before.disabled) for (const f of this.onEnabled) await f(id);
    if (patch.role !== undefined && patch.role !== before.role && !(patch.disabled === true && !before.disabled)) for (const f of this.onRoleChanged) await f(id);
    return (await this.byId(id))!;
  }

  /**
   * The admin change read, merged (the policy overrides) and written as one unit, so that of two
   * concurrent patches neither loses the other's overrides: the row before it and what was set.
   * NOT_FOUND for an unknown id.
   */
  private async patchRow(id: string, patch: AdminUserPatch): Promise<{ before: UserRow; set: Partial<Pick<UserRow, "role" | "disabled" | "policy">> }> {
    return transact(this.db, (tx) => patchUserRow(tx, id, patch, this.now()), { immediate: true });
  }
}

/**
 * Reads the user, merges the patch into it and writes what changed. On PostgreSQL the read takes
 * the row's lock (FOR NO KEY UPDATE), so a concurrent patch waits and merges into this one's
 * result instead of both merging into the same stale overrides; SQLite's immediate transaction
 * already holds the write lock from the start.
 */
function* patchUserRow(tx: DB, id: string, patch: AdminUserPatch, now: number): Unit<{ before: UserRow; set: Partial<Pick<UserRow, "role" | "disabled" | "policy">> }> {
  const read = tx.select().from(users).where(eq(users.id, id));
  const before = yield* firstOf(isPostgres(tx) ? forNoKeyUpdate(read) : read);
  if (!before) throw Errors.notFound("User", id);
  const set: Partial<Pick<UserRow, "role" | "disabled" | "policy">> = {};
  if (patch.role !== undefined) set.role = patch.role;
  if (patch.disabled !== undefined) set.disabled = patch.disabled;
  if (patch.policy !== undefined) set.policy = mergeOverrides(before.policy, patch.policy);
  if (Object.keys(set).length) yield* run(tx.update(users).set({ ...set, updated_at: now }).where(eq(users.id, id)));
  return { before, set };
}

export interface AdminUserPatch {
  role?: Role;
  disabled?: boolean;
  /** Overrides to merge: a field set to null goes back to the operator's setting; null clears them all. */
  policy?: Record<string, unknown> | null;
}

/** The user's overrides after a patch (null when none are left). */
export function mergeOverrides(current: PolicyOverrides | null, patch: Record<string, unknown> | null): PolicyOverrides | null {
  if (patch === null) return null;
  const next: Record<string, unknown> = { ...(current ?? {}) };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete next[k];
    else next[k] = v;
  }
  return Object.keys(next).length ? (next as PolicyOverrides) : null;
}

/**
 * Whether `e` is a unique-constraint violation: SQLite's "UNIQUE constraint failed" or PostgreSQL's
 * SQLSTATE 23505, found on the error or any error in its `cause` chain (drizzle wraps driver errors
 * in a DrizzleQueryError whose `cause` is the driver's).
 */
export function isUniqueViolation(e: unknown): boolean {
  if (e instanceof AppError) return false;
  for (let err: unknown = e, depth = 0; err instanceof Error && depth < 8; err = err.cause, depth++) {
    if (err.message.includes("UNIQUE constraint failed")) return true;
    const { code, errno } = err as { code?: unknown; errno?: unknown };
    if (code === "23505" || errno === "23505") return true;
  }
  return false;
}
