/**
 * A new session's first task is its submitter's while the session's workspace is created
 * (PostgreSQL, where other replicas take over work no live lease holds): stored under this
 * replica's lease, it is not orphaned and no other replica can claim it, so no other replica
 * starts it meanwhile — before, one could, and created the same container a second time
 * ("Conflict. The container name … is already in use", the task failed). The workspace creation
 * is held back here so that the window can be looked at; everything else is the real app.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { TaskLeases } from "../../src/agents/leases.ts";
import { Tasks } from "../../src/agents/tasks.ts";
import { createProfile, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlGet } from "../helpers/db.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { PG_SERVER } from "../helpers/pg.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";

describe.skipIf(!PG_SERVER)("a new session's first task while its workspace is created", () => {
  let t: TestApp;
  let mock: MockProviderServer;
  let user: TestUser;
  let profileId: string;
  beforeAll(async () => {
    t = await startTestApp();
    mock = startMockAnthropic().script(() => ({ text: "done" }));
    user = await createUser(t);
    profileId = await createProfile(t, user, { mock });
  });
  afterAll(async () => {
    await t?.stop();
    await mock?.stop();
  });

  test("is leased by this replica: not orphaned, not claimable by another; it runs here once the workspace is up", async () => {
    const ws = t.app.services.workspaces;
    const create = ws.createForSession.bind(ws);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    ws.createForSession = async (...args: Parameters<typeof create>) => {
      await held;
      return create(...args);
    };
    try {
      const submitted = api(t, "POST", "/v1/tasks", user.bearer, { profile_id: profileId, prompt: "hello" });
      const row = await waitFor(() => sqlGet<{ id: string; session_id: string; status: string; lease_owner: string | null; lease_expires_at: number | null }>(t, "SELECT id, session_id, status, lease_owner, lease_expires_at FROM tasks WHERE user_id = ?", [user.id]), { what: "the first task" });
      expect(row).toMatchObject({ status: "queued", lease_owner: t.app.services.replicas.id });
      expect(Number(row.lease_expires_at)).toBeGreaterThan(Date.now());

      // Another replica (its takeover round, then its pump) finds nothing to take.
      const other = new TaskLeases(t.app.services.store.db, Date.now, "rep_other", 30_000, true);
      expect(await other.orphaned()).not.toContain(row.session_id);
      expect(await new Tasks(t.app.services.store.db, Date.now).claim(row.id, Date.now(), other.terms())).toBeUndefined();

      release();
      const res = await submitted;
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      const done = await waitTask(t, user, row.id);
      expect(done.status).toBe("completed");
      expect(await sqlGet(t, "SELECT lease_owner FROM tasks WHERE id = ?", [row.id])).toEqual({ lease_owner: null });
    } finally {
      release();
      ws.createForSession = create;
    }
  }, 60_000);
});
