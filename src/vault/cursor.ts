/**
 * The opaque `next_cursor` of the secrets list. Secrets are keyed by name, not by a time-ordered
 * id, so the cursor carries the last row's (created_at, name) and the next page continues after
 * it in the list order (created_at desc, name desc).
 */
import { SECRET_NAME } from "./names.ts";

export function encodeCursor(createdAt: number, name: string): string {
  return Buffer.from(`${createdAt}.${name}`).toString("base64url");
}

export function decodeCursor(cursor: string): { at: number; name: string } | null {
  const raw = Buffer.from(cursor, "base64url").toString("utf8");
  const m = /^(\d{1,16})\.(.+)$/.exec(raw);
  if (!m || !SECRET_NAME.test(m[2]!)) return null;
  return { at: Number(m[1]), name: m[2]! };
}
