import { Type } from "@sinclair/typebox";
import { ok, type Tool, workspacePath } from "./types.ts";

export const writeTool: Tool = {
  name: "Write",
  description: "Write a file in the workspace, creating parent directories and replacing any existing content.",
  input_schema: Type.Object({
    file_path: Type.String({ minLength: 1, description: "Path; relative paths are under /workspace" }),
    content: Type.String(),
  }),
  async run(input, ctx) {
    const path = workspacePath(input.file_path as string);
    const content = input.content as string;
    await ctx.workspace.writeFile(ctx.sessionId, path, content);
    return ok(`Wrote ${Buffer.byteLength(content)} bytes to ${path}`);
  },
};
