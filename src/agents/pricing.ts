/**
 * What a model response cost: the profile's own pricing when it has one, else the built-in table
 * of known models below, else 0 (local and unknown models are free as far as we can tell).
 */
import { roundUsd } from "../lib/usd.ts";

export interface ModelPricing {
  input_per_mtok: number;
  output_per_mtok: number;
}

/**
 * List prices in USD per million tokens (standard tier, no batch or cache discounts), compiled
 * 2026-11-22 from the providers' published prices. Prices change: a profile's `model.pricing`
 * always wins over this table.
 */
export const PRICING_TABLE_DATE = "2026-11-22";

const p = (input_per_mtok: number, output_per_mtok: number): ModelPricing => ({ input_per_mtok, output_per_mtok });

export const KNOWN_MODEL_PRICING: Readonly<Record<string, ModelPricing>> = Object.freeze({
  // Anthropic
  "claude-opus-4-7": p(5, 25),
  "claude-opus-4-6": p(5, 25),
  "claude-opus-4-5": p(5, 25),
  "claude-opus-4-1": p(15, 75),
  "claude-opus-4-0": p(15, 75),
  "claude-opus-4": p(15, 75),
  "claude-sonnet-4-6": p(3, 15),
  "claude-sonnet-4-5": p(3, 15),
  "claude-sonnet-4-0": p(3, 15),
  "claude-sonnet-4": p(3, 15),
  "claude-3-7-sonnet": p(3, 15),
  "claude-haiku-4-5": p(1, 5),
  "claude-3-5-haiku": p(0.8, 4),
  "claude-3-haiku": p(0.25, 1.25),
  // OpenAI
  "gpt-5.5": p(5, 30),
  "gpt-5.4": p(2.5, 15),
  "gpt-5.4-mini": p(0.75, 4.5),
  "gpt-5.4-nano": p(0.2, 1.25),
  "gpt-5.2": p(1.75, 14),
  "gpt-5.1": p(1.25, 10),
  "gpt-5": p(1.25, 10),
  "gpt-5-mini": p(0.25, 2),
  "gpt-5-nano": p(0.05, 0.4),
  "gpt-4.1": p(2, 8),
  "gpt-4.1-mini": p(0.4, 1.6),
  "gpt-4.1-nano": p(0.1, 0.4),
  "gpt-4o": p(2.5, 10),
  "gpt-4o-mini": p(0.15, 0.6),
  o3: p(2, 8),
  "o3-mini": p(1.1, 4.4),
  "o4-mini": p(1.1, 4.4),
  o1: p(15, 60),
});

/** Lowercase, vendor prefix dropped (OpenRouter's "anthropic/…"), dots as dashes ("4.5" = "4-5"). */
const normalize = (name: string) => name.trim().toLowerCase().replace(/^[a-z0-9_-]+\//, "").replace(/\./g, "-");
const TABLE = new Map(Object.entries(KNOWN_MODEL_PRICING).map(([k, v]) => [normalize(k), v]));
/** Suffixes naming a snapshot of the same model: -20250929, -2025-04-14, -latest. */
const SNAPSHOT = /-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$/;

/** The built-in price of a model id (exact, or a dated snapshot / -latest alias of a known id), or null. */
export function knownPricing(model: string): ModelPricing | null {
  const n = normalize(model);
  return TABLE.get(n) ?? TABLE.get(n.replace(SNAPSHOT, "")) ?? null;
}

/** USD for `usage` (rounded to 1e-9, so sums stay clean). */
export function costUsd(
  model: { name: string; pricing?: ModelPricing | null },
  usage: { input_tokens: number; output_tokens: number },
): number {
  const price = model.pricing ?? knownPricing(model.name);
  if (!price) return 0;
  const usd = (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / 1_000_000;
  return roundUsd(usd);
}
