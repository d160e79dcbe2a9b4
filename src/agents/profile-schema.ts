/**
 * TypeBox schemas of profiles for the routes and the OpenAPI document. The response record is
 * derived from the drizzle table (drizzle-typebox) with the JSON columns refined; request bodies
 * describe the same fields, all optional. The authoritative validation (exact `details.field`
 * names, defaults, PATCH merge) is profile-validate.ts, run before these schemas are checked.
 */
import { createSelectSchema } from "drizzle-typebox";
import type { TUnsafe } from "@sinclair/typebox";
import { t } from "elysia";
import { profiles } from "../db/schema.ts";
import { Timestamp } from "../http/schema.ts";
import { LIMIT_BOUNDS, LIMIT_KEYS, NETWORKS, PROVIDERS, TOOL_NAMES } from "./profile-defaults.ts";
import { ENV_MAX_ENTRIES, SYSTEM_PROMPT_MAX } from "./profile-validate.ts";

/** One of `values` (literals, not t.UnionEnum: that one carries a default Elysia would fill in). */
const oneOf = <V extends string>(values: readonly V[], options: { description?: string } = {}) =>
  t.Union(
    values.map((v) => t.Literal(v)),
    options,
  ) as unknown as TUnsafe<V>;

const Pricing = t.Object(
  {
    input_per_mtok: t.Number({ minimum: 0, description: "USD per million input tokens" }),
    output_per_mtok: t.Number({ minimum: 0, description: "USD per million output tokens" }),
  },
  { description: "Overrides the built-in price table for cost_usd" },
);

const modelFields = {
  name: t.String({ description: "Model name as the provider knows it (default per provider)", examples: ["claude-sonnet-4-6"] }),
  base_url: t.String({ description: "Any server speaking the provider's API (http or https)" }),
  api_key_secret: t.String({ description: "Name of the vault secret holding the API key" }),
};

export const ModelSchema = t.Object({
  provider: oneOf(PROVIDERS),
  name: modelFields.name,
  base_url: t.Optional(modelFields.base_url),
  api_key_secret: t.Optional(modelFields.api_key_secret),
  pricing: t.Optional(Pricing),
});

const SecretRef = t.Object({ secret: t.String({ description: "Vault secret name" }) });
export const EnvSchema = t.Record(t.String(), t.Union([t.String(), SecretRef]), {
  description: `Environment variables of the workspace (at most ${ENV_MAX_ENTRIES}): a literal or {secret}`,
  examples: [{ LOG_LEVEL: "debug", GITHUB_TOKEN: { secret: "GITHUB_TOKEN" } }],
});

const limitSchema = (k: keyof typeof LIMIT_BOUNDS) => {
  const b = LIMIT_BOUNDS[k];
  const bounds = { ...(b.exclusiveMin ? { exclusiveMinimum: b.min } : { minimum: b.min }), maximum: b.max };
  return b.integer ? t.Integer(bounds) : t.Number(bounds);
};
export const LimitsSchema = t.Object(Object.fromEntries(LIMIT_KEYS.map((k) => [k, limitSchema(k)])) as Record<keyof typeof LIMIT_BOUNDS, ReturnType<typeof limitSchema>>);

export const ToolsSchema = t.Array(oneOf(TOOL_NAMES), { uniqueItems: true, description: "Tools the agent may use" });
export const NetworkSchema = oneOf(NETWORKS, { description: "Docker network mode of the workspace" });

/** The API record: the drizzle row's columns without user_id, JSON columns typed, times as ISO strings. */
const { user_id: _owner, ...columns } = createSelectSchema(profiles).properties;
export const ProfileSchema = t.Object(
  {
    ...columns,
    id: t.String({ examples: ["prof_01jd4s0z3x8k2m5n7p9q1r3t5v"] }),
    model: ModelSchema,
    tools: ToolsSchema,
    env: EnvSchema,
    limits: LimitsSchema,
    network: NetworkSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Profile" },
);

const nullable = <T extends Parameters<typeof t.Optional>[0]>(s: T) => t.Optional(t.Union([s, t.Null()]));

/** Body of POST and PATCH: every field optional (POST fills defaults; PATCH merges). */
const modelBody = (providerRequired: boolean) =>
  t.Object({
    provider: providerRequired ? oneOf(PROVIDERS) : t.Optional(oneOf(PROVIDERS)),
    name: nullable(modelFields.name),
    base_url: nullable(modelFields.base_url),
    api_key_secret: nullable(modelFields.api_key_secret),
    pricing: nullable(Pricing),
  });

const body = (providerRequired: boolean) =>
  t.Object({
    name: t.Optional(t.String({ description: "Label (1–100 characters; default \"Default\")" })),
    system_prompt: t.Optional(t.String({ maxLength: SYSTEM_PROMPT_MAX, description: "Default: a general agent prompt describing the workspace" })),
    model: t.Optional(modelBody(providerRequired)),
    image: t.Optional(t.String({ description: "Docker image reference (default: the server's --workspace-image)" })),
    tools: t.Optional(ToolsSchema),
    env: t.Optional(EnvSchema),
    limits: t.Optional(t.Partial(LimitsSchema)),
    network: t.Optional(NetworkSchema),
  });

export const ProfileCreateBody = body(true);
export const ProfilePatchBody = body(false);
