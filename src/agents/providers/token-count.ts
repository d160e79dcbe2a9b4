/**
 * Token counts as a model server reports them, read here for both providers. A count is a
 * non-negative safe integer; anything else (a fraction, a string, a negative, a number past 2^53)
 * is a broken server's figure and counts as absent, as if the field were not sent. Taken as it
 * came, such a figure was stored on the task and session: a fraction or a number past 2^53 made
 * every listing of them fail its response schema, 1.5e308 made the cost Infinity, and a string
 * was added as text ("12" became 1200 tokens).
 */
import type { Logger } from "../../log.ts";
import type { ProviderName } from "./model-error.ts";

export class TokenCounts {
  private warned = new Set<string>();

  /** One per model call: each bad field is logged once per call, however many events repeat it. */
  constructor(
    private readonly provider: ProviderName,
    private readonly log?: Logger,
  ) {}

  /** `value` as a token count; null when absent or invalid. `field`: its wire name, for the warning. */
  read(value: unknown, field: string): number | null {
    if (value == null) return null;
    if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
    if (!this.warned.has(field)) {
      this.warned.add(field);
      // The field's name only: the value and the rest of the body are the server's, not ours to log.
      this.log?.warn("the model server reported an invalid token count; it is counted as absent", { provider: this.provider, field });
    }
    return null;
  }
}
