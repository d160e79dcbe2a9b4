/**
 * Multi-chain playbook runs. A run with continuations left is offered one more tool,
 * `ContinueInNewChain {handoff}`: the orchestrator then starts a new chain — a fresh model context
 * made of the run's prompt and the hand-off note, in the same workspace (files carry over) — and
 * emits `turn.continuing`. Turn and budget limits count across chains (they are the task's). A call
 * once the continuations are used up ends the run normally; its result says so.
 */
import { Type } from "@sinclair/typebox";
import type { ToolSpec } from "./providers/types.ts";

export const CONTINUE_TOOL = "ContinueInNewChain";
export const HANDOFF_MAX = 50_000;

const inputSchema = Type.Object({
  handoff: Type.String({
    minLength: 1,
    maxLength: HANDOFF_MAX,
    description: "Everything the next chain needs to carry on: what is done, what is left, where the files are, decisions taken",
  }),
});

export const continueToolSpec: ToolSpec = {
  name: CONTINUE_TOOL,
  description:
    "Continue this run in a fresh context. Your conversation so far is dropped and the next chain starts from the original task plus your hand-off note; files in /workspace carry over. " +
    "Use it when the work is long and this context is getting full, or a clean start would help. Write the hand-off note so that someone with no memory of this conversation can finish the work.",
  input_schema: JSON.parse(JSON.stringify(inputSchema)) as Record<string, unknown>,
};

/** The handoff of a call, or null when the input is not a usable one. */
export function handoffOf(input: Record<string, unknown>): string | null {
  const h = input.handoff;
  return typeof h === "string" && h.trim() !== "" && h.length <= HANDOFF_MAX ? h : null;
}

/** The first user message of chain `n`: the run's prompt and the previous chain's hand-off note. */
export function chainPrompt(prompt: string, handoff: string, n: number, max: number): string {
  return `${prompt}\n\n<handoff from_chain="${n}" chain="${n + 1}" of="${max + 1}">\nThis run continues in a fresh context. The previous chain left this note:\n\n${handoff}\n</handoff>`;
}

/** The result of a run that asked to continue with no continuation left. */
export function exhaustedResult(handoff: string, max: number): string {
  return `${handoff}\n\n_(The run stops here: its ${max} continuation${max === 1 ? "" : "s"} ${max === 1 ? "is" : "are"} used up.)_`;
}
