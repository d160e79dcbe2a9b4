/** The Read tool on a real workspace: numbered lines, pages, and what it says about text it cannot show as is. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readTool } from "../../../src/agents/tools/read.ts";
import { type ToolBench, toolBench } from "./helpers.ts";

let b: ToolBench;
beforeAll(async () => {
  b = await toolBench();
});
afterAll(() => b.stop());

test("a file that is not valid UTF-8 is shown with U+FFFD and a note saying so", async () => {
  await b.sh(`printf 'caf\\351 line1\\nhello world\\n' > lat.txt`);
  const r = await readTool.run({ file_path: "lat.txt" }, b.ctx);
  expect(r.isError).toBe(false);
  expect(r.output).toStartWith("     1\tcaf\uFFFD line1\n     2\thello world\n");
  expect(r.output).toContain("[/workspace/lat.txt is not valid UTF-8");
});

test("UTF-8 text has no note", async () => {
  await b.sh(`printf 'caf\\303\\251\\n' > utf.txt`);
  expect(await readTool.run({ file_path: "utf.txt" }, b.ctx)).toEqual({ isError: false, output: "     1\tcafé" });
});
