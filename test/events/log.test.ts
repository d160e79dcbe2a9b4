/**
 * The event log's look at a task's cut-off answer, on both stores: `endsInText` (the start-up's
 * pre-check, orchestrator.ts prepareResume) says whether the task's last stored frame is streamed
 * text, and `dropCutText` removes exactly that text — only then is there any to remove.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client.ts";
import { migrate } from "../../src/db/migrate.ts";
import { type EventStore, EventLog } from "../../src/events/log.ts";
import { PgEventLog } from "../../src/events/pg-log.ts";
import { LocalBus } from "../../src/replicas/bus.ts";
import type { FrameInput } from "../../src/schema/stream.ts";
import { tempDir } from "../helpers/app.ts";
import { type FreshPostgres, freshPostgres, PG_SERVER } from "../helpers/pg.ts";

const USER = "INSERT INTO users (id, email, name, role, disabled, email_verified, created_at, updated_at) VALUES ('usr_1','a@b.c','a','user',false,false,0,0)";
const session = (id: string) => `INSERT INTO sessions (id, user_id, profile_id, created_at, updated_at) VALUES ('${id}', 'usr_1', 'prof_1', 0, 0)`;
const token = (task: string, text: string): FrameInput => ({ type: "task:token", task_id: task, text });
const toolUse = (task: string): FrameInput => ({ type: "task:tool_use", task_id: task, tool: "Bash", tool_use_id: "tu_1", input: {} });
const toolResult = (task: string): FrameInput => ({ type: "task:tool_result", task_id: task, tool: "Bash", tool_use_id: "tu_1", output: "ok", is_error: false });

function cases(name: string, open: () => Promise<{ log: EventStore; addSession(id: string): Promise<void> }>) {
  describe(name, () => {
    test("a task whose log ends in text ends in text; one whose last frame is anything else, or that has none, does not", async () => {
      const { log, addSession } = await open();
      await addSession("sess_a");
      for (const f of [toolUse("task_1"), toolResult("task_1"), token("task_1", "Half "), token("task_1", "an answer")]) log.append("sess_a", f);
      // Another task's frames after it do not hide where task_1's log ends.
      log.append("sess_a", token("task_2", "Next."));
      log.append("sess_a", toolUse("task_2"));
      expect(await log.endsInText("sess_a", "task_1")).toBe(true);
      expect(await log.endsInText("sess_a", "task_2")).toBe(false);
      expect(await log.endsInText("sess_a", "task_3")).toBe(false);

      // The text that made it so is what dropCutText removes; after that the task no longer ends in text.
      expect(await log.dropCutText("sess_a", "task_1")).toBe(2);
      expect(await log.endsInText("sess_a", "task_1")).toBe(false);
      expect(await log.dropCutText("sess_a", "task_1")).toBe(0);

      // Text followed by a tool call is not cut text.
      log.append("sess_a", token("task_2", "Let me look."));
      log.append("sess_a", toolUse("task_2"));
      expect(await log.endsInText("sess_a", "task_2")).toBe(false);
      expect(await log.dropCutText("sess_a", "task_2")).toBe(0);
    });
  });
}

cases("SQLite", async () => {
  const h = openDatabase(join(tempDir(), "db.sqlite"));
  migrate(h.sqlite);
  h.sqlite.run(USER);
  return { log: new EventLog(h.sqlite, Date.now, { flushDelayMs: 60_000 }), addSession: async (id) => void h.sqlite.run(session(id)) };
});

let pg: FreshPostgres | undefined;
afterAll(async () => {
  await pg?.drop();
});
if (PG_SERVER) {
  cases("PostgreSQL", async () => {
    pg = await freshPostgres();
    await pg.sql.unsafe(USER);
    return { log: new PgEventLog(pg.db, Date.now, new LocalBus(), { flushDelayMs: 60_000 }), addSession: async (id) => void (await pg!.sql.unsafe(session(id))) };
  });
}
