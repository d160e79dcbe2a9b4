import { Type } from "@sinclair/typebox";
import type { Tool } from "./types.ts";

/**
 * AskUserQuestion is not run like the others: the loop emits `task:ask_user`, the task waits in
 * `waiting_input`, and the user's answer becomes the tool result. `run` is never called.
 */
export const askUserTool: Tool = {
  name: "AskUserQuestion",
  description:
    "Ask the user one or more questions and wait for the answer. Each question may offer options to choose from. " +
    "The answer comes back as text.",
  input_schema: Type.Object({
    questions: Type.Array(
      Type.Object({
        question: Type.String({ minLength: 1 }),
        header: Type.Optional(Type.String()),
        options: Type.Array(Type.Object({ label: Type.String({ minLength: 1 }), description: Type.Optional(Type.String()) })),
        multiSelect: Type.Optional(Type.Boolean()),
      }),
      { minItems: 1, maxItems: 10 },
    ),
  }),
  async run() {
    throw new Error("AskUserQuestion is handled by the agent loop");
  },
};

/** The flattened form sent as `task:ask_user`. */
export function flattenQuestions(input: Record<string, unknown>): { question: string; options: { label: string }[] }[] {
  const qs = (input.questions as { question: string; options?: { label: string }[] }[]) ?? [];
  return qs.map((q) => ({ question: q.question, options: (q.options ?? []).map((o) => ({ label: o.label })) }));
}
