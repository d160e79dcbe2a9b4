/**
 * Keyset pagination for the `{data, next_cursor}` lists: ids are time-ordered (src/db/ids.ts), so
 * "newest first" is `ORDER BY id DESC` and the cursor is the last id of the previous page.
 */
import { and, desc, getTableName, lt, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { Errors } from "../lib/errors.ts";
import { PREFIX } from "./ids.ts";

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface PageParams {
  limit?: number;
  cursor?: string;
}

/** A page's size, and the rows to fetch for it (one more: whether a next page exists). */
export function pageSize(p: PageParams): { limit: number; fetch: number } {
  const limit = p.limit ?? 20;
  return { limit, fetch: limit + 1 };
}

/** A next_cursor of an id-keyed list is an id (src/db/ids.ts): anything else is refused, not read as text. */
const ID_CURSOR = /^[a-z]{2,5}_[0-9a-hjkmnp-tv-z]{26}$/;

/** The id prefix of each id-keyed list's table: a cursor copied from another list is refused. */
const PREFIX_OF_TABLE: Record<string, string> = {
  users: PREFIX.user,
  api_tokens: PREFIX.token,
  tasks: PREFIX.task,
  playbooks: PREFIX.playbook,
  sessions: PREFIX.session,
  profiles: PREFIX.profile,
  workspaces: PREFIX.container,
  integrations: PREFIX.integration,
  notification_log: PREFIX.notification,
  audit_log: PREFIX.audit,
};

/**
 * The page's cursor when it has one; 400 on `cursor` when it is not a next_cursor of such a list —
 * of this list, when `prefix` names its ids (a `tok_…` cursor given to /admin/users is refused).
 */
export function idCursor(p: PageParams, prefix?: string): string | undefined {
  if (!p.cursor) return undefined;
  if (!ID_CURSOR.test(p.cursor) || (prefix !== undefined && !p.cursor.startsWith(`${prefix}_`))) {
    throw Errors.validation("cursor", "cursor is not a next_cursor of this list", { reason: "invalid cursor", in: "query" });
  }
  return p.cursor;
}

/** WHERE and ORDER BY for one page; fetch `limit + 1` rows and pass them to `toPage`. */
export function keyset(idColumn: SQLiteColumn, where: SQL | undefined, p: PageParams) {
  const cursor = idCursor(p, PREFIX_OF_TABLE[getTableName(idColumn.table)]);
  return {
    where: cursor ? and(where, lt(idColumn, cursor)) : where,
    orderBy: desc(idColumn),
    ...pageSize(p),
  };
}

export function toPage<R extends { id: string }, T>(rows: R[], limit: number, map: (r: R) => T): Page<T> {
  const page = rows.slice(0, limit);
  return { data: page.map(map), next_cursor: rows.length > limit ? page[page.length - 1]!.id : null };
}
