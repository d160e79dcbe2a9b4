/**
 * A replica that lost a task's lease without noticing yet (stalled past the lease while another
 * replica took the task over) must not end that task when its own loop finishes: the end is
 * conditional on still holding the lease. Here the takeover is written behind the running loop's
 * back, before its first renewal (the lease is 30 s, renewed every 10 s).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { createProfile, sessionFrames, submit } from "../../helpers/agent.ts";
import { sqlGet, sqlRun } from "../../helpers/db.ts";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { createUser, type TestUser } from "../../helpers/users.ts";

describe.skipIf(!PG_SERVER)("ending a task as its lease's holder", () => {
  let t: TestApp;
  let mock: MockProviderServer;
  let user: TestUser;
  let profileId: string;
  beforeAll(async () => {
    t = await startTestApp();
    mock = startMockAnthropic();
    user = await createUser(t);
    profileId = await createProfile(t, user, { mock });
  });
  afterAll(async () => {
    await t?.stop();
    await mock?.stop();
  });

  test("a loop that finishes after another replica took its task over ends nothing; the holder's task stays running", async () => {
    mock.enqueue({ text: Array.from({ length: 60 }, (_, i) => `w${i} `), delayMs: 25 });
    const sub = await submit(t, user, { profile_id: profileId, prompt: "long answer" });
    await mock.waitForRequests(1, 20_000);
    // Another replica takes the task over (as after this one stalled past its lease).
    expect(await sqlRun(t, "UPDATE tasks SET lease_owner = 'rep_other', lease_expires_at = ? WHERE id = ?", [Date.now() + 600_000, sub.task_id])).toBe(1);
    // This replica's loop streams on and finishes its model turn (well before its first renewal).
    await Bun.sleep(2500);
    const row = await sqlGet<{ status: string; lease_owner: string }>(t, "SELECT status, lease_owner FROM tasks WHERE id = ?", [sub.task_id]);
    expect(row).toMatchObject({ status: "running", lease_owner: "rep_other" });
    const frames = await sessionFrames(t, user, sub.session_id);
    expect(frames.some((f) => f.type === "task:done" || f.type === "task:failed")).toBe(false);
    // Handed back (the other replica gone), this one ends it normally: end the test's loop cleanly.
    await sqlRun(t, "UPDATE tasks SET status = 'cancelled', lease_owner = NULL WHERE id = ?", [sub.task_id]);
  }, 60_000);
});
