/**
 * Webhook integrations: one per user. A second POST replaces the first (same id, new url and
 * secret; deliveries still pending go to the new URL). The secret is sealed at rest with the
 * integration and its owner as associated data and never leaves the server (`has_secret` only).
 * Deleting the integration fails its pending deliveries with a reason, in the same transaction.
 */
import { and, eq } from "drizzle-orm";
import type { Sealer } from "../lib/sealer.ts";
import { isUniqueViolation } from "../auth/users.ts";
import { type DB, first } from "../db/client.ts";
import { preparedLookup } from "../db/prepared.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { type IntegrationRow } from "../db/schema.ts";
import { integrations } from "../db/tables.ts";
import { driveAsync, first as firstOf, run, transact, type Unit } from "../db/unit.ts";
import { Errors } from "../lib/errors.ts";
import { iso } from "../lib/time.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";
import { type IntegrationRecord, SECRET_MAX } from "../schema/integration.ts";
import { BlockedAddressError, checkedAddresses, type NetworkPolicy, parseWebhookUrl, ResolveError } from "../lib/ssrf.ts";
import type { Outbox } from "./outbox.ts";

export { SECRET_MAX };
export type { IntegrationRecord };

export interface IntegrationInput {
  type?: unknown;
  config?: { url?: unknown; secret?: unknown } | null;
}

type Row = IntegrationRow;

/** The associated data a webhook secret is sealed with: bound to its integration and owner. */
export const integrationAad = (id: string, userId: string) => `integration:${id}:${userId}`;
const aad = integrationAad;

export function toRecord(r: Row): IntegrationRecord {
  return { id: r.id, type: "webhook", config: { url: r.url, has_secret: r.secret_ciphertext != null }, created_at: iso(r.created_at), updated_at: iso(r.updated_at) };
}

/** Opened secrets kept by their sealed form (the row is read at every delivery: another replica may have replaced it). */
const OPENED_MAX = 1000;

export class Integrations {
  private opened = new Map<string, string>();
  /** The hot reads (every delivery, every enqueue) as statements prepared once on SQLite. */
  private byIdAndUser: ReturnType<typeof preparedLookup<typeof integrations, "id" | "user_id">>;
  private byUser: ReturnType<typeof preparedLookup<typeof integrations, "user_id">>;

  constructor(
    private db: DB,
    private sealer: Sealer,
    private outbox: Outbox,
    private net: NetworkPolicy,
    private now: () => number,
    private audit?: AuditSink,
  ) {
    this.byIdAndUser = preparedLookup(db, integrations, ["id", "user_id"]);
    this.byUser = preparedLookup(db, integrations, ["user_id"]);
  }

  private byId(id: string, userId: string): Promise<Row | undefined> {
    return first(this.db.select().from(integrations).where(and(eq(integrations.id, id), eq(integrations.user_id, userId))));
  }

  /** Validates the URL (syntax, then the SSRF guard on every resolved address). */
  async validate(input: IntegrationInput): Promise<{ url: string; secret: string | null }> {
    if (input.type !== "webhook") throw Errors.validation("type", `type must be "webhook" (the only integration type)`, { allowed: ["webhook"] });
    const cfg = input.config;
    if (!cfg || typeof cfg !== "object") throw Errors.validation("config", "config is required: {url, secret?}");
    if (typeof cfg.url !== "string" || cfg.url.trim() === "") throw Errors.validation("config.url", "config.url is required");
    const parsed = parseWebhookUrl(cfg.url);
    if ("error" in parsed) throw Errors.validation("config.url", parsed.error);
    let secret: string | null = null;
    if (cfg.secret !== undefined && cfg.secret !== null) {
      if (typeof cfg.secret !== "string" || cfg.secret.length === 0) throw Errors.validation("config.secret", "config.secret must be a non-empty string (omit it for unsigned deliveries)");
      if (cfg.secret.length > SECRET_MAX) throw Errors.validation("config.secret", `config.secret must be at most ${SECRET_MAX} characters`);
      secret = cfg.secret;
    }
    if (this.net.guard) {
      try {
        await checkedAddresses(parsed.url, this.net);
      } catch (e) {
        if (e instanceof BlockedAddressError) {
          throw Errors.validation(
            "config.url",
            `config.url is refused: ${e.message}. Webhooks may only target public addresses (an operator can allow private ones with --allow-private-webhooks)`,
            { reason: e.reason },
          );
        }
        if (e instanceof ResolveError) throw Errors.validation("config.url", `config.url is refused: ${e.message}`, { reason: "unresolvable" });
        throw e;
      }
    }
    return { url: parsed.url.href, secret };
  }

  /**
   * Creates or replaces the user's webhook. `created` is false when it replaced one. Audited as
   * integration.changed with the URL's origin only (a webhook's path or query is often its secret).
   */
  async upsert(userId: string, input: IntegrationInput, origin: AuditOrigin = {}): Promise<{ record: IntegrationRecord; created: boolean }> {
    const { url, secret } = await this.validate(input);
    const now = this.now();
    let out: { existing: Row | undefined; row: Row };
    try {
      out = await transact(this.db, (tx) => this.put(tx, userId, url, secret, now));
    } catch (e) {
      // Two first POSTs at once (PostgreSQL: both read "none"): the loser replaces the winner's.
      if (!isUniqueViolation(e)) throw e;
      out = await transact(this.db, (tx) => this.put(tx, userId, url, secret, now));
    }
    const { existing, row } = out;
    const id = row.id;
    await this.audit?.record({
      ...origin,
      actor: origin.actor ?? "user",
      action: "integration.changed",
      user_id: userId,
      target_id: id,
      details: { type: "webhook", created: !existing, url_origin: new URL(url).origin, has_secret: secret != null },
    });
    return { record: toRecord(row), created: !existing };
  }

  /**
   * Writes the user's webhook: updates the one there is (same id) or inserts one, and reads it back.
   * The read and the write commit together (the secret is sealed with the id the read decided).
   */
  private *put(tx: DB, userId: string, url: string, secret: string | null, now: number): Unit<{ existing: Row | undefined; row: Row }> {
    const existing = yield* firstOf(tx.select().from(integrations).where(eq(integrations.user_id, userId)).limit(1));
    const id = existing?.id ?? newId("integration");
    const sealed = secret == null ? null : this.sealer.seal(secret, aad(id, userId));
    if (existing) {
      yield* run(tx.update(integrations).set({ url, secret_ciphertext: sealed, updated_at: now }).where(eq(integrations.id, id)));
    } else {
      yield* run(tx.insert(integrations).values({ id, user_id: userId, type: "webhook", url, secret_ciphertext: sealed, created_at: now, updated_at: now }));
    }
    const row = yield* firstOf(tx.select().from(integrations).where(eq(integrations.id, id)).limit(1));
    return { existing, row: row! };
  }

  async list(userId: string, p: PageParams): Promise<Page<IntegrationRecord>> {
    const k = keyset(integrations.id, eq(integrations.user_id, userId), p);
    const rows = await this.db.select().from(integrations).where(k.where).orderBy(k.orderBy).limit(k.fetch);
    return toPage(rows, k.limit, toRecord);
  }

  async get(userId: string, id: string): Promise<IntegrationRecord> {
    const row = await this.byId(id, userId);
    if (!row) throw Errors.notFound("Integration", id);
    return toRecord(row);
  }

  /** The user's webhook id, if any. */
  async idForUser(userId: string): Promise<string | null> {
    return driveAsync(this.idForUserIn(this.db, userId));
  }

  /** `idForUser` as a unit (a read inside the caller's transaction: enqueue's). */
  *idForUserIn(tx: DB, userId: string): Unit<string | null> {
    // On SQLite the prepared statement runs on the one connection, so inside the caller's transaction.
    return (yield* firstOf(this.byUser([userId], tx)))?.id ?? null;
  }

  /**
   * Where and how to deliver: the URL and the opened secret as the row holds them now, or null when
   * the integration is gone. Read at every delivery (one indexed read beside an HTTP POST): a
   * replacement made on this or any other replica applies to the very next attempt.
   */
  async target(id: string, userId: string): Promise<{ url: string; secret: string | null } | null> {
    // A statement prepared once (SQLite): the read stays, only drizzle's building of it per call goes.
    const [row] = await this.byIdAndUser([id, userId]);
    if (!row) return null;
    return { url: row.url, secret: row.secret_ciphertext ? this.open(row.secret_ciphertext, id, userId) : null };
  }

  /** The secret of a sealed value (its AAD binds it to the integration and its owner), opened once per sealed value. */
  private open(sealed: Uint8Array, id: string, userId: string): string {
    const key = `${id}:${userId}:${Buffer.from(sealed).toString("base64")}`;
    let secret = this.opened.get(key);
    if (secret === undefined) {
      secret = this.sealer.open(sealed, aad(id, userId));
      if (this.opened.size >= OPENED_MAX) this.opened.delete(this.opened.keys().next().value!);
      this.opened.set(key, secret);
    }
    return secret;
  }

  /** Deletes the caller's integration and fails its pending deliveries. Twice → 404. Audited as integration.deleted. */
  async delete(userId: string, id: string, origin: AuditOrigin = {}): Promise<{ failed: number }> {
    const out = await transact(this.db, (tx) => this.remove(tx, userId, id, this.now()));
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "integration.deleted", user_id: userId, target_id: id, details: { failed_deliveries: out.failed } });
    return out;
  }

  /** Deletes the integration and fails its pending deliveries, together; NOT_FOUND when it is not the user's. */
  private *remove(tx: DB, userId: string, id: string, now: number): Unit<{ failed: number }> {
    const deleted = yield* run(tx.delete(integrations).where(and(eq(integrations.id, id), eq(integrations.user_id, userId))));
    if (deleted === 0) throw Errors.notFound("Integration", id);
    const failed = yield* this.outbox.failForIntegration(tx, id, `the webhook integration ${id} was deleted before this notification was delivered`, now);
    return { failed };
  }
}
