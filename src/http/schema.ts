/**
 * Shared TypeBox pieces for route schemas: the error body, list envelopes, pagination query and
 * `jsonBody`, which also rejects fields the schema does not know (a misspelled optional field
 * would otherwise be dropped silently).
 */
import { t, type TSchema } from "elysia";
import { AppError } from "../lib/errors.ts";

export const ErrorBodySchema = t.Object(
  {
    error: t.String({ description: "Human-readable message" }),
    code: t.String({ description: "One of the interface's error codes" }),
    details: t.Optional(t.Record(t.String(), t.Unknown())),
  },
  { $id: "#/components/schemas/Error", title: "Error" },
);

/** Timestamp fields are ISO 8601 UTC strings with milliseconds. */
export const Timestamp = t.String({ format: "date-time", examples: ["2026-11-22T03:16:17.123Z"] });

export const ListOf = <T extends TSchema>(item: T) =>
  t.Object({ data: t.Array(item), next_cursor: t.Union([t.String(), t.Null()]) });

export const PageQuery = {
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 100, default: 20, "x-field": "limit", description: "Page size (1–100)" })),
  cursor: t.Optional(t.String({ maxLength: 200, "x-field": "cursor", description: "next_cursor of the previous page" })),
};

/** Error responses documented on every route. */
export const errorResponses = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, ErrorBodySchema]));

function unknownField(schema: TSchema, value: unknown, path: string): string | null {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const s = schema as { type?: string; properties?: Record<string, TSchema>; additionalProperties?: unknown; anyOf?: TSchema[] };
  if (s.type !== "object" || !s.properties || s.additionalProperties === true || typeof s.additionalProperties === "object") return null;
  for (const key of Object.keys(value)) {
    const child = s.properties[key];
    if (!child) return path + key;
    const nested = unknownField(child, (value as Record<string, unknown>)[key], `${path}${key}.`);
    if (nested) return nested;
  }
  return null;
}

/** Route options for a JSON body: validation by `schema`, plus a refusal of unknown fields. */
export function jsonBody<T extends TSchema>(schema: T) {
  return {
    body: schema,
    transform({ body }: { body: unknown }) {
      if ((schema as { type?: string }).type === "object" && body !== undefined && (body === null || typeof body !== "object" || Array.isArray(body))) {
        throw new AppError("VALIDATION_FAILED", "Request body must be a JSON object", { field: "body", reason: "expected object" });
      }
      const field = unknownField(schema, body, "");
      if (field) throw new AppError("VALIDATION_FAILED", `Unknown field "${field}"`, { field, reason: "unknown field" });
    },
  };
}

export const NullableTimestamp = t.Union([Timestamp, t.Null()]);
