import { Type } from "@sinclair/typebox";
import { fail, ok, type Tool, workspacePath } from "./types.ts";

function occurrences(haystack: string, needle: string): number {
  let n = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) n++;
  return n;
}

/**
 * Exact text only: a byte that is not UTF-8 would come back as U+FFFD (EF BF BD) in lines the edit
 * never touched, so such a file is refused rather than decoded lossily; a byte-order mark is kept
 * as the file's first character instead of being dropped.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export const editTool: Tool = {
  name: "Edit",
  description:
    "Replace exact text in a workspace file. old_string must occur exactly once (include surrounding lines to make it unique) " +
    "unless replace_all is true.",
  input_schema: Type.Object({
    file_path: Type.String({ minLength: 1 }),
    old_string: Type.String({ minLength: 1 }),
    new_string: Type.String(),
    replace_all: Type.Optional(Type.Boolean()),
  }),
  async run(input, ctx) {
    const path = workspacePath(input.file_path as string);
    const oldS = input.old_string as string;
    const newS = input.new_string as string;
    if (oldS === newS) return fail("old_string and new_string are identical: nothing to change");
    let text: string;
    try {
      text = utf8.decode(await ctx.workspace.readFile(ctx.sessionId, path));
    } catch (e) {
      if (!(e instanceof TypeError)) throw e;
      return fail(`${path} is not UTF-8 text (another encoding, or binary): Edit would change bytes it does not touch. Edit it with Bash (sed, iconv) instead`);
    }
    const n = occurrences(text, oldS);
    if (n === 0) return fail(`old_string was not found in ${path}`);
    if (n > 1 && !input.replace_all) {
      return fail(`old_string is not unique in ${path}: found ${n} occurrences. Add surrounding context to make it unique, or set replace_all`);
    }
    const updated = input.replace_all ? text.split(oldS).join(newS) : text.replace(oldS, () => newS);
    await ctx.workspace.writeFile(ctx.sessionId, path, updated);
    return ok(`Edited ${path}: replaced ${n} occurrence${n === 1 ? "" : "s"}`);
  },
};
