import { isUtf8 } from "node:buffer";
import { Type } from "@sinclair/typebox";
import { fail, ok, type Tool, workspacePath } from "./types.ts";

const DEFAULT_LIMIT = 2000;
const MAX_LINE = 2000;

export const readTool: Tool = {
  name: "Read",
  description:
    "Read a text file from the workspace. Returns lines numbered like `cat -n` (starting at 1). " +
    `Use offset (first line, 1-based) and limit (number of lines, default ${DEFAULT_LIMIT}) for long files.`,
  input_schema: Type.Object({
    file_path: Type.String({ minLength: 1, description: "Path; relative paths are under /workspace" }),
    offset: Type.Optional(Type.Integer({ minimum: 1 })),
    limit: Type.Optional(Type.Integer({ minimum: 1 })),
  }),
  async run(input, ctx) {
    const path = workspacePath(input.file_path as string);
    const bytes = await ctx.workspace.readFile(ctx.sessionId, path);
    if (bytes.subarray(0, 8192).includes(0)) return fail(`${path} is a binary file (${bytes.byteLength} bytes); use Bash to inspect it`);
    const text = new TextDecoder().decode(bytes);
    // Shown lossily (U+FFFD for each bad byte); said so, since writing this text back would change those bytes.
    const notUtf8 = !isUtf8(bytes);
    if (text.length === 0) return ok(`${path} is empty`);
    const lines = text.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    const start = ((input.offset as number | undefined) ?? 1) - 1;
    const limit = (input.limit as number | undefined) ?? DEFAULT_LIMIT;
    if (start >= lines.length) return fail(`${path} has ${lines.length} lines; offset ${start + 1} is past the end`);
    const shown = lines.slice(start, start + limit).map((l, i) => {
      const line = l.length > MAX_LINE ? l.slice(0, MAX_LINE) + " [line truncated]" : l;
      return `${String(start + i + 1).padStart(6)}\t${line}`;
    });
    const rest = lines.length - (start + shown.length);
    const notes: string[] = [];
    if (rest > 0) notes.push(`[${rest} more lines; read on with offset ${start + shown.length + 1}]`);
    if (notUtf8) notes.push(`[${path} is not valid UTF-8 text: undecodable bytes are shown as \uFFFD; change this file with Bash, not Edit or Write]`);
    return ok([shown.join("\n"), ...notes].join("\n"));
  },
};
