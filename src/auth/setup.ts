/**
 * First run, like PocketBase's installer link: while the server has no account, every start of
 * `serve` issues a fresh one-time setup token (256 random bits, valid 30 minutes; only its SHA-256
 * is stored, in `settings`) and prints `{public_url}/setup#<token>`. The token sits in the URL
 * fragment, so it never reaches a server log or a Referer. The setup page posts it to
 * `POST /api/auth/setup`, which creates the first account with the admin role and signs it in.
 * The token is single use (consumed atomically before the account is created) and is refused
 * once any account exists (made by the CLI, for instance).
 */
import { eq } from "drizzle-orm";
import { type DB, first } from "../db/client.ts";
import { settings } from "../db/tables.ts";
import { forNoKeyUpdate } from "../db/row-lock.ts";
import { first as firstOf, isPostgres, run, transact, type Unit } from "../db/unit.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { randomToken, safeEqual, sha256Hex } from "../lib/crypto.ts";
import { iso } from "../lib/time.ts";
import type { AuditSink } from "../schema/audit.ts";
import { type Accounts, type ClientMeta, type SignedIn, userAgentDetail } from "./accounts.ts";
import { validateEmail, validateName, validatePassword, type Users } from "./users.ts";

export const SETUP_TTL_MS = 30 * 60_000;
const KEY = "setup_token";

interface Stored {
  hash: string;
  expires_at: number;
}

export interface IssuedSetupLink {
  url: string;
  token: string;
  expires_at: string;
}

export class SetupLinks {
  constructor(
    private db: DB,
    private users: Users,
    private accounts: Accounts,
    private publicUrl: string,
    private now: () => number,
    private audit?: AuditSink,
  ) {}

  /** True while the server has no account. */
  async required(): Promise<boolean> {
    return (await this.users.count()) === 0;
  }

  private async stored(): Promise<Stored | undefined> {
    const row = await first(this.db.select({ value: settings.value }).from(settings).where(eq(settings.key, KEY)));
    return row?.value as Stored | undefined;
  }

  /** A fresh link replacing any earlier one, or null when an account already exists. */
  async issue(): Promise<IssuedSetupLink | null> {
    if (!(await this.required())) {
      await this.db.delete(settings).where(eq(settings.key, KEY));
      return null;
    }
    const token = randomToken(32);
    const value: Stored = { hash: sha256Hex(token), expires_at: this.now() + SETUP_TTL_MS };
    await this.db
      .insert(settings)
      .values({ key: KEY, value, updated_at: this.now() })
      .onConflictDoUpdate({ target: settings.key, set: { value, updated_at: this.now() } });
    return { url: `${this.publicUrl}/setup#${token}`, token, expires_at: iso(value.expires_at) };
  }

  /**
   * Creates the first account (role admin) for a valid token and signs it in. Errors: bad input
   * 400 (the token is not spent), an unknown, used or expired token 401, a server that already
   * has an account 403. Audited as auth.setup.
   */
  async complete(input: { token: string; email: unknown; password: unknown; name?: unknown }, meta: ClientMeta): Promise<SignedIn> {
    const email = validateEmail(input.email);
    const password = validatePassword(input.password);
    const name = validateName(input.name, email.split("@")[0]!);
    if (!(await this.required())) throw Errors.forbidden("This server is already set up: sign in instead");
    const s = await this.stored();
    const presented = sha256Hex(input.token);
    if (!s || !safeEqual(s.hash, presented)) throw Errors.unauthorized("This setup link is not valid (it was replaced by a newer one or already used)");
    if (s.expires_at <= this.now()) throw Errors.unauthorized("This setup link has expired: restart `runcell serve` to print a new one");
    // Spend the token first: of two concurrent requests with it, only one gets here.
    if (!(await transact(this.db, (tx) => spendToken(tx, s.hash), { immediate: true }))) throw Errors.unauthorized("This setup link has already been used");
    try {
      const user = await this.users.create({ email, name, password, role: "admin", emailVerified: true });
      const signedIn = await this.accounts.sessionFor(user, meta);
      await this.audit?.record({ action: "auth.setup", actor: "user", user_id: user.id, target_id: user.id, ip: meta.ip, details: { email, role: user.role, ...userAgentDetail(meta) } });
      return signedIn;
    } catch (e) {
      // Nothing was created: put the link back so the operator can retry with other input.
      if (e instanceof AppError && (await this.required())) {
        await this.db.insert(settings).values({ key: KEY, value: s, updated_at: this.now() }).onConflictDoNothing();
      }
      throw e;
    }
  }
}

/**
 * Deletes the stored setup token if it is still the one whose hash is `hash`: the read and the
 * delete commit together (compared in code, not with the databases' different JSON functions).
 * On PostgreSQL the read locks the row, so a concurrent spend waits and then finds it gone;
 * SQLite's immediate transaction holds the write lock from the start. True when this call spent it.
 */
function* spendToken(tx: DB, hash: string): Unit<boolean> {
  const read = tx.select({ value: settings.value }).from(settings).where(eq(settings.key, KEY));
  const row = yield* firstOf(isPostgres(tx) ? forNoKeyUpdate(read) : read);
  if ((row?.value as Stored | undefined)?.hash !== hash) return false;
  return (yield* run(tx.delete(settings).where(eq(settings.key, KEY)))) === 1;
}
