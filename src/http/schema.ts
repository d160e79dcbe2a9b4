/**
 * Route-level schema helpers. Record and body schemas come from src/schema/ (one module per
 * resource); what is only HTTP's is here: the page query (Elysia's coercing integers), the error
 * responses each route documents, and `jsonBody`, which checks a JSON body with the shared
 * validator before Elysia's own pass, so REST and the stream word their 400s the same way.
 */
import { CloneType, type IntegerOptions, type TNull, type TProperties, type TSchema, type TUnion } from "@sinclair/typebox";
import { t } from "elysia";
import { closed, ErrorBody } from "../schema/common.ts";
import { check } from "../schema/validate.ts";

/**
 * An integer query parameter, written in decimal digits only. Elysia's `t.Integer` decodes a query's
 * string with `+value`, which also reads `1e1`, `0x10`, ` 1` and `1.0`: a client's typo or a
 * probe would be taken as some other number, not refused. Its string branch gets a pattern; the
 * rest (the bounds, the error naming the field, the OpenAPI document's `integer`) is Elysia's.
 */
export function QueryInteger(options: IntegerOptions) {
  const schema = t.Integer(options);
  for (const branch of (schema as unknown as { anyOf: { type?: string; pattern?: string }[] }).anyOf) if (branch.type === "string") branch.pattern = "^[0-9]+$";
  return schema;
}

export const PageQuery = {
  limit: t.Optional(QueryInteger({ minimum: 1, maximum: 100, "x-default": 20, "x-field": "limit", description: "Page size (1–100)" })),
  cursor: t.Optional(t.String({ maxLength: 200, "x-field": "cursor", description: "next_cursor of the previous page" })),
};

/**
 * A route's query schema, optional as a whole: Elysia then checks and decodes only a query that is
 * there, and a request without one (the usual list read) skips both — Elysia decodes a query with
 * integers in it twice per request otherwise. Its fields carry no `default` for the same reason
 * (Elysia would fill it in and so always have a query to check): a page's size defaults in
 * `pageSize` (src/db/paginate.ts), and `x-default` documents it (the OpenAPI document shows it as
 * `default`, src/http/routes/docs.ts).
 */
export function queryOf<P extends TProperties>(properties: P) {
  return t.Optional(t.Object(properties));
}

/** Marks a response schema as a file's bytes (documented as such, src/http/openapi.ts). */
export const BYTES_MARK = "x-runcell-bytes";
/** A response that is a file's bytes, with the file's own Content-Type. */
export const FileBytes = (description: string) => t.Any({ description, [BYTES_MARK]: true });

/** Error responses documented on every route. */
export const errorResponses = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, ErrorBody]));

/**
 * Route options for a JSON body: `schema`, closed to unknown fields at every depth, documented and
 * checked by the shared validator before Elysia's own pass. With `open`, the schema is taken as it
 * is (better-auth's client sends fields of its own to sign-in and sign-up).
 */
export function jsonBody<S extends TSchema>(schema: S, opts?: { open?: boolean }): { body: S; transform(ctx: { body: unknown }): void };
/** With `optional`, an empty body is accepted too (the handler sees null). */
export function jsonBody<S extends TSchema>(schema: S, opts: { optional: true; open?: boolean }): { body: TUnion<[S, TNull]>; transform(ctx: { body: unknown }): void };
export function jsonBody<S extends TSchema>(schema: S, opts: { optional?: boolean; open?: boolean } = {}) {
  const body = opts.open ? schema : closed(schema);
  // Elysia closes an open object schema it is given (it then drops unknown fields before the
  // handler): it gets a copy, so the one checked here stays open.
  const routeBody = opts.open ? CloneType(body) : body;
  return {
    body: opts.optional ? t.Union([routeBody, t.Null()]) : routeBody,
    transform({ body: value }: { body: unknown }) {
      if (opts.optional && (value === undefined || value === null)) return;
      check(body, value);
    },
  };
}
