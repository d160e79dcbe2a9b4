/**
 * The transcript on PostgreSQL: a step's content is stored as jsonb (an array or an object, not a
 * JSON string) and a fresh read gives back the steps as written — what a task resumed after a
 * question reads (test/agents/transcript.test.ts checks the same on SQLite).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Transcript } from "../../src/agents/transcript.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";

describe.skipIf(!PG_SERVER)("the transcript on PostgreSQL", () => {
  let pg: FreshPostgres;
  beforeAll(async () => {
    pg = await freshPostgres();
    await pg.sql`INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_1', 'a@b.c', 'a', 'user', false, false, 0, 0)`;
    await pg.sql`INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES ('sess_a', 'usr_1', 'prof_1', 0, 0)`;
  });
  afterAll(async () => {
    await pg?.drop();
  });

  test("steps are stored as jsonb values and read back as written", async () => {
    const t = new Transcript(pg.db, Date.now);
    await t.addUserPrompt("sess_a", "task_1", "first");
    await t.addAssistant("sess_a", "task_1", [{ type: "text", text: "look" }, { type: "tool_use", id: "tu_1", name: "Bash", input: { command: "ls" } }]);
    await t.addToolResult("sess_a", "task_1", { type: "tool_result", tool_use_id: "tu_1", content: "out" });
    await t.addChain("sess_a", "task_1", { type: "tool_result", tool_use_id: "tu_2", content: "next" }, "chain prompt");
    const types = await pg.sql`SELECT jsonb_typeof(content) AS type FROM messages ORDER BY id`;
    expect([...types].map((r: { type: string }) => r.type)).toEqual(["array", "array", "object", "object", "object"]);
    const fresh = await new Transcript(pg.db, Date.now).steps("sess_a");
    expect(fresh).toEqual(await t.steps("sess_a"));
    // What a resumed task asks of them.
    expect(t.pendingToolUses(fresh, "task_1")).toEqual([]);
    expect(fresh[1]!.content).toEqual([{ type: "text", text: "look" }, { type: "tool_use", id: "tu_1", name: "Bash", input: { command: "ls" } }]);
  });
});
