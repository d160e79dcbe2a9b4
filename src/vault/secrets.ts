/**
 * The secrets vault. Values are sealed with AES-256-GCM (src/lib/sealer.ts) under the data dir's
 * key file, with additional authenticated data binding each value to its owner and name
 * (`vault:<user_id>:<name>`), so a row copied to another user or renamed does not decrypt. Values
 * are never returned by the API, never logged, never put in events or error bodies; they leave the
 * vault only through resolveEnv / resolveApiKey / valuesFor, which the runtime calls.
 */
import { and, count, desc, eq, lt, or } from "drizzle-orm";
import { affected, type DB, first } from "../db/client.ts";
import type { PageParams, Page } from "../db/paginate.ts";
import { type EnvValue, type ModelConfig } from "../db/schema.ts";
import { forNoKeyUpdate } from "../db/row-lock.ts";
import { secrets, users } from "../db/tables.ts";
import { all, first as firstOf, isPostgres, run, transact, type Unit } from "../db/unit.ts";
import { Errors } from "../lib/errors.ts";
import type { Logger } from "../log.ts";
import type { Sealer } from "../lib/sealer.ts";
import { iso } from "../lib/time.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";
import type { SecretRecord } from "../schema/secret.ts";
import { checkSecretName, checkSecretValue, SECRETS_PER_USER } from "./names.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";

export type { SecretRecord };

/** Server environment variable that holds each provider's key when a profile names no secret. */
export const PROVIDER_ENV_KEY: Record<ModelConfig["provider"], string | null> = {
  anthropic: "ANTHROPIC_API_KEY",
  openai: "OPENAI_API_KEY",
  demo: null,
};

/** The providers' own API origins: the server's key is only ever sent there. */
export const PROVIDER_ORIGIN: Record<ModelConfig["provider"], string | null> = {
  anthropic: "https://api.anthropic.com",
  openai: "https://api.openai.com",
  demo: null,
};

/** A model's API key (null: none to send) and whether it is the server's own. */
export interface ModelKey {
  key: string | null;
  serverPaid: boolean;
}

export const aadFor = (userId: string, name: string) => `vault:${userId}:${name}`;

export class Secrets {
  constructor(
    private db: DB,
    private sealer: Sealer,
    private log: Logger,
    private now: () => number,
    private audit?: AuditSink,
  ) {}

  /** Creates or replaces a secret. Returns whether it was created. Audited as secret.set (the name only). */
  async put(userId: string, name: unknown, value: unknown, origin: AuditOrigin = {}): Promise<{ created: boolean }> {
    const n = checkSecretName(name, "name");
    const v = checkSecretValue(value);
    const sealed = this.sealer.seal(v, aadFor(userId, n));
    const at = this.now();
    const created = await transact(this.db, (tx) => putSecret(tx, userId, n, sealed, at), { immediate: true });
    this.log.info(created ? "secret created" : "secret replaced", { user_id: userId, secret_name: n });
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "secret.set", user_id: userId, target_id: n, details: { name: n, created } });
    return { created };
  }

  /** Names and times only, newest first; `cursor` is the opaque next_cursor of the previous page. */
  async list(userId: string, p: PageParams): Promise<Page<SecretRecord>> {
    const limit = p.limit ?? 20;
    let where = eq(secrets.user_id, userId);
    if (p.cursor) {
      const c = decodeCursor(p.cursor);
      if (!c) throw Errors.validation("cursor", "cursor is not a next_cursor of this list", { reason: "invalid cursor", in: "query" });
      where = and(where, or(lt(secrets.created_at, c.at), and(eq(secrets.created_at, c.at), lt(secrets.name, c.name))))!;
    }
    const rows = await this.db
      .select({ name: secrets.name, created_at: secrets.created_at, updated_at: secrets.updated_at })
      .from(secrets)
      .where(where)
      .orderBy(desc(secrets.created_at), desc(secrets.name))
      .limit(limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      data: page.map((r) => ({ name: r.name, created_at: iso(r.created_at), updated_at: iso(r.updated_at) })),
      next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.name) : null,
    };
  }

  /** Deletes the caller's secret; a missing one (or deleted twice) is NOT_FOUND. Audited as secret.deleted. */
  async delete(userId: string, name: unknown, origin: AuditOrigin = {}): Promise<void> {
    const n = checkSecretName(name, "name");
    const res = await this.db.delete(secrets).where(and(eq(secrets.user_id, userId), eq(secrets.name, n)));
    if (affected(res) === 0) throw Errors.notFound("Secret", n);
    this.log.info("secret deleted", { user_id: userId, secret_name: n });
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "secret.deleted", user_id: userId, target_id: n, details: { name: n } });
  }

  /**
   * The decrypted value, or null when the user has no such secret. A value that does not decrypt
   * (key file replaced, row tampered with or copied) throws VALIDATION_FAILED on `field`.
   */
  private async reveal(userId: string, name: string, field: string): Promise<string | null> {
    const row = await first(this.db.select({ ciphertext: secrets.ciphertext }).from(secrets).where(and(eq(secrets.user_id, userId), eq(secrets.name, name))));
    if (!row) return null;
    try {
      return this.sealer.open(row.ciphertext, aadFor(userId, name));
    } catch {
      this.log.warn("secret does not decrypt", { user_id: userId, secret_name: name });
      throw Errors.validation(field, `Secret "${name}" cannot be decrypted (was the server's key file replaced?); store it again with PUT /v1/secrets/${name}`, {
        reason: "undecryptable secret",
        secret_name: name,
      });
    }
  }

  /**
   * The environment a workspace gets from a profile's `env`: literals as they are, `{secret}`
   * references decrypted. A missing secret → VALIDATION_FAILED on `env.<NAME>`, naming the secret.
   */
  async resolveEnv(userId: string, env: Record<string, EnvValue>, field = "env"): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [key, val] of Object.entries(env)) {
      if (typeof val === "string") {
        out[key] = val;
        continue;
      }
      out[key] = await this.secretValue(userId, val.secret, `${field}.${key}`);
    }
    return out;
  }

  /** A named secret's value for runcell's own use (a git credential); missing → VALIDATION_FAILED on `field`. */
  async secretValue(userId: string, name: string, field: string): Promise<string> {
    const value = await this.reveal(userId, name, field);
    if (value === null) throw Errors.validation(field, `${field} names the secret "${name}", which is not in your vault: store it with PUT /v1/secrets/${name}`, { reason: "missing secret", secret_name: name });
    return value;
  }

  /**
   * Whether the profile's model requests would go out on the server's own key (ANTHROPIC_API_KEY /
   * OPENAI_API_KEY, read now): no api_key_secret, the provider's own API (no base_url, or its
   * official origin) and the key set. The one rule of "server-paid": resolveApiKey hands out the
   * server's key exactly then, and the monthly spend cap counts and checks exactly those requests.
   */
  paidByServer(model: ModelConfig): boolean {
    if (model.api_key_secret) return false;
    const envKey = PROVIDER_ENV_KEY[model.provider];
    if (!envKey || !process.env[envKey]) return false;
    return !model.base_url || sameOrigin(model.base_url, PROVIDER_ORIGIN[model.provider]);
  }

  /**
   * The API key for a profile's model, and whether it is the server's own (`serverPaid`, the
   * monthly spend cap's concern): the vault secret `api_key_secret` when set (missing →
   * VALIDATION_FAILED on model.api_key_secret); else the server's ANTHROPIC_API_KEY /
   * OPENAI_API_KEY (read now), but only when the model talks to that provider's own API — the
   * server's key is never sent to a custom base_url; else null (demo, or a keyless local server).
   */
  async resolveApiKey(userId: string, model: ModelConfig): Promise<ModelKey> {
    if (model.api_key_secret) {
      const value = await this.reveal(userId, model.api_key_secret, "model.api_key_secret");
      if (value === null) {
        throw Errors.validation(
          "model.api_key_secret",
          `model.api_key_secret names the secret "${model.api_key_secret}", which is not in your vault: store it with PUT /v1/secrets/${model.api_key_secret}`,
          { reason: "missing secret", secret_name: model.api_key_secret },
        );
      }
      return { key: value, serverPaid: false };
    }
    if (!this.paidByServer(model)) return { key: null, serverPaid: false };
    return { key: process.env[PROVIDER_ENV_KEY[model.provider]!]!, serverPaid: true };
  }

  /** Every value of the user's vault, for scrubbing streamed and persisted output. */
  async valuesFor(userId: string): Promise<string[]> {
    const rows = await this.db.select({ name: secrets.name, ciphertext: secrets.ciphertext }).from(secrets).where(eq(secrets.user_id, userId));
    const out: string[] = [];
    for (const r of rows) {
      try {
        out.push(this.sealer.open(r.ciphertext, aadFor(userId, r.name)));
      } catch {
        this.log.warn("secret does not decrypt", { user_id: userId, secret_name: r.name });
      }
    }
    return out;
  }
}

/**
 * Creates or replaces one sealed secret within the per-user limit: the existence check, the count
 * and the upsert commit together. Returns whether it was created. SQLite's immediate transaction
 * holds the write lock from the start; on PostgreSQL the owner's users row is locked first
 * (FOR NO KEY UPDATE, a PostgreSQL-only step), so two servers adding a user's secrets at once
 * count one after the other and cannot both pass the limit.
 */
function* putSecret(tx: DB, userId: string, name: string, sealed: Buffer, at: number): Unit<boolean> {
  if (isPostgres(tx)) yield* all(forNoKeyUpdate(tx.select({ id: users.id }).from(users).where(eq(users.id, userId))));
  const exists = (yield* firstOf(tx.select({ name: secrets.name }).from(secrets).where(and(eq(secrets.user_id, userId), eq(secrets.name, name))))) !== undefined;
  if (!exists && ((yield* firstOf(tx.select({ n: count() }).from(secrets).where(eq(secrets.user_id, userId))))?.n ?? 0) >= SECRETS_PER_USER) {
    throw Errors.validation("name", `You already have ${SECRETS_PER_USER} secrets, the most a user may keep; delete some first`, { reason: "limit", limit: SECRETS_PER_USER });
  }
  yield* run(
    tx
      .insert(secrets)
      .values({ user_id: userId, name, ciphertext: sealed, created_at: at, updated_at: at })
      .onConflictDoUpdate({ target: [secrets.user_id, secrets.name], set: { ciphertext: sealed, updated_at: at } }),
  );
  return !exists;
}

function sameOrigin(url: string, origin: string | null): boolean {
  if (!origin) return false;
  try {
    return new URL(url).origin === origin;
  } catch {
    return false;
  }
}
