/**
 * Validation and normalisation of profile input. One function, `normalizeProfile`, turns a raw
 * object into a complete, valid profile (filling defaults for what is missing); PATCH merges the
 * patch onto the current profile (`mergeProfilePatch`) and runs the same function, so both paths
 * enforce exactly the same rules. Every error is VALIDATION_FAILED with `details.field` naming
 * the exact field: "model.base_url", "env.FOO", "limits.max_turns", "tools[2]"…
 */
import type { EnvValue, ModelConfig, ProfileLimits } from "../db/schema.ts";
import { Errors } from "../lib/errors.ts";
import { checkSecretName } from "../vault/names.ts";
import {
  DEFAULT_MODEL_NAME,
  DEFAULT_PROFILE_NAME,
  DEFAULT_SYSTEM_PROMPT,
  defaultLimits,
  defaultModel,
  LIMIT_BOUNDS,
  LIMIT_KEYS,
  NETWORKS,
  PROVIDERS,
  type Provider,
  TOOL_NAMES,
  type ToolName,
} from "./profile-defaults.ts";
import { isImageReference } from "./image-ref.ts";

export interface ProfileFields {
  name: string;
  system_prompt: string;
  model: ModelConfig;
  image: string;
  tools: ToolName[];
  env: Record<string, EnvValue>;
  limits: ProfileLimits;
  network: "none" | "bridge";
}

export interface ProfileDefaults {
  /** Default image (config.workspaceImage). */
  image: string;
  /** Default limits.max_concurrency (operator setting, else config). */
  maxConcurrency: number;
  /** Environment the default model is chosen from (process.env). */
  env?: Record<string, string | undefined>;
}

export const FIELDS = ["name", "system_prompt", "model", "image", "tools", "env", "limits", "network"] as const;
const MODEL_FIELDS = ["provider", "name", "base_url", "api_key_secret", "pricing"] as const;
const PRICING_FIELDS = ["input_per_mtok", "output_per_mtok"] as const;

export const NAME_MAX = 100;
export const SYSTEM_PROMPT_MAX = 100_000;
export const MODEL_NAME = /^[\x21-\x7e]{1,200}$/;
export const BASE_URL_MAX = 2048;
export const IMAGE_MAX = 512;
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const ENV_MAX_ENTRIES = 100;
export const ENV_VALUE_MAX = 32 * 1024;
export const PRICE_MAX = 10_000;
/** Names the platform or Docker set in the container; a profile may not override them. */
export const RESERVED_ENV = new Set(["HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"]);
export const RESERVED_ENV_PREFIX = "RUNCELL_";

const bad = (field: string, message: string, reason: string) => Errors.validation(field, message, { reason });

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function object(v: unknown, field: string): Record<string, unknown> {
  if (!isPlainObject(v)) throw bad(field, `${field} must be an object`, "expected object");
  return v;
}

function noUnknown(obj: Record<string, unknown>, allowed: readonly string[], prefix: string) {
  for (const k of Object.keys(obj)) if (!allowed.includes(k)) throw bad(prefix + k, `Unknown field "${prefix}${k}"`, "unknown field");
}

function string(v: unknown, field: string): string {
  if (typeof v !== "string") throw bad(field, `${field} must be a string`, "expected string");
  return v;
}

function number(v: unknown, field: string, b: { min: number; max: number; integer: boolean; exclusiveMin?: boolean }): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw bad(field, `${field} must be a number`, "expected number");
  if (b.integer && !Number.isInteger(v)) throw bad(field, `${field} must be an integer`, "expected integer");
  if (b.exclusiveMin ? v <= b.min : v < b.min) throw bad(field, `${field} must be ${b.exclusiveMin ? "greater than" : "at least"} ${b.min}`, "too small");
  if (v > b.max) throw bad(field, `${field} must be at most ${b.max}`, "too large");
  return v;
}

function name(v: unknown): string {
  if (v === undefined) return DEFAULT_PROFILE_NAME;
  const n = string(v, "name").trim();
  if (!n) throw bad("name", "name must not be empty", "empty");
  if (n.length > NAME_MAX) throw bad("name", `name must be at most ${NAME_MAX} characters`, "too long");
  if (/[\x00-\x1f\x7f]/.test(n)) throw bad("name", "name must not contain control characters", "control character");
  return n;
}

function systemPrompt(v: unknown): string {
  if (v === undefined) return DEFAULT_SYSTEM_PROMPT;
  const p = string(v, "system_prompt");
  if (!p.trim()) throw bad("system_prompt", "system_prompt must not be empty (omit it to get the default prompt)", "empty");
  if (p.length > SYSTEM_PROMPT_MAX) throw bad("system_prompt", `system_prompt must be at most ${SYSTEM_PROMPT_MAX} characters`, "too long");
  if (p.includes("\0")) throw bad("system_prompt", "system_prompt must not contain NUL characters", "NUL character");
  return p;
}

function baseUrl(v: unknown): string {
  const s = string(v, "model.base_url");
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw bad("model.base_url", "model.base_url must be an absolute http(s) URL", "invalid URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw bad("model.base_url", "model.base_url must use http or https", "invalid scheme");
  if (s.length > BASE_URL_MAX) throw bad("model.base_url", `model.base_url must be at most ${BASE_URL_MAX} characters`, "too long");
  if (u.username || u.password) {
    throw bad("model.base_url", "model.base_url must not contain credentials: store the key in the vault and name it in model.api_key_secret", "credentials in URL");
  }
  if (u.search || u.hash || s.includes("#")) throw bad("model.base_url", "model.base_url must not have a query string or fragment", "query or fragment");
  return s;
}

function pricing(v: unknown): { input_per_mtok: number; output_per_mtok: number } {
  const p = object(v, "model.pricing");
  noUnknown(p, PRICING_FIELDS, "model.pricing.");
  const out = { input_per_mtok: 0, output_per_mtok: 0 };
  for (const k of PRICING_FIELDS) {
    const field = `model.pricing.${k}`;
    if (p[k] === undefined) throw bad(field, `${field} is required`, "required");
    out[k] = number(p[k], field, { min: 0, max: PRICE_MAX, integer: false });
  }
  return out;
}

export function normalizeModel(v: unknown, env?: Record<string, string | undefined>): ModelConfig {
  if (v === undefined) return defaultModel(env);
  const m = object(v, "model");
  noUnknown(m, MODEL_FIELDS, "model.");
  if (m.provider === undefined || m.provider === null) throw bad("model.provider", `model.provider is required (${PROVIDERS.join(", ")})`, "required");
  if (typeof m.provider !== "string" || !(PROVIDERS as readonly string[]).includes(m.provider)) {
    throw bad("model.provider", `model.provider must be one of ${PROVIDERS.join(", ")}`, "not allowed");
  }
  const provider = m.provider as Provider;
  const out: ModelConfig = { provider, name: DEFAULT_MODEL_NAME[provider] };
  if (m.name !== undefined && m.name !== null) {
    out.name = string(m.name, "model.name");
    if (!MODEL_NAME.test(out.name)) throw bad("model.name", "model.name must be 1–200 printable characters without spaces", "invalid model name");
  }
  if (m.base_url !== undefined && m.base_url !== null) {
    if (provider === "demo") throw bad("model.base_url", "the demo provider takes no base_url", "not allowed");
    out.base_url = baseUrl(m.base_url);
  }
  if (m.api_key_secret !== undefined && m.api_key_secret !== null) {
    if (provider === "demo") throw bad("model.api_key_secret", "the demo provider needs no API key", "not allowed");
    out.api_key_secret = checkSecretName(m.api_key_secret, "model.api_key_secret");
  }
  if (m.pricing !== undefined && m.pricing !== null) out.pricing = pricing(m.pricing);
  return out;
}

function image(v: unknown, fallback: string): string {
  if (v === undefined) return fallback;
  const s = string(v, "image");
  if (s.length > IMAGE_MAX || !isImageReference(s)) {
    throw bad("image", "image must be a Docker image reference such as debian:bookworm or registry.example.com:5000/team/image:tag", "invalid image reference");
  }
  return s;
}

function tools(v: unknown): ToolName[] {
  if (v === undefined) return [...TOOL_NAMES];
  if (!Array.isArray(v)) throw bad("tools", `tools must be an array of tool names (${TOOL_NAMES.join(", ")})`, "expected array");
  const seen = new Set<string>();
  v.forEach((tool, i) => {
    const field = `tools[${i}]`;
    if (typeof tool !== "string" || !(TOOL_NAMES as readonly string[]).includes(tool)) throw bad(field, `${field} must be one of ${TOOL_NAMES.join(", ")}`, "not allowed");
    if (seen.has(tool)) throw bad(field, `${field}: ${tool} is listed twice`, "duplicate");
    seen.add(tool);
  });
  return v as ToolName[];
}

function env(v: unknown): Record<string, EnvValue> {
  if (v === undefined) return {};
  const e = object(v, "env");
  const keys = Object.keys(e);
  if (keys.length > ENV_MAX_ENTRIES) throw bad("env", `env may hold at most ${ENV_MAX_ENTRIES} variables`, "too many");
  const out: Record<string, EnvValue> = {};
  for (const key of keys) {
    const field = `env.${key}`;
    if (!ENV_NAME.test(key)) throw bad(field, `${field}: environment variable names are letters, digits and underscores, not starting with a digit (at most 128)`, "invalid name");
    if (RESERVED_ENV.has(key) || key.startsWith(RESERVED_ENV_PREFIX)) throw bad(field, `${field}: ${key} is reserved by the platform`, "reserved name");
    const val = e[key];
    if (typeof val === "string") {
      if (val.length > ENV_VALUE_MAX) throw bad(field, `${field} must be at most ${ENV_VALUE_MAX} characters`, "too long");
      if (val.includes("\0")) throw bad(field, `${field} must not contain NUL characters`, "NUL character");
      out[key] = val;
    } else if (isPlainObject(val) && Object.keys(val).length === 1 && "secret" in val) {
      out[key] = { secret: checkSecretName(val.secret, field) };
    } else {
      throw bad(field, `${field} must be a string or {"secret": "<vault name>"}`, "expected string or secret reference");
    }
  }
  return out;
}

function limits(v: unknown, maxConcurrency: number): ProfileLimits {
  const out = defaultLimits(maxConcurrency);
  if (v === undefined) return out;
  const l = object(v, "limits");
  noUnknown(l, LIMIT_KEYS, "limits.");
  for (const k of LIMIT_KEYS) if (l[k] !== undefined) out[k] = number(l[k], `limits.${k}`, LIMIT_BOUNDS[k]);
  return out;
}

function network(v: unknown): "none" | "bridge" {
  if (v === undefined) return "none";
  if (typeof v !== "string" || !(NETWORKS as readonly string[]).includes(v)) throw bad("network", `network must be one of ${NETWORKS.join(", ")}`, "not allowed");
  return v as "none" | "bridge";
}

/** A complete, valid profile from raw input; missing fields get their defaults. */
export function normalizeProfile(raw: unknown, d: ProfileDefaults): ProfileFields {
  if (!isPlainObject(raw)) throw bad("body", "Request body must be a JSON object", "expected object");
  noUnknown(raw, FIELDS, "");
  for (const k of FIELDS) if (raw[k] === null) throw bad(k, `${k} must not be null (omit it to get the default)`, "null");
  return {
    name: name(raw.name),
    system_prompt: systemPrompt(raw.system_prompt),
    model: normalizeModel(raw.model, d.env),
    image: image(raw.image, d.image),
    tools: tools(raw.tools),
    env: env(raw.env),
    limits: limits(raw.limits, d.maxConcurrency),
    network: network(raw.network),
  };
}

/**
 * PATCH semantics: top-level fields replace (`env` and `tools` as a whole); `limits` merges
 * shallowly; `model` merges shallowly while the provider stays the same (`null` removes
 * base_url, api_key_secret or pricing, and resets name to the provider's default) — a patch that
 * changes `model.provider` starts the model over from that patch alone. Returns the raw merged
 * object for `normalizeProfile`.
 */
export function mergeProfilePatch(current: ProfileFields, patch: unknown): Record<string, unknown> {
  if (!isPlainObject(patch)) throw bad("body", "Request body must be a JSON object", "expected object");
  noUnknown(patch, FIELDS, "");
  const merged: Record<string, unknown> = { ...current, model: { ...current.model }, limits: { ...current.limits } };
  for (const k of Object.keys(patch)) {
    const v = patch[k];
    if (v === null) throw bad(k, `${k} must not be null`, "null");
    if (k === "limits") {
      const l = object(v, "limits");
      for (const [lk, lv] of Object.entries(l)) if (lv === null) throw bad(`limits.${lk}`, `limits.${lk} must not be null`, "null");
      merged.limits = { ...current.limits, ...l };
    } else if (k === "model") {
      const m = object(v, "model");
      const sameProvider = m.provider === undefined || m.provider === current.model.provider;
      const next: Record<string, unknown> = sameProvider ? { ...current.model, ...m } : { ...m };
      for (const mk of Object.keys(next)) if (next[mk] === null && mk !== "provider") delete next[mk];
      merged.model = next;
    } else merged[k] = v;
  }
  return merged;
}
