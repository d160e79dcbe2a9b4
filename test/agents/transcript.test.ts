/**
 * The in-memory tail of a running session's transcript (issue 15): loaded once, appended to by
 * every write, equal to what the rows say, released when the task stops; `history` never changes
 * the steps it reads.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { join } from "node:path";
import { type DatabaseHandle, openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { Transcript } from "../../src/agents/transcript.ts";
import { tempDir } from "../helpers/app.ts";

let h: DatabaseHandle;
let t: Transcript;

beforeEach(() => {
  h = openDatabase(join(tempDir(), "db.sqlite"));
  migrate(h.sqlite);
  h.sqlite.run("INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_1','a@b.c','a','user',0,0,0,0)");
  h.sqlite.run("INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES ('sess_a', 'usr_1', 'prof_1', 0, 0)");
  t = new Transcript(h.db, Date.now);
});
afterEach(() => h.close());

/** The steps as a fresh read of the rows gives them. */
const fromRows = () => new Transcript(h.db, Date.now).steps("sess_a");

test("one read per task: writes extend the tail, which always equals the rows", async () => {
  await t.addUserPrompt("sess_a", "task_1", "first");
  const steps = await t.steps("sess_a");
  expect(t.held).toBe(1);
  await t.addAssistant("sess_a", "task_1", [{ type: "text", text: "look" }, { type: "tool_use", id: "tu_1", name: "Bash", input: { command: "ls" } }]);
  await t.addToolResult("sess_a", "task_1", { type: "tool_result", tool_use_id: "tu_1", content: "out", is_error: true });
  await t.addChain("sess_a", "task_1", { type: "tool_result", tool_use_id: "tu_2", content: "next" }, "chain prompt");
  // The same array, grown: no re-read.
  expect(await t.steps("sess_a")).toBe(steps);
  expect(steps).toEqual(await fromRows());
  expect(steps.map((s) => s.role)).toEqual(["user", "assistant", "tool_result", "tool_result", "chain"]);
  expect(t.size("sess_a")).toBe(h.sqlite.query<{ n: number }, []>("SELECT SUM(LENGTH(content)) AS n FROM messages").get()!.n);
  t.release("sess_a");
  expect(t.held).toBe(0);
  expect(t.size("sess_a")).toBe(0);
  // A write without a tail goes to the rows only; the next read sees it.
  await t.addUserPrompt("sess_a", "task_2", "second");
  expect(await t.steps("sess_a")).not.toBe(steps);
  expect(await t.steps("sess_a")).toEqual(await fromRows());
});

test("history merges user turns into new arrays: the stored steps are never changed", async () => {
  await t.addUserPrompt("sess_a", "task_1", "one");
  await t.addAssistant("sess_a", "task_1", [{ type: "tool_use", id: "tu_1", name: "Bash", input: {} }]);
  await t.addToolResult("sess_a", "task_1", { type: "tool_result", tool_use_id: "tu_1", content: "done" });
  await t.addUserPrompt("sess_a", "task_2", "two");
  const steps = await t.steps("sess_a");
  const before = JSON.stringify(steps);
  const h1 = t.history(steps);
  expect(h1.at(-1)!.content.map((b) => b.type)).toEqual(["tool_result", "text"]);
  expect(JSON.stringify(t.history(steps))).toBe(JSON.stringify(h1));
  expect(JSON.stringify(steps)).toBe(before);
});
