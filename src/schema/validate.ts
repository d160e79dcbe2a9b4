/**
 * The one validator: a value against a schema, or VALIDATION_FAILED naming the first bad field the
 * way the API names fields — `model.base_url`, `env.FOO`, `tools[2]`, `body` for the whole value —
 * with a sentence a person can act on. Route bodies, stream messages and profiles all use it; the
 * router phrases Elysia's own (query, params) errors with `describe` too.
 */
import type { TSchema, Static } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { AppError } from "../lib/errors.ts";
import { nullAsAbsentKeys, nullsAsAbsent } from "./common.ts";

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

function compile<S extends TSchema>(schema: S): TypeCheck<S> {
  let c = compiled.get(schema);
  if (!c) compiled.set(schema, (c = TypeCompiler.Compile(schema)));
  return c as TypeCheck<S>;
}

/** A JSON-pointer path (`/tools/2/name`) as the API names fields (`tools[2].name`); `root` for "". */
export function fieldOf(path: string, root = "body"): string {
  if (!path || path === "/") return root;
  let out = "";
  for (const raw of path.replace(/^\//, "").split("/")) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    out += /^\d+$/.test(seg) ? `[${seg}]` : out ? `.${seg}` : seg;
  }
  return out;
}

const TYPE_NAMES: Partial<Record<ValueErrorType, string>> = {
  [ValueErrorType.String]: "a string",
  [ValueErrorType.Number]: "a number",
  [ValueErrorType.Integer]: "an integer",
  [ValueErrorType.Boolean]: "true or false",
  [ValueErrorType.Object]: "an object",
  [ValueErrorType.Array]: "an array",
  [ValueErrorType.Null]: "null",
};

/** The literal values of a union of literals, if that is what `schema` is. */
function literals(schema: TSchema): string[] | null {
  const any = (schema as { anyOf?: { const?: unknown }[] }).anyOf;
  if (!any || !any.every((s) => typeof s.const === "string")) return null;
  return any.map((s) => s.const as string);
}

/** A sentence for one TypeBox error: the field, then what it must be. */
export function describe(e: Pick<ValueError, "type" | "schema" | "message" | "value">, field: string): { message: string; reason: string } {
  const s = e.schema as Record<string, unknown>;
  const hint = typeof s["x-hint"] === "string" ? ` (${s["x-hint"]})` : "";
  const say = (what: string, reason: string) => ({ message: `${field} ${what}${hint}`, reason });
  const typeName = TYPE_NAMES[e.type];
  if (typeName) return say(e.value === null ? `must not be null` : `must be ${typeName}`, e.value === null ? "null" : `expected ${typeName.replace(/^an? /, "")}`);
  switch (e.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return say("is required", "required");
    case ValueErrorType.ObjectAdditionalProperties:
      // A map whose keys follow a pattern (env names, header names): the key is not a valid name.
      if ((e.schema as { patternProperties?: unknown }).patternProperties) return { message: `${field} is not a valid name here`, reason: "invalid name" };
      return { message: `Unknown field "${field}"`, reason: "unknown field" };
    case ValueErrorType.StringMaxLength:
      return say(`must be at most ${s.maxLength} characters`, "too long");
    case ValueErrorType.StringMinLength:
      return say(s.minLength === 1 ? "must not be empty" : `must be at least ${s.minLength} characters`, s.minLength === 1 ? "empty" : "too short");
    case ValueErrorType.StringPattern:
    case ValueErrorType.StringFormat:
      return say(`is not valid`, "invalid format");
    case ValueErrorType.NumberMaximum:
    case ValueErrorType.IntegerMaximum:
      return say(`must be at most ${s.maximum}`, "too large");
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.IntegerMinimum:
      return say(`must be at least ${s.minimum}`, "too small");
    case ValueErrorType.NumberExclusiveMinimum:
    case ValueErrorType.IntegerExclusiveMinimum:
      return say(`must be greater than ${s.exclusiveMinimum}`, "too small");
    case ValueErrorType.ArrayMaxItems:
      return say(`may hold at most ${s.maxItems} items`, "too many");
    case ValueErrorType.ArrayUniqueItems:
      return say(`lists a value twice`, "duplicate");
    case ValueErrorType.ObjectMaxProperties:
      return say(`may hold at most ${s.maxProperties} entries`, "too many");
    case ValueErrorType.Literal:
      return say(`must be ${JSON.stringify(s.const)}`, "not allowed");
    case ValueErrorType.Union: {
      const values = literals(e.schema);
      if (values) return say(`must be one of ${values.join(", ")}`, "not allowed");
      return say(e.value === null ? "must not be null" : "has the wrong type or shape", e.value === null ? "null" : "invalid value");
    }
    default:
      return say(`is invalid: ${e.message}`, "invalid value");
  }
}

/** In a nullable field (`X | null`) holding a non-null value, the error is X's: descend into it. */
function throughNullable(e: ValueError): ValueError {
  const variants = (e.schema as { anyOf?: TSchema[] }).anyOf;
  if (e.type !== ValueErrorType.Union || e.value === null || variants?.length !== 2) return e;
  const i = variants.findIndex((v) => (v as { type?: string }).type === "null");
  if (i < 0) return e;
  const inner = e.errors[1 - i]?.First();
  return inner ? throughNullable(inner) : e;
}

/** In a union with one string variant (a literal or `{secret}`) holding a string, the error is that variant's. */
function throughString(e: ValueError): ValueError {
  const variants = (e.schema as { anyOf?: TSchema[] }).anyOf;
  if (e.type !== ValueErrorType.Union || typeof e.value !== "string" || !variants) return e;
  const strings = variants.flatMap((v, i) => ((v as { type?: string; const?: unknown }).type === "string" && (v as { const?: unknown }).const === undefined ? [i] : []));
  if (strings.length !== 1) return e;
  return e.errors[strings[0]!]?.First() ?? e;
}

/**
 * In a union of objects told apart by one literal property (`transport: "stdio" | "http"`), the
 * error is the chosen variant's; with no variant chosen, the error is that property's.
 */
function throughDiscriminated(e: ValueError): ValueError {
  const variants = (e.schema as { anyOf?: TSchema[] }).anyOf;
  const v = e.value as Record<string, unknown> | null;
  if (e.type !== ValueErrorType.Union || !variants?.length || !v || typeof v !== "object" || Array.isArray(v)) return e;
  const props = variants.map((s) => (s as { properties?: Record<string, { const?: unknown }> }).properties);
  if (props.some((p) => !p)) return e;
  const key = Object.keys(props[0]!).find((k) => props.every((p) => typeof p![k]?.const === "string"));
  if (!key) return e;
  const i = props.findIndex((p) => p![key]!.const === v[key]);
  if (i >= 0) {
    const inner = e.errors[i]?.First();
    return inner ? throughDiscriminated(throughNullable(inner)) : e;
  }
  const schema = { anyOf: props.map((p) => ({ const: p![key]!.const })) } as unknown as TSchema;
  const missing = v[key] === undefined;
  return { ...e, type: missing ? ValueErrorType.ObjectRequiredProperty : ValueErrorType.Union, schema, path: `${e.path}/${key}`, value: v[key], message: "" } as ValueError;
}

/** Field and sentence for the first error of `value` against a compiled schema. */
function firstError(check: TypeCheck<TSchema>, value: unknown, root: string): AppError {
  const found = check.Errors(value).First();
  const e = found && throughString(throughDiscriminated(throughNullable(found)));
  if (!e) return new AppError("VALIDATION_FAILED", `${root} is invalid`, { field: root, reason: "invalid value" });
  let path = e.path;
  // A duplicate in a unique list: name the second occurrence (tools[1]).
  if (e.type === ValueErrorType.ArrayUniqueItems && Array.isArray(e.value)) {
    const seen = new Set<string>();
    const i = e.value.findIndex((v) => {
      const k = JSON.stringify(v);
      return seen.has(k) || !seen.add(k);
    });
    if (i >= 0) path = `${path}/${i}`;
  }
  const field = fieldOf(path, root);
  const { message, reason } = e.type === ValueErrorType.Object && !path && root === "body" ? { message: "Request body must be a JSON object", reason: "expected object" } : describe(e, field);
  return new AppError("VALIDATION_FAILED", message, { field, reason });
}

/** `value` typed by `schema`, or VALIDATION_FAILED naming the first bad field (relative to `root`). */
const absentable = new WeakMap<TSchema, string[]>();

/**
 * `value` against `schema`, or VALIDATION_FAILED naming the first bad field. A top-level field
 * marked NULL_AS_ABSENT (src/schema/common.ts) holding `null` is removed from `value` first.
 */
export function check<S extends TSchema>(schema: S, value: unknown, root = "body"): Static<S> {
  let keys = absentable.get(schema);
  if (!keys) absentable.set(schema, (keys = nullAsAbsentKeys(schema)));
  if (keys.length) nullsAsAbsent(value, keys);
  const c = compile(schema);
  if (c.Check(value)) return value as Static<S>;
  throw firstError(c as TypeCheck<TSchema>, value, root);
}

/** True when `value` matches `schema` (no error built). */
export const matches = (schema: TSchema, value: unknown): boolean => compile(schema).Check(value);
