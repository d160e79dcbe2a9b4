import { isUtf8 } from "node:buffer";
import { Type } from "@sinclair/typebox";
import { BASH_MAX_OUTPUT } from "./bash.ts";
import { fail, ok, type Tool, workspacePath } from "./types.ts";

const DEFAULT_LIMIT = 2000;
const MAX_LINE = 2000;
/**
 * The numbered lines sent back are capped like Bash's output: 2 000 lines of 2 000 characters
 * would be megabytes in the model's context and the transcript. Whole lines only — one always fits
 * (2 000 UTF-16 units are at most 6 000 bytes) — so the note's offset reads on exactly.
 */
const MAX_OUTPUT = BASH_MAX_OUTPUT;

/** A line's first MAX_LINE UTF-16 units, one fewer when the cut would split a surrogate pair (an emoji): never a lone surrogate. */
function cutLine(line: string): string {
  if (line.length <= MAX_LINE) return line;
  const code = line.charCodeAt(MAX_LINE - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? MAX_LINE - 1 : MAX_LINE;
  return line.slice(0, end) + " [line truncated]";
}

export const readTool: Tool = {
  name: "Read",
  description:
    "Read a text file from the workspace. Returns lines numbered like `cat -n` (starting at 1). " +
    `Use offset (first line, 1-based) and limit (number of lines, default ${DEFAULT_LIMIT}) for long files. ` +
    `Output over ${MAX_OUTPUT} bytes is cut at a line boundary, with the offset to read on from.`,
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
    const shown: string[] = [];
    let size = 0;
    let capped = false;
    for (const [i, l] of lines.slice(start, start + limit).entries()) {
      const line = `${String(start + i + 1).padStart(6)}\t${cutLine(l)}`;
      size += Buffer.byteLength(line) + (shown.length ? 1 : 0);
      if (size > MAX_OUTPUT && shown.length) {
        capped = true;
        break;
      }
      shown.push(line);
    }
    const rest = lines.length - (start + shown.length);
    const notes: string[] = [];
    const more = `${rest} more lines; read on with offset ${start + shown.length + 1}`;
    if (capped) notes.push(`[output truncated to ${MAX_OUTPUT} bytes: ${more}]`);
    else if (rest > 0) notes.push(`[${more}]`);
    if (notUtf8) notes.push(`[${path} is not valid UTF-8 text: undecodable bytes are shown as \uFFFD; change this file with Bash, not Edit or Write]`);
    return ok([shown.join("\n"), ...notes].join("\n"));
  },
};
