/**
 * PostgreSQL cannot store U+0000: a text parameter holding it is refused ("invalid byte sequence
 * for encoding UTF8: 0x00") and so is jsonb's `\u0000` escape. Requests holding it are refused
 * where they are read (src/lib/json-input.ts); what runcell stores from elsewhere — a model's text, a
 * command's output, a provider's or receiver's error — may hold it, and a turn must not fail for
 * one byte: there U+0000 is stored as U+FFFD (the replacement character), as SQLite keeps it.
 */
import type { SQL } from "bun";

const REPLACEMENT = "\uFFFD";
/** `\u0000` in JSON text, not preceded by an escaping backslash (`\\u0000` is the text "\u0000"). */
const ESCAPED_NUL = /(?<!\\)((?:\\\\)*)\\u0000/g;

/** A string parameter as PostgreSQL can store it. */
export function storableText<T>(value: T): T {
  return typeof value === "string" && value.includes("\0") ? (value.replaceAll("\0", REPLACEMENT) as T) : value;
}

/** JSON text as jsonb can hold it. */
export function storableJson(text: string): string {
  return text.includes("\\u0000") ? text.replace(ESCAPED_NUL, "$1\\ufffd") : text;
}

function storableParams(params: unknown[] | undefined): unknown[] | undefined {
  if (!params?.some((p) => typeof p === "string" && p.includes("\0"))) return params;
  return params.map(storableText);
}

/**
 * The pool (and its transactions and savepoints) with every string parameter of `unsafe` — the
 * call drizzle's bun-sql session makes for every statement — storable.
 */
export function storableSql<S extends SQL>(sql: S): S {
  return new Proxy(sql, {
    get(target, prop) {
      if (prop === "unsafe") return (query: string, params?: unknown[]) => target.unsafe(query, storableParams(params) as never);
      if (prop === "begin" || prop === "savepoint") {
        return (...args: unknown[]) => {
          const fn = args.pop() as (tx: SQL) => unknown;
          return (target as unknown as Record<string, (...a: unknown[]) => unknown>)[prop]!(...args, (tx: SQL) => fn(storableSql(tx)));
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
