/**
 * A tool call cut off by the output token limit (Anthropic's `max_tokens` stop, OpenAI's
 * `finish_reason: "length"`): its arguments are whatever had been generated when the limit hit,
 * so it is not run (Anthropic's guidance) — even when the cut text happens to parse. It gets an
 * error result instead, which tells the model why, so it can try again with a smaller call.
 */
import type { ContentBlock, StopReason } from "./providers/types.ts";

export const CUT_OFF_RESULT =
  "Not run: the arguments of this call were cut off at the output token limit. Make a smaller call (split the work into several calls, or write a long file in parts).";

/**
 * Marks the call an answer stopped by the token limit ended in (stored with the answer, so a
 * restart does not run it either). Only the last block can be cut: the calls before it were
 * complete when the next block began.
 */
export function markCutOff(content: ContentBlock[], stop: StopReason): void {
  const last = content.at(-1);
  if (stop === "max_tokens" && last?.type === "tool_use") last.cut_off = true;
}
