/**
 * API tokens: `rc_` + 64 hex = 56 hex of randomness (224 bits) + an 8-hex CRC32 of those 56, so a
 * secret scanner can recognise a real token offline and a mistyped one is refused before any
 * database read. Stored as the interface says: bcrypt (cost 10) of the whole token, next to a
 * non-secret lookup prefix (the first 16 hex) with a unique index, so verifying costs one indexed
 * read and at most one bcrypt compare. Verified tokens are cached for up to 60 s under the
 * SHA-256 of the token (a hit is answered from memory, without a promise); deleting a token
 * evicts it at once. Refused tokens (well-formed, but no
 * such lookup or a failed compare) are cached the same way for 60 s, so a forged token that reuses
 * a real token's lookup prefix costs one bcrypt compare, not one per request; and the caller can
 * pass a `beforeCompare` hook (the rate limit of the client's address) that runs, and may throw,
 * before any compare is spent.
 */
import { and, eq, sql } from "drizzle-orm";
import type { DB } from "../db/client.ts";
import { newId } from "../db/ids.ts";
import { keyset, type Page, type PageParams, toPage } from "../db/paginate.ts";
import { apiTokens, users } from "../db/tables.ts";
import { first } from "../db/client.ts";
import type { UserRow } from "./users.ts";
import { Errors } from "../lib/errors.ts";
import { randomHex, sha256Hex } from "../lib/crypto.ts";
import { iso } from "../lib/time.ts";
import type { CreatedToken, TokenRecord } from "../schema/api-token.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";

const TOKEN_SHAPE = /^rc_[0-9a-f]{64}$/;
const CACHE_TTL_MS = 60_000;
const CACHE_MAX = 10_000;
const REFUSED_TTL_MS = 60_000;
const REFUSED_MAX = 10_000;
const LAST_USED_EVERY_MS = 60_000;

function crc32Hex(s: string): string {
  return (Bun.hash.crc32(s) >>> 0).toString(16).padStart(8, "0");
}

export function mintTokenString(): string {
  const body = randomHex(28);
  return `rc_${body}${crc32Hex(body)}`;
}

/** Offline check: shape and checksum. */
export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_SHAPE.test(token)) return false;
  const body = token.slice(3, 59);
  return crc32Hex(body) === token.slice(59);
}

export const lookupOf = (token: string) => token.slice(3, 19);

export interface VerifiedToken {
  tokenId: string;
  userId: string;
}

interface CacheEntry extends VerifiedToken {
  expires: number;
}

export interface VerifyOptions {
  /**
   * Runs just before a bcrypt compare would be spent on this token (not on a cache hit, a cached
   * refusal, a malformed token or an unknown lookup); throwing refuses the verification without
   * the compare (the rate limit of the caller's address).
   */
  beforeCompare?: () => void;
}


export class ApiTokens {
  private cache = new Map<string, CacheEntry>();
  /** SHA-256 of a refused token → when the refusal expires. */
  private refused = new Map<string, number>();
  private inflight = new Map<string, Promise<VerifiedToken | null>>();
  private lastUsedWritten = new Map<string, number>();
  private byLookup;
  private touchStmt;
  /** Called with the token id after a delete (open WebSockets close with 4001). */
  onRevoke: ((tokenId: string) => void)[] = [];

  constructor(
    private db: DB,
    private now: () => number,
    private bcryptCost = 10,
    private audit?: AuditSink,
  ) {
    // Prepared once: read on every first use of a token (lookup is unique: one row at most).
    // Both run through `execute()` outside any transaction, which both dialects have (on
    // PostgreSQL drizzle's prepared query is the SQL rendered once, run on the pool).
    this.byLookup = db
      .select({ id: apiTokens.id, user_id: apiTokens.user_id, token_hash: apiTokens.token_hash })
      .from(apiTokens)
      .where(eq(apiTokens.lookup, sql.placeholder("lookup")))
      .limit(1)
      .prepare();
    this.touchStmt = db
      .update(apiTokens)
      .set({ last_used_at: sql`${sql.placeholder("at")}` })
      .where(eq(apiTokens.id, sql.placeholder("id")))
      .prepare();
  }

  /** Audited as token.created (the name, never the token; actor: the owner unless `origin` says). */
  async create(userId: string, name: unknown, origin: AuditOrigin = {}): Promise<CreatedToken> {
    if (typeof name !== "string" || !name.trim()) throw Errors.validation("name", "name is required");
    if (name.length > 100) throw Errors.validation("name", "name must be at most 100 characters");
    if (/[\x00-\x1f\x7f]/.test(name)) throw Errors.validation("name", "name must not contain control characters");
    const token = mintTokenString();
    // Hashed first: the id (which orders the list) and created_at are then taken together.
    const token_hash = await Bun.password.hash(token, { algorithm: "bcrypt", cost: this.bcryptCost });
    const row = {
      id: newId("token"),
      user_id: userId,
      name: name.trim(),
      lookup: lookupOf(token),
      token_hash,
      created_at: this.now(),
      last_used_at: null,
    };
    await this.db.insert(apiTokens).values(row);
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "token.created", user_id: userId, target_id: row.id, details: { name: row.name } });
    return { id: row.id, name: row.name, token, created_at: iso(row.created_at) };
  }

  /**
   * Returns the owner of a valid token, or null. Never throws for a bad token; only
   * `opts.beforeCompare` may throw (and then no compare is spent; a promise then rejects with
   * it). Answers without a promise when memory knows the token (a cached verification, a cached
   * refusal) or its shape is wrong: the usual authenticated request takes no await. Any other
   * token is read from the database (and compared) behind a promise.
   */
  verify(token: string, opts: VerifyOptions = {}): VerifiedToken | null | Promise<VerifiedToken | null> {
    // Memory first (the usual request: its hash is all it costs); the shape and checksum are
    // checked before anything else is spent on a token memory does not know.
    const key = sha256Hex(token);
    const now = this.now();
    const known = this.remembered(key, now);
    if (known !== undefined) return known;
    return isWellFormedToken(token) ? this.verifyMiss(token, key, now, opts) : null;
  }

  /**
   * What memory says of a token: its cached verification, null for a cached refusal, the pending
   * verification of a concurrent first use; undefined when it knows nothing.
   */
  private remembered(key: string, now: number): VerifiedToken | null | Promise<VerifiedToken | null> | undefined {
    const hit = this.cache.get(key);
    if (hit && hit.expires > now) {
      void this.touch(hit.tokenId, now);
      return hit; // (a VerifiedToken; callers only read it)
    }
    if (hit) this.cache.delete(key);
    const refusedUntil = this.refused.get(key);
    if (refusedUntil !== undefined) {
      if (refusedUntil > now) return null;
      this.refused.delete(key);
    }
    // Concurrent first uses of one token share a single bcrypt compare.
    return this.inflight.get(key);
  }

  private async verifyMiss(token: string, key: string, now: number, opts: VerifyOptions): Promise<VerifiedToken | null> {
    const row = (await this.byLookup.execute({ lookup: lookupOf(token) }))[0];
    // A concurrent first use may have got further while the row was read: share its answer.
    const known = this.remembered(key, now);
    if (known !== undefined) return known;
    if (!row) {
      this.refuse(key, now);
      return null;
    }
    opts.beforeCompare?.();
    const p = this.verifySlow(token, row, key, now).finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  private async verifySlow(token: string, row: { id: string; user_id: string; token_hash: string }, key: string, now: number): Promise<VerifiedToken | null> {
    if (!(await Bun.password.verify(token, row.token_hash, "bcrypt"))) {
      this.refuse(key, now);
      return null;
    }
    // Cached before the token is read again, so a delete is seen either way: by that read (then
    // the entry goes), or afterwards by the delete's own eviction.
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(key, { tokenId: row.id, userId: row.user_id, expires: now + CACHE_TTL_MS });
    // Deleted while bcrypt ran: not valid, not cached.
    if (!(await this.byLookup.execute({ lookup: lookupOf(token) }))[0]) {
      this.cache.delete(key);
      return null;
    }
    await this.touch(row.id, now);
    return { tokenId: row.id, userId: row.user_id };
  }

  /** Remembers a refused token for REFUSED_TTL_MS; the oldest entry goes first when full. */
  private refuse(key: string, now: number) {
    this.refused.delete(key);
    if (this.refused.size >= REFUSED_MAX) this.refused.delete(this.refused.keys().next().value!);
    this.refused.set(key, now + REFUSED_TTL_MS);
  }

  /**
   * last_used_at is written at most once a minute per token. Never rejects: a cache hit does not
   * wait for it, and a failed write is tried again at the next use.
   */
  private touch(tokenId: string, now: number): Promise<void> | undefined {
    const last = this.lastUsedWritten.get(tokenId) ?? 0;
    if (now - last < LAST_USED_EVERY_MS) return undefined; // the usual request: no promise made
    this.lastUsedWritten.set(tokenId, now);
    return this.touchStmt.execute({ id: tokenId, at: now }).then(
      () => undefined,
      () => {
        if (this.lastUsedWritten.get(tokenId) === now) this.lastUsedWritten.delete(tokenId);
      },
    );
  }

  async list(userId: string, p: PageParams): Promise<Page<TokenRecord>> {
    const k = keyset(apiTokens.id, eq(apiTokens.user_id, userId), p);
    const rows = await this.db
      .select({ id: apiTokens.id, name: apiTokens.name, created_at: apiTokens.created_at, last_used_at: apiTokens.last_used_at })
      .from(apiTokens)
      .where(k.where)
      .orderBy(k.orderBy)
      .limit(k.fetch);
    return toPage(rows, k.limit, (r) => ({ id: r.id, name: r.name, created_at: iso(r.created_at), last_used_at: iso(r.last_used_at) }));
  }

  /** Deletes the caller's token; someone else's or a missing one is NOT_FOUND. Audited as token.deleted. */
  async delete(userId: string, tokenId: string, origin: AuditOrigin = {}): Promise<void> {
    const [gone] = await this.db.delete(apiTokens).where(and(eq(apiTokens.id, tokenId), eq(apiTokens.user_id, userId))).returning({ name: apiTokens.name });
    if (!gone) throw Errors.notFound("API token", tokenId);
    this.evict(tokenId);
    await this.audit?.record({ ...origin, actor: origin.actor ?? "user", action: "token.deleted", user_id: userId, target_id: tokenId, details: { name: gone.name } });
  }

  /** The enabled-or-not user a token belongs to, or undefined once the token is deleted (by any replica). */
  async owner(tokenId: string): Promise<UserRow | undefined> {
    const row = await first(this.db.select({ user: users }).from(apiTokens).innerJoin(users, eq(users.id, apiTokens.user_id)).where(eq(apiTokens.id, tokenId)));
    return row?.user;
  }

  /** Drops every cached verification of these tokens (delete, user disabled) and tells `onRevoke`. */
  evict(...tokenIds: string[]) {
    this.forget(tokenIds);
    for (const id of tokenIds) for (const f of this.onRevoke) f(id);
  }

  /** Drops the cached verifications of these tokens, nothing else (another replica deleted them). */
  forget(tokenIds: string[]) {
    const ids = new Set(tokenIds);
    for (const [key, entry] of this.cache) if (ids.has(entry.tokenId)) this.cache.delete(key);
    for (const id of ids) this.lastUsedWritten.delete(id);
  }

  evictUser(userId: string) {
    for (const [key, entry] of this.cache) if (entry.userId === userId) this.cache.delete(key);
  }
}
