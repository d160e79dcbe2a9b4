/** The tools a profile can enable: the registry (index.ts) implements exactly these. */
export const TOOL_NAMES = ["Bash", "Read", "Write", "Edit", "AskUserQuestion", "Notify"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];
