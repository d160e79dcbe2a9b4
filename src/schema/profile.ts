/**
 * Profiles — how an agent is configured — as one set of schemas: the record the API returns, and
 * the create and PATCH bodies, with every bound and pattern a profile must keep. What a schema
 * cannot say (a base_url's parts, the Docker image grammar, what the demo provider refuses,
 * defaults and the PATCH merge) is in src/agents/profile-rules.ts.
 */
import { MODEL_PROVIDERS, NETWORKS, profiles } from "../db/schema.ts";
import { Body, Label, Nullable, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";
import { SecretName } from "./secret.ts";

/** The tools a profile can enable: the registry (src/agents/tools/index.ts) implements exactly these. */
export const TOOL_NAMES = ["Bash", "Read", "Write", "Edit", "AskUserQuestion", "Notify"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

export const SYSTEM_PROMPT_MAX = 100_000;
export const BASE_URL_MAX = 2048;
export const IMAGE_MAX = 512;
export const ENV_MAX_ENTRIES = 100;
export const ENV_VALUE_MAX = 32 * 1024;
export const PRICE_MAX = 10_000;
/** Names the platform or Docker set in the container; a profile may not override them. */
export const RESERVED_ENV = ["HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"] as const;
export const RESERVED_ENV_PREFIX = "RUNCELL_";
const ENV_NAME = `^(?!${RESERVED_ENV_PREFIX})(?!(?:${RESERVED_ENV.join("|")})$)[A-Za-z_][A-Za-z0-9_]{0,127}$`;

/** Numeric bounds of `limits` (inclusive unless `exclusiveMin`). */
export const LIMIT_BOUNDS = {
  max_turns: { min: 1, max: 1000, integer: true, description: "Model requests per task" },
  max_budget_usd: { min: 0, max: 10_000, integer: false, exclusiveMin: true, description: "Cost cap per task (USD)" },
  max_concurrency: { min: 1, max: 1000, integer: true, description: "Running workspaces of this profile at once" },
  memory_mb: { min: 64, max: 262_144, integer: true, description: "Container memory (swap included)" },
  cpus: { min: 0.1, max: 64, integer: false, description: "Container CPUs" },
  pids: { min: 32, max: 65_536, integer: true, description: "Container processes" },
} as const;
export type LimitKey = keyof typeof LIMIT_BOUNDS;
export const LIMIT_KEYS = Object.keys(LIMIT_BOUNDS) as LimitKey[];

const limit = (k: LimitKey) => {
  const b: { min: number; max: number; integer: boolean; exclusiveMin?: boolean; description: string } = LIMIT_BOUNDS[k];
  const bounds = { ...(b.exclusiveMin ? { exclusiveMinimum: b.min } : { minimum: b.min }), maximum: b.max, description: b.description };
  return b.integer ? T.Integer(bounds) : T.Number(bounds);
};
const limitProps = Object.fromEntries(LIMIT_KEYS.map((k) => [k, limit(k)])) as Record<LimitKey, ReturnType<typeof limit>>;
export const Limits = T.Object(limitProps, { additionalProperties: false });
export type Limits = Static<typeof Limits>;

export const Provider = OneOf(MODEL_PROVIDERS);
export const Network = OneOf(NETWORKS, { description: "Docker network mode of the workspace" });
/** Largest warm_pool a profile may ask for (the operator's --max-warm-pool caps it further). */
export const WARM_POOL_MAX = 100;
export const WarmPool = T.Integer({
  minimum: 0,
  maximum: WARM_POOL_MAX,
  description: "Containers kept created and started for this profile's next sessions, so session.ready is immediate (capped by the server's --max-warm-pool)",
});
/** The warm pool's state: the size it aims at now (after the operator's caps), members ready to take, members being made. */
export const PoolState = T.Object(
  {
    size: T.Integer({ description: "Members the pool aims at now: warm_pool within the operator's caps" }),
    ready: T.Integer({ description: "Started members a new session can take" }),
    starting: T.Integer({ description: "Members being created" }),
  },
  { title: "PoolState" },
);
export type PoolState = Static<typeof PoolState>;
export const Tools = T.Array(OneOf(TOOL_NAMES), { uniqueItems: true, description: "Tools the agent may use" });

export const Pricing = T.Object(
  {
    input_per_mtok: T.Number({ minimum: 0, maximum: PRICE_MAX, description: "USD per million input tokens" }),
    output_per_mtok: T.Number({ minimum: 0, maximum: PRICE_MAX, description: "USD per million output tokens" }),
  },
  { additionalProperties: false, description: "Overrides the built-in price table for cost_usd" },
);

const ModelName = T.String({
  pattern: "^[\\x21-\\x7e]{1,200}$",
  description: "Model name as the provider knows it (default per provider)",
  examples: ["claude-sonnet-4-6"],
  "x-hint": "1–200 printable characters without spaces",
});
const BaseUrl = T.String({
  maxLength: BASE_URL_MAX,
  description: "Any server speaking the provider's API: an absolute http(s) URL without credentials, query or fragment",
});
const ApiKeySecret = T.String({ ...SecretName, description: "Name of the vault secret holding the API key" });

/** The model as the API shows it: optional fields are omitted when unset, never null. */
export const Model = T.Object({
  provider: Provider,
  name: ModelName,
  base_url: T.Optional(BaseUrl),
  api_key_secret: T.Optional(ApiKeySecret),
  pricing: T.Optional(Pricing),
});
export type Model = Static<typeof Model>;

const SecretRef = T.Object({ secret: SecretName }, { additionalProperties: false });
const EnvValue = T.Union([T.String({ maxLength: ENV_VALUE_MAX, pattern: "^[^\\x00]*$" }), SecretRef], {
  description: 'A literal (no NUL, at most 32 KiB) or {"secret": "<vault name>"}',
});
export const Env = T.Record(T.String({ pattern: ENV_NAME }), EnvValue, {
  additionalProperties: false,
  maxProperties: ENV_MAX_ENTRIES,
  description: `Environment variables of the workspace (at most ${ENV_MAX_ENTRIES}): a literal or {secret}`,
  examples: [{ LOG_LEVEL: "debug", GITHUB_TOKEN: { secret: "GITHUB_TOKEN" } }],
  "x-hint": `names are letters, digits and underscores, not starting with a digit, at most 128; ${RESERVED_ENV_PREFIX}* and ${RESERVED_ENV.join(", ")} are reserved`,
});
export type Env = Static<typeof Env>;

/** MCP servers of a profile (src/mcp/): stdio commands run in the workspace, or streamable-HTTP URLs called from runcell. */
export const MCP_SERVERS_MAX = 20;
export const MCP_TIMEOUT_DEFAULT_MS = 120_000;
export const MCP_TIMEOUT_MAX_MS = 600_000;
export const HEADER_VALUE_MAX = 8 * 1024;
const McpName = T.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$", description: "Server name: its tools reach the model as mcp__<name>__<tool>", "x-hint": "1–32 letters, digits, _ or -, starting with a letter or digit; no \"__\" and no \"_\" at the end" });
const McpTimeout = T.Integer({ minimum: 1000, maximum: MCP_TIMEOUT_MAX_MS, description: `Per-call timeout in ms (default ${MCP_TIMEOUT_DEFAULT_MS})` });
const NoNul = (max: number, description?: string) => T.String({ maxLength: max, pattern: "^[^\\x00]*$", ...(description ? { description } : {}) });
export const McpStdioServer = T.Object(
  {
    name: McpName,
    transport: T.Literal("stdio"),
    command: T.String({ minLength: 1, maxLength: 4096, pattern: "^[^\\x00]*$", description: "Program run in the workspace (through Docker exec, stdin/stdout attached), e.g. npx or /usr/local/bin/server" }),
    args: T.Optional(T.Array(NoNul(ENV_VALUE_MAX), { maxItems: 100, description: "Its arguments" })),
    env: T.Optional(T.Record(T.String({ pattern: ENV_NAME }), EnvValue, { additionalProperties: false, maxProperties: ENV_MAX_ENTRIES, description: "Extra environment of the server process: a literal or {secret}" })),
    timeout_ms: T.Optional(McpTimeout),
  },
  { additionalProperties: false, title: "McpStdioServer" },
);
// A header value is bytes (fetch refuses characters above U+00FF): tab, visible ASCII and Latin-1, one line.
const HeaderValue = T.Union([T.String({ maxLength: HEADER_VALUE_MAX, pattern: "^[\\t\\x20-\\x7e\\x80-\\xff]*$", "x-hint": "one line of Latin-1 characters" }), SecretRef], {
  description: 'A literal (one line) or {"secret": "<vault name>"}, resolved at connect time and never stored in events or logs',
});
export const McpHttpServer = T.Object(
  {
    name: McpName,
    transport: T.Literal("http"),
    url: T.String({ minLength: 1, maxLength: BASE_URL_MAX, description: "Streamable-HTTP endpoint, called from runcell through the SSRF guard" }),
    headers: T.Optional(
      T.Record(T.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$" }), HeaderValue, { additionalProperties: false, maxProperties: 50, description: "Request headers, e.g. Authorization: {secret}" }),
    ),
    timeout_ms: T.Optional(McpTimeout),
  },
  { additionalProperties: false, title: "McpHttpServer" },
);
export const McpServer = T.Union([McpStdioServer, McpHttpServer], { description: "An MCP server: stdio (in the workspace) or http (streamable HTTP)" });
export const McpServers = T.Array(McpServer, { maxItems: MCP_SERVERS_MAX, description: "MCP servers whose tools the agent may use" });
export const AllowedTools = T.Array(T.String({ pattern: "^!?[A-Za-z0-9_*-]{1,200}$", "x-hint": "a tool name or pattern (* matches anything), ! in front excludes" }), {
  maxItems: 100,
  description: "Which MCP tools the model is offered: patterns over mcp__<server>__<tool> names; a leading ! excludes; empty: every MCP tool of the listed servers",
  examples: [["mcp__github__*", "!mcp__github__delete_*"]],
});

/** Labels a Docker host must have for the profile's workspaces (src/workspaces/hosts.ts). */
export const HostLabels = T.Array(
  T.String({ minLength: 1, maxLength: 264, pattern: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}(=[^,\\s]{0,200})?$", "x-hint": "key or key=value, as in the operator's --docker-host …?labels=" }),
  {
    maxItems: 20,
    uniqueItems: true,
    description: "Labels a Docker host must all have to run this profile's workspaces (key or key=value, matched whole); empty: any host",
    examples: [["gpu"], ["region=eu", "ssd"]],
  },
);

/** Git repositories checked out into the workspace before the first turn (src/git/). */
export const REPOSITORIES_MAX = 20;
export const Repository = T.Object(
  {
    url: T.String({ minLength: 1, maxLength: BASE_URL_MAX, description: "https:// or ssh:// (or scp-style git@host:path) URL, without credentials" }),
    ref: T.Optional(T.String({ minLength: 1, maxLength: 255, pattern: "^[A-Za-z0-9._/@+-]+$", description: "Branch, tag or commit (default: the remote's default branch)", "x-hint": "a branch, tag or commit SHA: letters, digits and . _ / @ + -" })),
    path: T.Optional(T.String({ minLength: 1, maxLength: 255, pattern: "^[^\\x00]*$", description: "Directory under /workspace (default: the repository's name)" })),
    credential_secret: T.Optional(T.String({ ...SecretName, description: "Vault secret with the token (or user:token; an ssh private key for ssh URLs), used by runcell's side only" })),
    depth: T.Optional(T.Integer({ minimum: 0, maximum: 1_000_000, description: "History depth (default 1: shallow; 0: the full history)" })),
  },
  { additionalProperties: false, title: "Repository" },
);
export const Repositories = T.Array(Repository, { maxItems: REPOSITORIES_MAX, description: "Git repositories cloned into the workspace before the first turn" });

const Name = Label;
const SystemPrompt = T.String({ maxLength: SYSTEM_PROMPT_MAX, pattern: "^(?=[\\s\\S]*\\S)[^\\x00]*$", "x-hint": "not blank, no NUL; omit it to get the default prompt" });
const Image = T.String({ maxLength: IMAGE_MAX, description: "Docker image reference, e.g. debian:bookworm or registry.example.com:5000/team/image:tag" });

export const ProfileRecord = T.Object(
  {
    ...recordColumns(profiles, ["id"]),
    name: T.String(),
    system_prompt: T.String(),
    model: Model,
    image: T.String(),
    tools: Tools,
    env: Env,
    limits: Limits,
    network: Network,
    warm_pool: T.Integer(),
    pool: T.Optional(PoolState),
    mcp_servers: McpServers,
    allowed_tools: AllowedTools,
    repositories: Repositories,
    host_labels: HostLabels,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Profile" },
);
export type ProfileRecord = Static<typeof ProfileRecord>;

/** The body's model: on PATCH `null` removes an optional field (and resets name to the provider's default). */
const modelInput = (providerRequired: boolean) =>
  T.Object(
    {
      provider: providerRequired ? Provider : T.Optional(Provider),
      name: T.Optional(Nullable(ModelName)),
      base_url: T.Optional(Nullable(BaseUrl)),
      api_key_secret: T.Optional(Nullable(ApiKeySecret)),
      pricing: T.Optional(Nullable(Pricing)),
    },
    { additionalProperties: false },
  );

const body = (providerRequired: boolean, title: string) =>
  Body(
    {
      name: T.Optional(T.String({ ...Name, description: 'Label (1–100 characters; default "Default")' })),
      system_prompt: T.Optional(T.String({ ...SystemPrompt, description: "Default: a general agent prompt describing the workspace" })),
      model: T.Optional(modelInput(providerRequired)),
      image: T.Optional(T.String({ ...Image, description: `${Image.description} (default: the server's --workspace-image)` })),
      tools: T.Optional(Tools),
      env: T.Optional(Env),
      limits: T.Optional(T.Partial(Limits, { additionalProperties: false })),
      network: T.Optional(Network),
      warm_pool: T.Optional(WarmPool),
      mcp_servers: T.Optional(McpServers),
      allowed_tools: T.Optional(AllowedTools),
      repositories: T.Optional(Repositories),
      host_labels: T.Optional(HostLabels),
    },
    { title },
  );

/** POST: every field optional; omitted fields get the defaults. */
export const ProfileCreateBody = body(true, "ProfileCreate");
export type ProfileCreate = Static<typeof ProfileCreateBody>;
/** PATCH: top-level fields replace, limits and model merge (src/agents/profile-rules.ts). */
export const ProfilePatchBody = body(false, "ProfilePatch");
export type ProfilePatch = Static<typeof ProfilePatchBody>;
