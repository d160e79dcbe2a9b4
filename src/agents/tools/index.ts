/** The tool registry: the six tools a profile can enable, and their specs for the model. */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { ToolSpec } from "../providers/types.ts";
import { askUserTool } from "./ask.ts";
import { bashTool } from "./bash.ts";
import { editTool } from "./edit.ts";
import { notifyTool } from "./notify.ts";
import { readTool } from "./read.ts";
import { TOOL_NAMES, type ToolName } from "../../schema/profile.ts";
import type { Tool } from "./types.ts";
import { writeTool } from "./write.ts";

/** Exhaustive over TOOL_NAMES: adding a name without its tool (or the reverse) does not compile. */
const BY_NAME: Record<ToolName, Tool> = { Bash: bashTool, Read: readTool, Write: writeTool, Edit: editTool, AskUserQuestion: askUserTool, Notify: notifyTool };
export const TOOLS: Tool[] = TOOL_NAMES.map((n) => BY_NAME[n]);
export const ASK_USER = askUserTool.name;

const byName = new Map(TOOLS.map((t) => [t.name, t]));
const checkers = new Map(TOOLS.map((t) => [t.name, TypeCompiler.Compile(t.input_schema)]));

export function toolByName(name: string): Tool | undefined {
  return byName.get(name);
}

export function toolSpecs(enabled: string[]): ToolSpec[] {
  return TOOLS.filter((t) => enabled.includes(t.name)).map((t) => ({
    name: t.name,
    description: t.description,
    input_schema: JSON.parse(JSON.stringify(t.input_schema)) as Record<string, unknown>,
  }));
}

/** null when the input is valid, else a message for the model naming the problem. */
export function invalidInput(name: string, input: unknown): string | null {
  const checker = checkers.get(name);
  if (!checker) return `Unknown tool ${name}`;
  if (checker.Check(input)) return null;
  const first = checker.Errors(input).First();
  return `Invalid input for ${name}: ${first?.path || "input"} ${first?.message ?? "does not match the schema"}`;
}
