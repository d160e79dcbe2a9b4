/** cost_usd: profile pricing, else the built-in table (exact ids, snapshots, aliases), else 0. */
import { describe, expect, test } from "bun:test";
import { costUsd, KNOWN_MODEL_PRICING, knownPricing, PRICING_TABLE_DATE } from "../../src/agents/pricing.ts";

const M = 1_000_000;

describe("pricing", () => {
  test("table lookups: exact ids of current Claude and GPT models", () => {
    expect(knownPricing("claude-sonnet-4-6")).toEqual({ input_per_mtok: 3, output_per_mtok: 15 });
    expect(knownPricing("claude-opus-4-7")).toEqual({ input_per_mtok: 5, output_per_mtok: 25 });
    expect(knownPricing("claude-haiku-4-5")).toEqual({ input_per_mtok: 1, output_per_mtok: 5 });
    expect(knownPricing("gpt-4.1")).toEqual({ input_per_mtok: 2, output_per_mtok: 8 });
    expect(knownPricing("gpt-5.4-mini")).toEqual({ input_per_mtok: 0.75, output_per_mtok: 4.5 });
    expect(knownPricing("o4-mini")).toEqual({ input_per_mtok: 1.1, output_per_mtok: 4.4 });
  });

  test("dated snapshots, -latest aliases, vendor prefixes and dotted versions resolve to the family", () => {
    expect(knownPricing("claude-sonnet-4-5-20250929")).toEqual(KNOWN_MODEL_PRICING["claude-sonnet-4-5"]!);
    expect(knownPricing("claude-haiku-4-5-20251001")).toEqual(KNOWN_MODEL_PRICING["claude-haiku-4-5"]!);
    expect(knownPricing("gpt-4o-2024-08-06")).toEqual(KNOWN_MODEL_PRICING["gpt-4o"]!);
    expect(knownPricing("claude-3-5-haiku-latest")).toEqual(KNOWN_MODEL_PRICING["claude-3-5-haiku"]!);
    expect(knownPricing("anthropic/claude-sonnet-4.6")).toEqual(KNOWN_MODEL_PRICING["claude-sonnet-4-6"]!);
    expect(knownPricing("openai/gpt-4o-mini")).toEqual(KNOWN_MODEL_PRICING["gpt-4o-mini"]!);
    expect(knownPricing("GPT-4.1-Mini")).toEqual(KNOWN_MODEL_PRICING["gpt-4.1-mini"]!);
  });

  test("a longer id is never priced as its prefix (gpt-4o-mini is not gpt-4o; gpt-5-pro is unknown)", () => {
    expect(knownPricing("gpt-4o-mini")).toEqual({ input_per_mtok: 0.15, output_per_mtok: 0.6 });
    expect(knownPricing("gpt-5-pro")).toBeNull();
    expect(knownPricing("claude-opus-4-1-extra")).toBeNull();
  });

  test("unknown and local models cost 0", () => {
    expect(knownPricing("llama3.1:8b")).toBeNull();
    expect(costUsd({ name: "llama3.1:8b" }, { input_tokens: M, output_tokens: M })).toBe(0);
    expect(costUsd({ name: "demo" }, { input_tokens: 5000, output_tokens: 900 })).toBe(0);
  });

  test("cost = input × input price + output × output price, per million", () => {
    expect(costUsd({ name: "claude-sonnet-4-6" }, { input_tokens: M, output_tokens: M })).toBe(18);
    expect(costUsd({ name: "claude-sonnet-4-6" }, { input_tokens: 1000, output_tokens: 500 })).toBe(0.0105);
    expect(costUsd({ name: "gpt-4o-mini" }, { input_tokens: 3, output_tokens: 7 })).toBe(0.00000465);
    expect(costUsd({ name: "gpt-4o-mini" }, { input_tokens: 0, output_tokens: 0 })).toBe(0);
  });

  test("the profile's pricing wins over the table, also for unknown models", () => {
    const pricing = { input_per_mtok: 0.5, output_per_mtok: 1.5 };
    expect(costUsd({ name: "claude-opus-4-7", pricing }, { input_tokens: 2 * M, output_tokens: M })).toBe(2.5);
    expect(costUsd({ name: "my-local-model", pricing }, { input_tokens: M, output_tokens: 0 })).toBe(0.5);
    expect(costUsd({ name: "claude-opus-4-7", pricing: null }, { input_tokens: M, output_tokens: 0 })).toBe(5);
  });

  test("the table is dated", () => {
    expect(PRICING_TABLE_DATE).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
});
