/**
 * Pieces every API schema shares: timestamps, nullable fields, literal unions, list envelopes,
 * the error body, and `recordColumns`, which takes an API record's fields from its drizzle table
 * (drizzle-typebox) so a column's type is written once. Plain TypeBox (the same package Elysia
 * and drizzle-typebox use): the domain, the routes, the stream and the OpenAPI and AsyncAPI
 * documents all read these schemas.
 */
import { CloneType, type SchemaOptions, type Static, type TObject, type TProperties, type TSchema, Type as T } from "@sinclair/typebox";
import { type BuildSchema, createSelectSchema } from "drizzle-typebox";
import type { Table } from "drizzle-orm";
import { ERROR_CODES } from "../lib/errors.ts";

export { T, type Static, type TSchema };

/** ISO 8601 UTC with milliseconds, the API's timestamp format. */
export const Timestamp = T.String({ format: "date-time", examples: ["2026-11-22T03:16:17.123Z"] });
/**
 * The characters a name people read (an account's, a token's, a profile's, a playbook's) may not
 * hold, as a regex character class body: control characters, and the invisible ones that disguise a
 * name where it is shown — soft hyphen, combining grapheme joiner, fillers that look blank (Hangul,
 * Khmer, Mongolian), zero-width space, line and paragraph separators, bidi embeddings, overrides
 * and isolates ("ab\u202ecd" reads backwards), word joiners and invisible operators, BOM,
 * interlinear annotations. Zero-width joiners (emoji sequences), non-joiners, LRM/RLM/ALM marks
 * (right-to-left scripts) and variation selectors stay.
 */
export const HIDDEN_IN_NAMES =
  "\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b\\u2028\\u2029\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\u3164\\ufeff\\uffa0\\ufff9-\\ufffb";
/** Unicode's tag characters (U+E0000–E007F, invisible), as the UTF-16 pair a regex without the u flag sees. */
export const TAG_CHARACTER = "\\uDB40[\\uDC00-\\uDC7F]";
/** A name people give a record (a token, a profile, a playbook): 1–100 characters, not blank, none of HIDDEN_IN_NAMES. */
export const Label = T.String({ minLength: 1, maxLength: 100, pattern: `^(?=[\\s\\S]*\\S)(?![\\s\\S]*${TAG_CHARACTER})[^${HIDDEN_IN_NAMES}]+$`, "x-hint": "a label without control or invisible formatting characters" });
export const Nullable = <S extends TSchema>(s: S, options: { description?: string } = {}) => T.Union([s, T.Null()], options);
export const NullableTimestamp = Nullable(Timestamp);

/**
 * Marks an optional field whose `null` a client may send for "absent": a client that sends every
 * field, `session_id: null` for "none", is not refused for it. Put in the field schema's options
 * (`T.String({ ...NULL_AS_ABSENT })`); the one validator (src/schema/validate.ts `check`) removes
 * such a null before the check, wherever the schema is used (a REST body, a stream message).
 */
export const NULL_AS_ABSENT_KEY = "x-null-as-absent";
export const NULL_AS_ABSENT = { [NULL_AS_ABSENT_KEY]: true } as const;

/** The top-level fields of an object schema marked NULL_AS_ABSENT. */
export const nullAsAbsentKeys = (schema: TSchema): string[] =>
  Object.entries((schema as { properties?: Record<string, Record<string, unknown>> }).properties ?? {})
    .filter(([, field]) => field[NULL_AS_ABSENT_KEY] === true)
    .map(([name]) => name);

/**
 * A JSON Schema object as the API documents show it: a field marked NULL_AS_ABSENT accepts null
 * (its type, or its union, gains null; its description says so), the mark itself dropped.
 * Changes `o` in place (a copy: the documents are made from clones).
 */
export function documentNullAsAbsent(o: Record<string, unknown>): void {
  if (o[NULL_AS_ABSENT_KEY] !== true) return;
  delete o[NULL_AS_ABSENT_KEY];
  o.description = `${o.description ? `${o.description}. ` : ""}null is taken as absent`;
  if (typeof o.type === "string") o.type = [o.type, "null"];
  else if (Array.isArray(o.anyOf)) o.anyOf = [...o.anyOf, { type: "null" }];
  if ("const" in o) {
    o.enum = [o.const, null];
    delete o.const;
  } else if (Array.isArray(o.enum)) o.enum = [...o.enum, null];
}

/** Removes the fields `keys` whose value is `null` from a client's object (see NULL_AS_ABSENT). */
export function nullsAsAbsent(value: unknown, keys: readonly string[]): void {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  const o = value as Record<string, unknown>;
  for (const k of keys) if (Object.hasOwn(o, k) && o[k] === null) delete o[k];
}
/** A cost in US dollars as every record shows it: rounded to 1e-9 (src/lib/usd.ts). */
export const CostUsd = T.Number({ description: "US dollars, rounded to 1e-9", examples: [0.012345678] });

/**
 * One of `values`, as a union of literals (also what the drizzle enum columns give). Not Elysia's
 * UnionEnum: that one carries a default that Elysia fills into a missing optional field.
 */
export const OneOf = <const V extends readonly string[]>(values: V, options: SchemaOptions = {}) =>
  T.Union(
    values.map((v) => T.Literal(v)),
    options,
  ) as unknown as ReturnType<typeof T.Unsafe<V[number]>>;

/** Closes every plain object inside `schema` (those that say nothing about additional properties); mutates, so it gets a clone. */
function strict<S extends TSchema>(schema: S): S {
  const o = schema as Record<string, unknown>;
  if (o.type === "object" && o.properties && o.additionalProperties === undefined && !o.patternProperties) o.additionalProperties = false;
  for (const child of Object.values((o.properties as Record<string, TSchema>) ?? {})) strict(child);
  if (o.items && typeof o.items === "object") strict(o.items as TSchema);
  for (const k of ["anyOf", "allOf", "oneOf"]) if (Array.isArray(o[k])) (o[k] as TSchema[]).forEach(strict);
  return schema;
}

/**
 * A request body: an object that refuses fields it does not know, at every depth (a misspelled
 * optional field would otherwise be dropped silently).
 */
export const Body = <P extends TProperties>(properties: P, options: { title?: string; description?: string } = {}) =>
  closed(T.Object(properties, { ...options, additionalProperties: false }));

/** A copy of `schema` in which every plain object refuses unknown fields. */
export const closed = <S extends TSchema>(schema: S): S => strict(CloneType(schema));

export const ListOf = <S extends TSchema>(item: S) => T.Object({ data: T.Array(item), next_cursor: Nullable(T.String()) });
export type List<S extends TSchema> = { data: Static<S>[]; next_cursor: string | null };

export const ErrorBody = T.Object(
  {
    error: T.String({ description: "Human-readable message" }),
    code: OneOf(ERROR_CODES, { description: "One of the interface's error codes" }),
    details: T.Optional(T.Record(T.String(), T.Unknown(), { description: "Context, e.g. field: the rejected input" })),
  },
  { $id: "#/components/schemas/Error", title: "Error" },
);

/** drizzle-typebox bounds every integer and real column by SQLite's range; that is noise in an API document. */
const SQLITE_BOUNDS = new Set([9007199254740991, -9007199254740991, 140737488355327, -140737488355328]);
function tidy(s: TSchema): TSchema {
  const o = s as Record<string, unknown>;
  if (SQLITE_BOUNDS.has(o.minimum as number)) delete o.minimum;
  if (SQLITE_BOUNDS.has(o.maximum as number)) delete o.maximum;
  for (const k of ["anyOf", "allOf"]) if (Array.isArray(o[k])) (o[k] as TSchema[]).forEach(tidy);
  return s;
}

type ColumnProps<TB extends Table> = BuildSchema<"select", TB["_"]["columns"], undefined>["properties"];

/** The TypeBox properties of `keys` columns of a drizzle table (drizzle-typebox), for an API record. */
export function recordColumns<TB extends Table, K extends keyof ColumnProps<TB> & string>(table: TB, keys: readonly K[]): Pick<ColumnProps<TB>, K> {
  const all = (createSelectSchema(table) as unknown as TObject).properties;
  const out: Record<string, TSchema> = {};
  for (const k of keys) out[k] = tidy(all[k]!);
  return out as Pick<ColumnProps<TB>, K>;
}
