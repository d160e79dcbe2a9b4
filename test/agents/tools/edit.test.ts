/** The Edit tool on a real workspace: exact replacement, byte for byte, or a clear refusal. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { editTool } from "../../../src/agents/tools/edit.ts";
import { type ToolBench, toolBench } from "./helpers.ts";

let b: ToolBench;
beforeAll(async () => {
  b = await toolBench();
});
afterAll(() => b.stop());

const hex = (s: string) => s.trim();

test("a file that is not valid UTF-8 is refused, untouched, with a pointer to Bash", async () => {
  await b.sh(`printf 'caf\\351 line1\\nhello world\\n' > lat.txt`);
  const r = await editTool.run({ file_path: "lat.txt", old_string: "hello", new_string: "HELLO" }, b.ctx);
  expect(r.isError).toBe(true);
  expect(r.output).toContain("/workspace/lat.txt is not UTF-8 text");
  expect(r.output).toContain("Bash");
  expect(hex(await b.sh("od -An -tx1 lat.txt | tr -d ' \\n'"))).toBe("636166e9206c696e65310a68656c6c6f20776f726c640a");
});

test("UTF-8 text keeps every other byte: multi-byte characters, a byte-order mark, CRLF", async () => {
  await b.sh(`printf '\\357\\273\\277caf\\303\\251 \\342\\202\\254\\r\\nhello world\\r\\n' > bom.txt`);
  const r = await editTool.run({ file_path: "bom.txt", old_string: "hello", new_string: "HELLO" }, b.ctx);
  expect(r).toEqual({ isError: false, output: "Edited /workspace/bom.txt: replaced 1 occurrence" });
  expect(hex(await b.sh("od -An -tx1 bom.txt | tr -d ' \\n'"))).toBe("efbbbf636166c3a920e282ac0d0a48454c4c4f20776f726c640d0a");
});
