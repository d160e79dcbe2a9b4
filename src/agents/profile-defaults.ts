/**
 * What a profile gets for every field the caller leaves out, and the bounds every field must stay
 * within. Defaults are resolved when a profile is created (and stored), so a profile never changes
 * behind its owner's back when the server's environment or the operator's settings change.
 */
import type { ModelConfig, ProfileLimits } from "../db/schema.ts";

export { TOOL_NAMES, type ToolName } from "./tools/names.ts";

export const PROVIDERS = ["anthropic", "openai", "demo"] as const;
export type Provider = (typeof PROVIDERS)[number];

export const NETWORKS = ["none", "bridge"] as const;

/** The model name used when a provider is chosen without one. */
export const DEFAULT_MODEL_NAME: Record<Provider, string> = {
  anthropic: "claude-sonnet-4-6",
  openai: "gpt-4.1",
  demo: "demo",
};

export const DEFAULT_PROFILE_NAME = "Default";

/** Numeric bounds of `limits` (inclusive unless `exclusiveMin`). */
export const LIMIT_BOUNDS: Record<keyof ProfileLimits, { min: number; max: number; integer: boolean; exclusiveMin?: boolean }> = {
  max_turns: { min: 1, max: 1000, integer: true },
  max_budget_usd: { min: 0, max: 10_000, integer: false, exclusiveMin: true },
  max_concurrency: { min: 1, max: 1000, integer: true },
  memory_mb: { min: 64, max: 262_144, integer: true },
  cpus: { min: 0.1, max: 64, integer: false },
  pids: { min: 32, max: 65_536, integer: true },
};

export const LIMIT_KEYS = Object.keys(LIMIT_BOUNDS) as (keyof ProfileLimits)[];

export function defaultLimits(maxConcurrency: number): ProfileLimits {
  return { max_turns: 50, max_budget_usd: 5, max_concurrency: maxConcurrency, memory_mb: 2048, cpus: 1, pids: 1024 };
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
