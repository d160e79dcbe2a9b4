/**
 * Profiles: how an agent is configured (model, system prompt, image, tools, env, limits,
 * network). Every read and write is scoped by owner in the query itself; someone else's profile
 * answers NOT_FOUND exactly like a missing one. The runtime calls `get` + `toApi`.
 */
import { preparedLookup } from "../db/prepared.ts";
import { and, desc, eq, lt, sql } from "drizzle-orm";
import type { Config } from "../config.ts";
import { affected, type DB, first } from "../db/client.ts";
import { isId, newId, PREFIX } from "../db/ids.ts";
import { idCursor, type PageParams, pageSize } from "../db/paginate.ts";
import { type ModelConfig, type ProfileLimits, type ProfileRow } from "../db/schema.ts";
import { profiles } from "../db/tables.ts";
import { isPostgres } from "../db/unit.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { VersionedJson } from "../lib/versioned-json.ts";
import { iso } from "../lib/time.ts";
import { type Model, ProfilePatchBody, type PoolState, ProfileRecord } from "../schema/profile.ts";
import { check, matches } from "../schema/validate.ts";
import { checkOutbound, type OutboundNet } from "./outbound.ts";
import { clampConcurrency, mergeProfilePatch, normalizeProfile, type ProfileDefaults, type ProfileFields } from "./profile-rules.ts";
import { type TableChanges, TableMemo } from "../db/changes.ts";

export type { ProfileRow };

const PROFILE_GONE = "profile deleted";
/** A task's profile was deleted while it ran: the task ends NOT_FOUND (a command does not run without its environment). */
export const profileGone = (profileId: string) => new AppError("NOT_FOUND", `Profile ${profileId} no longer exists`, { reason: PROFILE_GONE, profile_id: profileId });
export const isProfileGone = (e: unknown): e is AppError => e instanceof AppError && e.details?.reason === PROFILE_GONE;

/** The model config without empty optional fields. */
export function cleanModel(m: ModelConfig): Model {
  const out: Model = { provider: m.provider, name: m.name };
  if (m.base_url) out.base_url = m.base_url;
  if (m.api_key_secret) out.api_key_secret = m.api_key_secret;
  if (m.pricing) out.pricing = { input_per_mtok: m.pricing.input_per_mtok, output_per_mtok: m.pricing.output_per_mtok };
  return out;
}

function fieldsOf(row: ProfileRow): ProfileFields {
  return {
    name: row.name,
    system_prompt: row.system_prompt,
    model: cleanModel(row.model),
    image: row.image,
    tools: row.tools as ProfileFields["tools"],
    env: row.env,
    limits: row.limits,
    network: row.network,
    warm_pool: row.warm_pool,
    mcp_servers: row.mcp_servers,
    allowed_tools: row.allowed_tools,
    repositories: row.repositories,
    host_labels: row.host_labels,
  };
}

/** The API record of a row, without the pool's live state. */
function recordOf(row: ProfileRow): ProfileRecord {
  return { id: row.id, ...fieldsOf(row), model: cleanModel(row.model), created_at: iso(row.created_at), updated_at: iso(row.updated_at) };
}

/** What says which version of a profile to send. */
interface ProfileVersion {
  id: string;
  updated_at: number;
  warm_pool: number;
}

/**
 * The page memo's bounds: any cursor makes its own entry, so a caller walking made-up cursors must
 * not grow the memory — at most PAGES_KEPT pages, a finished body kept only up to
 * PAGE_JSON_KEPT_MAX characters (at worst ~32 MB; the rows alone are small).
 */
const PAGES_KEPT = 512;
const PAGE_JSON_KEPT_MAX = 64 * 1024;

/** A list page's rows, and its finished body when it holds no live state (no warm pool). */
interface ProfilePage {
  rows: ProfileVersion[];
  json: string | null;
}

/** What the read routes select: only what says which version of each record to send. */
const VERSION = { id: profiles.id, updated_at: profiles.updated_at, warm_pool: profiles.warm_pool };

export class Profiles {
  /** Each profile's API record (without the pool's live state) as JSON, per `updated_at`. */
  private json = new VersionedJson();
  /** List pages' (id, version) rows, kept while the profiles table is unchanged by anyone (null: read every time). */
  private pages: TableMemo<ProfilePage> | null;
  /** Called after a profile is deleted (its playbooks are disabled, its warm pool removed). */
  onDelete: ((profileId: string, userId: string) => void | Promise<void>)[] = [];
  /** Called after a profile is changed (its warm pool is drained when its containers would differ, and resized). */
  onUpdate: ((before: ProfileRow, after: ProfileRow) => void)[] = [];

  constructor(
    private db: DB,
    /** Read at call time: PATCH /admin/config changes defaultMaxConcurrency live. */
    private config: Pick<Config, "workspaceImage" | "defaultMaxConcurrency">,
    private now: () => number,
    /** The operator's policy and the model-network rule, checked when a profile is saved (wired by the app). */
    private guards: {
      policy?: { checkProfile(userId: string, fields: ProfileFields, isNew: boolean, before?: ProfileFields): Promise<void>; limitCeilings?(userId: string): Promise<Partial<ProfileLimits> | null> };
      modelNet?: { check(userId: string, baseUrl: string | null | undefined): Promise<void> } & OutboundNet;
      /** The warm pool's state shown with the profile (wired by the app). */
      pool?: { state(profile: { id: string; warm_pool: number }): PoolState | null };
    } = {},
    changes?: TableChanges,
  ) {
    this.pages = changes ? new TableMemo(changes, ["profiles"], PAGES_KEPT) : null;
    this.lookupOwned = preparedLookup(db, profiles, ["id", "user_id"]);
    this.lookupAny = preparedLookup(db, profiles, ["id"]);
  }

  /** A profile by id and owner / by id alone, prepared once (read on every session start and every exec). */
  private readonly lookupOwned;
  private readonly lookupAny;

  /**
   * The defaults a new profile gets now: the default model depends on the server's keys, and
   * max_concurrency on the operator's default (--default-max-concurrency, or PATCH /admin/config,
   * which updates the shared config live).
   */
  currentDefaults(): ProfileDefaults {
    return { image: this.config.workspaceImage, maxConcurrency: clampConcurrency(this.config.defaultMaxConcurrency), env: process.env };
  }

  /** A profile by id whoever owns it (the workspace's environment, resolved per exec). */
  async byIdAny(profileId: string): Promise<ProfileRow | undefined> {
    return (await this.lookupAny([profileId]))[0];
  }

  /** The caller's profile; NOT_FOUND when missing or someone else's. */
  async get(userId: string, profileId: string): Promise<ProfileRow> {
    const row = await this.owned(userId, profileId);
    if (!row) throw Errors.notFound("Profile", profileId);
    return row;
  }

  /** The profile a task runs with; deleted meanwhile (or no longer its owner's): profileGone. */
  async forTask(userId: string, profileId: string): Promise<ProfileRow> {
    const row = await this.owned(userId, profileId);
    if (!row) throw profileGone(profileId);
    return row;
  }

  /** The user's profile of that id, if any (a malformed id is none). */
  private async owned(userId: string, profileId: string): Promise<ProfileRow | undefined> {
    return isId("profile", profileId) ? (await this.lookupOwned([profileId, userId]))[0] : undefined;
  }

  toApi(row: ProfileRow): ProfileRecord {
    const rec = recordOf(row);
    const pool = row.warm_pool > 0 ? this.guards.pool?.state(row) : null;
    if (pool) rec.pool = pool;
    return rec;
  }

  /**
   * GET /v1/profiles/:id's body: the record's JSON, made once per version (src/lib/versioned-json.ts)
   * and checked against its schema when made; the pool's live state is added per request.
   */
  async getJson(userId: string, profileId: string): Promise<string> {
    const v = isId("profile", profileId) ? await first(this.db.select(VERSION).from(profiles).where(and(eq(profiles.id, profileId), eq(profiles.user_id, userId)))) : undefined;
    const json = v && (await this.recordJson(v));
    if (!json) throw Errors.notFound("Profile", profileId);
    return json;
  }

  /**
   * GET /v1/profiles's body (the shape of `list`), from the records' stored JSON. A page is kept
   * while the profiles table is unchanged; when none of its profiles has a warm pool (whose live
   * state goes in every answer) it is kept finished, so a repeated read is one lookup. A kept page
   * is answered without a promise when its records' JSON is stored; only a read returns one.
   */
  listJson(userId: string, p: PageParams): string | Promise<string> {
    const k = pageSize(p); // (no SQL is built unless the page is read)
    const cursor = idCursor(p, PREFIX.profile);
    const read = async (): Promise<ProfilePage> => {
      // A page of the owner's profiles, newest first: the first one, or the one after a cursor.
      const mine = eq(profiles.user_id, userId);
      const rows = await this.db.select(VERSION).from(profiles).where(cursor ? and(mine, lt(profiles.id, cursor)) : mine).orderBy(desc(profiles.id)).limit(k.fetch);
      let json = rows.some((r) => r.warm_pool > 0) ? null : await this.pageJson(rows, k.limit);
      if (json && json.length > PAGE_JSON_KEPT_MAX) json = null; // kept as rows only: the memo's memory stays bounded
      return { rows, json };
    };
    const page = this.pages ? this.pages.get(`${userId} ${k.fetch} ${cursor ?? ""}`, read) : read();
    const body = (pg: ProfilePage | undefined) => pg!.json ?? this.pageJson(pg!.rows, k.limit);
    return page instanceof Promise ? page.then(body) : body(page);
  }

  /** A page's body: synchronous when every record's JSON is stored, else once the missing ones are read. */
  private pageJson(rows: readonly ProfileVersion[], limit: number): string | Promise<string> {
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? JSON.stringify(page[page.length - 1]!.id) : "null";
    const join = (jsons: (string | null)[]) => `{"data":[${jsons.filter((j) => j).join(",")}],"next_cursor":${next}}`;
    const jsons = page.map((v) => this.recordJson(v));
    return jsons.some((j) => j instanceof Promise) ? Promise.all(jsons).then(join) : join(jsons as (string | null)[]);
  }

  /**
   * One record's JSON at the version read (null: deleted meanwhile), with the pool's state: from
   * memory when stored at that version, else read (a promise).
   */
  private recordJson(v: ProfileVersion): string | null | Promise<string | null> {
    const stored = this.json.peek(v.id, v.updated_at);
    if (stored !== undefined) return this.withPool(v, stored);
    return this.byIdAny(v.id).then((row) => {
      const json = this.json.get(v.id, v.updated_at, () => {
        if (!row) return null;
        const rec = recordOf(row);
        // What Elysia's response check did per request, once per version.
        if (!matches(ProfileRecord, rec)) throw new AppError("INTERNAL_ERROR", "Internal server error: response failed its schema");
        return { version: row.updated_at, json: JSON.stringify(rec) };
      });
      return this.withPool(v, json);
    });
  }

  private withPool(v: ProfileVersion, json: string | null): string | null {
    const pool = json && v.warm_pool > 0 ? this.guards.pool?.state(v) : null;
    return pool ? `${json!.slice(0, -1)},"pool":${JSON.stringify(pool)}}` : json;
  }

  /** What the owner may save: the operator's policy, and where the model URL may point. */
  private async allowed(userId: string, fields: ProfileFields, isNew: boolean, before?: ProfileFields) {
    await this.guards.policy?.checkProfile(userId, fields, isNew, before);
    await this.guards.modelNet?.check(userId, fields.model.base_url);
    if (this.guards.modelNet) await checkOutbound(this.guards.modelNet, userId, fields);
  }

  /** Validates `input` (schema, rules, policy), fills defaults (fitted to the user's ceilings) and stores the profile. */
  async create(userId: string, input: unknown): Promise<ProfileRow> {
    const ceilings = (await this.guards.policy?.limitCeilings?.(userId)) ?? undefined;
    const fields = normalizeProfile(input, { ...this.currentDefaults(), ceilings });
    await this.allowed(userId, fields, true);
    const at = this.now();
    const row: ProfileRow = { id: newId("profile"), user_id: userId, ...fields, created_at: at, updated_at: at };
    await this.db.insert(profiles).values(row);
    if (row.warm_pool > 0) for (const f of this.onUpdate) f({ ...row, warm_pool: 0 }, row);
    return row;
  }

  /** Validates a new profile without storing it (throws VALIDATION_FAILED naming the field). */
  validateCreate(input: unknown): ProfileFields {
    return normalizeProfile(input, this.currentDefaults());
  }

  /** Validates a PATCH against the caller's profile without storing it. */
  async validatePatch(userId: string, profileId: string, patch: unknown): Promise<{ current: ProfileRow; fields: ProfileFields }> {
    const current = await this.get(userId, profileId);
    const body = check(ProfilePatchBody, patch);
    return { current, fields: normalizeProfile(mergeProfilePatch(fieldsOf(current), body), this.currentDefaults()) };
  }

  /** Applies a PATCH (semantics in mergeProfilePatch); a patch that changes nothing writes nothing. */
  async update(userId: string, profileId: string, patch: unknown): Promise<ProfileRow> {
    const { current, fields } = await this.validatePatch(userId, profileId, patch);
    if (Bun.deepEquals(fields, fieldsOf(current))) return current;
    await this.allowed(userId, fields, false, fieldsOf(current));
    // updated_at rises with every update, in the statement itself (concurrent ones included): it is
    // the version the read routes' stored JSON is keyed by: the larger of now and the last + 1
    // (SQLite's scalar max() is PostgreSQL's greatest()).
    const larger = isPostgres(this.db) ? sql`greatest` : sql`max`;
    const [stored] = await this.db
      .update(profiles)
      .set({ ...fields, updated_at: sql`${larger}(${this.now()}, ${profiles.updated_at} + 1)` })
      .where(and(eq(profiles.id, profileId), eq(profiles.user_id, userId)))
      .returning({ updated_at: profiles.updated_at });
    if (!stored) throw Errors.notFound("Profile", profileId);
    const after = { ...current, ...fields, updated_at: stored.updated_at };
    for (const f of this.onUpdate) f(current, after);
    return after;
  }

  /** Deletes the caller's profile; its sessions keep their transcripts. Again → NOT_FOUND. */
  async delete(userId: string, profileId: string): Promise<void> {
    if (!isId("profile", profileId)) throw Errors.notFound("Profile", profileId);
    const res = await this.db.delete(profiles).where(and(eq(profiles.id, profileId), eq(profiles.user_id, userId)));
    if (affected(res) === 0) throw Errors.notFound("Profile", profileId);
    this.json.drop(profileId);
    for (const f of this.onDelete) await f(profileId, userId);
  }
}
