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

test("the output is capped at Bash's 30 000 bytes, whole lines, with a note saying where to read on", async () => {
  // 2 000 lines of 1 999 characters: 4 MB if every line the default limit allows were sent.
  await b.sh(`l=$(head -c 1999 /dev/zero | tr '\\0' a); i=0; while [ $i -lt 2000 ]; do echo "$l"; i=$((i+1)); done > wide.txt`);
  const r = await readTool.run({ file_path: "wide.txt" }, b.ctx);
  expect(r.isError).toBe(false);
  const [body, note] = [r.output.slice(0, r.output.lastIndexOf("\n")), r.output.slice(r.output.lastIndexOf("\n") + 1)];
  expect(Buffer.byteLength(body)).toBeLessThanOrEqual(30_000);
  const shown = body.split("\n");
  expect(shown.every((l, i) => l === `${String(i + 1).padStart(6)}\t${"a".repeat(1999)}`)).toBe(true);
  const next = shown.length + 1;
  expect(note).toBe(`[output truncated to 30000 bytes: ${2000 - shown.length} more lines; read on with offset ${next}]`);
  const page = await readTool.run({ file_path: "wide.txt", offset: next, limit: 2 }, b.ctx);
  expect(page.output.split("\n")[0]).toBe(`${String(next).padStart(6)}\t${"a".repeat(1999)}`);
  expect(page.output).toContain(`[${2000 - next - 1} more lines; read on with offset ${next + 2}]`);
});

test("lines of 4-byte characters: each cut to 2 000 UTF-16 units, as many whole lines as fit under the cap", async () => {
  await b.ws.writeFile(b.ctx.sessionId, "emoji.txt", `${"😀".repeat(3000)}\n`.repeat(20));
  const r = await readTool.run({ file_path: "emoji.txt" }, b.ctx);
  const lines = r.output.split("\n");
  expect(lines[0]).toBe(`     1\t${"😀".repeat(1000)} [line truncated]`);
  expect(Buffer.byteLength(lines.slice(0, -1).join("\n"))).toBeLessThanOrEqual(30_000);
  expect(lines.at(-1)).toBe(`[output truncated to 30000 bytes: ${20 - (lines.length - 1)} more lines; read on with offset ${lines.length}]`);
});

test("a line cut where an emoji's surrogate pair would split loses the whole emoji, never half of it", async () => {
  // "a" then emoji: UTF-16 unit 2 000 is the first half of the 1 000th emoji.
  await b.ws.writeFile(b.ctx.sessionId, "split.txt", `a${"😀".repeat(1500)}\nnext\n`);
  const r = await readTool.run({ file_path: "split.txt" }, b.ctx);
  expect(r.isError).toBe(false);
  expect(r.output).toBe(`     1\ta${"😀".repeat(999)} [line truncated]\n     2\tnext`);
  expect(r.output.isWellFormed()).toBe(true);
});
