/**
 * The rules of profiles that a schema cannot state (src/schema/profile.ts states the rest): the
 * defaults a field gets when it is left out, a base_url's parts, the Docker image grammar, what the
 * demo provider refuses, and how a PATCH merges. `normalizeProfile` turns a valid body into a
 * complete profile; PATCH merges onto the current profile and runs the same function, so both
 * paths enforce exactly the same rules. Errors are VALIDATION_FAILED naming the exact field.
 */
import type { EnvValue, McpServerConfig, ModelConfig, ModelProvider, Network, ProfileLimits, RepositoryConfig } from "../db/schema.ts";
import { checkRepositories } from "../git/repository.ts";
import { checkMcpServers } from "../mcp/config.ts";
import { Errors } from "../lib/errors.ts";
import { isImageReference } from "../lib/image-ref.ts";
import { check } from "../schema/validate.ts";
import { type Limits, LIMIT_BOUNDS, type ProfileCreate, ProfileCreateBody, type ProfilePatch, TOOL_NAMES, type ToolName } from "../schema/profile.ts";

export interface ProfileFields {
  name: string;
  system_prompt: string;
  model: ModelConfig;
  image: string;
  tools: ToolName[];
  env: Record<string, EnvValue>;
  limits: ProfileLimits;
  network: Network;
  warm_pool: number;
  mcp_servers: McpServerConfig[];
  allowed_tools: string[];
  repositories: RepositoryConfig[];
  host_labels: string[];
}

export interface ProfileDefaults {
  /** Default image (config.workspaceImage). */
  image: string;
  /** Default limits.max_concurrency (operator setting, else config). */
  maxConcurrency: number;
  /**
   * The user's ceilings of the operator's policy (none for an admin): a limit the body leaves out
   * gets the default lowered to its ceiling, never a default the save would then refuse.
   */
  ceilings?: Partial<ProfileLimits>;
  /** Environment the default model is chosen from (process.env). */
  env?: Record<string, string | undefined>;
}

/** The model name used when a provider is chosen without one. */
export const DEFAULT_MODEL_NAME: Record<ModelProvider, string> = {
  anthropic: "claude-sonnet-4-6",
  openai: "gpt-4.1",
  demo: "demo",
};

export const DEFAULT_PROFILE_NAME = "Default";

export function defaultLimits(maxConcurrency: number): Limits {
  return { max_turns: 50, max_budget_usd: 5, max_concurrency: maxConcurrency, memory_mb: 2048, cpus: 1, pids: 1024 };
}

/** Each default limit lowered to its ceiling, if it has one. */
function fitted(limits: Limits, ceilings: Partial<ProfileLimits> | undefined): Limits {
  if (!ceilings) return limits;
  const out = { ...limits };
  for (const k of Object.keys(out) as (keyof Limits)[]) {
    const max = ceilings[k];
    if (typeof max === "number" && out[k] > max) out[k] = max;
  }
  return out;
}

/** The operator's default concurrency, kept inside the schema's bounds. */
export function clampConcurrency(n: number): number {
  const b = LIMIT_BOUNDS.max_concurrency;
  return Math.min(b.max, Math.max(b.min, Math.trunc(n)));
}

/**
 * The model of a profile created without one: Anthropic when the server has ANTHROPIC_API_KEY,
 * else OpenAI when it has OPENAI_API_KEY, else the offline demo model (read at call time).
 */
export function defaultModel(env: Record<string, string | undefined> = process.env): ModelConfig {
  if (env.ANTHROPIC_API_KEY) return { provider: "anthropic", name: DEFAULT_MODEL_NAME.anthropic };
  if (env.OPENAI_API_KEY) return { provider: "openai", name: DEFAULT_MODEL_NAME.openai };
  return { provider: "demo", name: DEFAULT_MODEL_NAME.demo };
}

const bad = (field: string, message: string, reason: string) => Errors.validation(field, message, { reason });

/** A base_url the schema let through: absolute http(s), no credentials, no query or fragment. */
function baseUrl(s: string): string {
  const field = "model.base_url";
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw bad(field, `${field} must be an absolute http(s) URL`, "invalid URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw bad(field, `${field} must use http or https`, "invalid scheme");
  if (u.username || u.password) throw bad(field, `${field} must not contain credentials: store the key in the vault and name it in model.api_key_secret`, "credentials in URL");
  if (u.search || u.hash || s.includes("#")) throw bad(field, `${field} must not have a query string or fragment`, "query or fragment");
  return s;
}

/** The model of a (schema-valid) body, with its provider's default name; null fields are dropped. */
function model(m: NonNullable<ProfileCreate["model"]> | undefined, env?: Record<string, string | undefined>): ModelConfig {
  if (m === undefined) return defaultModel(env);
  const out: ModelConfig = { provider: m.provider, name: m.name ?? DEFAULT_MODEL_NAME[m.provider] };
  if (m.base_url != null) {
    if (m.provider === "demo") throw bad("model.base_url", "the demo provider takes no base_url", "not allowed");
    out.base_url = baseUrl(m.base_url);
  }
  if (m.api_key_secret != null) {
    if (m.provider === "demo") throw bad("model.api_key_secret", "the demo provider needs no API key", "not allowed");
    out.api_key_secret = m.api_key_secret;
  }
  if (m.pricing != null) out.pricing = { input_per_mtok: m.pricing.input_per_mtok, output_per_mtok: m.pricing.output_per_mtok };
  return out;
}

function image(v: string | undefined, fallback: string): string {
  if (v === undefined) return fallback;
  if (!isImageReference(v)) throw bad("image", "image must be a Docker image reference such as debian:bookworm or registry.example.com:5000/team/image:tag", "invalid image reference");
  return v;
}

/** A complete, valid profile from a create body (checked against the schema here); missing fields get their defaults. */
export function normalizeProfile(raw: unknown, d: ProfileDefaults): ProfileFields {
  const b = check(ProfileCreateBody, raw);
  return {
    name: b.name?.trim() ?? DEFAULT_PROFILE_NAME,
    system_prompt: b.system_prompt ?? DEFAULT_SYSTEM_PROMPT,
    model: model(b.model, d.env),
    image: image(b.image, d.image),
    tools: b.tools ?? [...TOOL_NAMES],
    env: b.env ?? {},
    limits: { ...fitted(defaultLimits(d.maxConcurrency), d.ceilings), ...b.limits },
    network: b.network ?? "none",
    warm_pool: b.warm_pool ?? 0,
    mcp_servers: checkMcpServers((b.mcp_servers ?? []) as McpServerConfig[]),
    allowed_tools: b.allowed_tools ?? [],
    repositories: checkRepositories(b.repositories ?? []),
    host_labels: b.host_labels ?? [],
  };
}

/**
 * PATCH semantics: top-level fields replace (`env` and `tools` as a whole); `limits` merges
 * shallowly; `model` merges shallowly while the provider stays the same (`null` removes
 * base_url, api_key_secret or pricing, and resets name to the provider's default) — a patch that
 * changes `model.provider` starts the model over from that patch alone. Returns the merged body
 * for `normalizeProfile`.
 */
export function mergeProfilePatch(current: ProfileFields, patch: ProfilePatch): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...current, model: { ...current.model }, limits: { ...current.limits } };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) continue;
    if (k === "limits") merged.limits = { ...current.limits, ...(v as object) };
    else if (k === "model") {
      const m = v as Record<string, unknown>;
      const sameProvider = m.provider === undefined || m.provider === current.model.provider;
      const next: Record<string, unknown> = sameProvider ? { ...current.model, ...m } : { ...m };
      for (const mk of Object.keys(next)) if (next[mk] === null && mk !== "provider") delete next[mk];
      merged.model = next;
    } else merged[k] = v;
  }
  return merged;
}

export const DEFAULT_SYSTEM_PROMPT = `You are a capable, careful software agent working for the user. You act inside your own Linux container, called the workspace, and your tools run there.

Your workspace:
- Your working directory is /workspace. Files there persist for the whole session (across turns and container restarts); anything outside it may be lost. Relative paths resolve under /workspace.
- The container may have no network access, and its image may be minimal. Check what is installed before relying on it (for example \`command -v python3\`), and if something you need is missing or the network is unreachable, say so plainly instead of retrying.
- You are not root on the user's machine: the container is a sandbox with limited memory, CPU and processes.

How to work:
- Use your tools to do the work rather than describing it: run commands, read files before editing them, and verify results (run the code, the tests, the build) before you say something is done.
- Prefer small, exact edits to existing files over rewriting them. Never destroy the user's files or history without being asked.
- When a decision genuinely belongs to the user (a choice between approaches, missing information, anything destructive or irreversible), ask with the AskUserQuestion tool if you have it, offering clear options. Otherwise make a sensible choice and state it.
- For long work, you may send the user a short notification with the Notify tool when something important finishes or fails.
- Never print, log or write secrets (API keys, tokens, passwords found in environment variables or files) into your answers or into files unless the user explicitly asks.

Your final answer:
- Be concise and concrete: what you did, what you found, and anything the user must do next.
- Use Markdown. To show an image you created (a chart, a screenshot), save it under /workspace and reference it with Markdown, for example ![chart](chart.png); it will be shown to the user.`;
