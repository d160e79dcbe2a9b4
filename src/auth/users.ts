/** User accounts: creation with validation, lookup, and the public user record. */
import { count, eq, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { users } from "../db/schema.ts";
import { ApiError, Errors } from "../http/errors.ts";
import { iso } from "../lib/time.ts";
import { hashPassword, PASSWORD_MAX, PASSWORD_MIN } from "./passwords.ts";

export type UserRow = typeof users.$inferSelect;
export type Role = UserRow["role"];

export interface PublicUser {
  id: string;
  email: string;
  name: string;
  role: Role;
  created_at: string;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function validateEmail(email: unknown): string {
  if (typeof email !== "string") throw Errors.validation("email", "email is required");
  const e = normalizeEmail(email);
  if (e.length > 254 || !EMAIL.test(e)) throw Errors.validation("email", "email is not a valid address");
  return e;
}

export function validatePassword(password: unknown): string {
  if (typeof password !== "string") throw Errors.validation("password", "password is required");
  if (password.length < PASSWORD_MIN) throw Errors.validation("password", `password must be at least ${PASSWORD_MIN} characters`);
  if (password.length > PASSWORD_MAX) throw Errors.validation("password", `password must be at most ${PASSWORD_MAX} characters`);
  return password;
}

export function validateName(name: unknown, fallback: string): string {
  if (name === undefined || name === null || name === "") return fallback;
  if (typeof name !== "string") throw Errors.validation("name", "name must be a string");
  const n = name.trim();
  if (n.length > 200) throw Errors.validation("name", "name must be at most 200 characters");
  return n || fallback;
}

export function publicUser(u: { id: string; email: string; name: string; role: Role; created_at: number }): PublicUser {
  return { id: u.id, email: u.email, name: u.name, role: u.role, created_at: iso(u.created_at) };
}

export class Users {
  private byIdStmt;
  private byEmailStmt;

  constructor(
    private db: DB,
    private now: () => number,
  ) {
    this.byIdStmt = db.select().from(users).where(eq(users.id, sql.placeholder("id"))).prepare();
    this.byEmailStmt = db.select().from(users).where(eq(users.email, sql.placeholder("email"))).prepare();
  }

  byId(id: string): UserRow | undefined {
    return this.byIdStmt.get({ id });
  }

  byEmail(email: string): UserRow | undefined {
    return this.byEmailStmt.get({ email: normalizeEmail(email) });
  }

  count(): number {
    return this.db.select({ n: count() }).from(users).get()!.n;
  }

  /** Creates an account; validates every field. A password of null makes an OAuth-only account. */
  async create(input: { email: unknown; name?: unknown; password: unknown | null; role?: Role; emailVerified?: boolean }): Promise<UserRow> {
    const email = validateEmail(input.email);
    const password = input.password === null ? null : validatePassword(input.password);
    const name = validateName(input.name, email.split("@")[0]!);
    if (this.byEmail(email)) throw Errors.validation("email", "An account with this email already exists");
    const hash = password === null ? null : await hashPassword(password);
    const now = this.now();
    const row = { id: newId("user"), email, name, password_hash: hash, role: input.role ?? "user", disabled: false, email_verified: input.emailVerified ?? false, created_at: now, updated_at: now } as const;
    try {
      this.db.insert(users).values(row).run();
    } catch (e) {
      // Two sign-ups racing for one email: the unique index decides.
      if (String((e as Error).message).includes("UNIQUE")) throw Errors.validation("email", "An account with this email already exists");
      throw e;
    }
    return this.byId(row.id)!;
  }

  async setPassword(id: string, password: unknown) {
    const hash = await hashPassword(validatePassword(password));
    this.db.update(users).set({ password_hash: hash, updated_at: this.now() }).where(eq(users.id, id)).run();
  }

  update(id: string, patch: Partial<Pick<UserRow, "role" | "disabled" | "name" | "email_verified">>) {
    this.db.update(users).set({ ...patch, updated_at: this.now() }).where(eq(users.id, id)).run();
  }
}

export const isUniqueViolation = (e: unknown) => e instanceof Error && !(e instanceof ApiError) && e.message.includes("UNIQUE constraint failed");
