/**
 * Defect 8: disabling a user must stop their work, in the same request that disables them
 * (PATCH /admin/users/:id {disabled: true}): their running tasks are cancelled (a model response
 * held open, a tool `sleep` in the workspace), a task waiting for an answer is cancelled, their
 * queued tasks fail FORBIDDEN, their workspaces are stopped (the containers no longer run), their
 * playbooks' schedules are held (no next slot; the trigger URL answers 404). Another user's work
 * goes on. Enabling the account again resumes the schedules and the trigger URL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { type MockProviderServer, type RecordedRequest, startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { api, createUser } from "../helpers/users.ts";

const PASSWORD = "operator password 42";
const ADMIN = { authorization: `Bearer ${PASSWORD}` };

let t: TestApp;
let mock: MockProviderServer;

const running = (dockerId: string): boolean => {
  const p = Bun.spawnSync(["docker", "inspect", "--format", "{{.State.Running}}", dockerId], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  return p.stdout.toString().trim() === "true";
};
const processes = (dockerId: string): string => Bun.spawnSync(["docker", "exec", dockerId, "ps", "-o", "args"], { stdout: "pipe", stderr: "pipe" }).stdout.toString();

async function until<T>(what: string, f: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

/** The first message of a request (the task's prompt), as JSON text. */
const prompt = (req: RecordedRequest): string => JSON.stringify(req.body.messages[0]?.content ?? "");

beforeAll(async () => {
  t = await startTestApp({ env: { RUNCELL_ADMIN_PASSWORD: PASSWORD } });
  mock = startMockAnthropic();
  // Each task's first request decides what it does; a later request of the same task answers plainly.
  mock.script((req) => {
    const p = prompt(req);
    const first = req.body.messages.length === 1;
    if (!first) return { text: "finished" };
    if (p.includes("HANG")) return { text: ["Thinking", " about", " it"], hangAfter: 1 };
    if (p.includes("SLEEP")) return { toolCalls: [{ name: "Bash", input: { command: "sleep 300" } }] };
    if (p.includes("ASK")) return { toolCalls: [{ name: "AskUserQuestion", input: { questions: [{ question: "Which one?", options: [{ label: "a" }, { label: "b" }] }] } }] };
    return { text: "done" };
  });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

describe("PATCH /admin/users/:id {disabled: true} stops the user's work in the same request", () => {
  test("running tasks cancelled, a waiting one cancelled, queued ones FORBIDDEN, workspaces stopped, schedules held; re-enabling resumes the schedules", async () => {
    const s = t.app.services;
    const user = await createUser(t);
    const other = await createUser(t);
    const profileId = await createProfile(t, user, { mock, tools: ["Bash", "AskUserQuestion"] });
    const otherProfile = await createProfile(t, other, { mock });

    // Another user's session, done, with its workspace running.
    const bystander = await submit(t, other, { profile_id: otherProfile, prompt: "hello" });
    expect((await waitTask(t, other, bystander.task_id)).status).toBe("completed");
    const otherCtr = (await s.workspaces.forSession(bystander.session_id))!.docker_id!;
    expect(running(otherCtr)).toBe(true);

    // 1. A task whose model response is held open; 2. behind it in the same session, a queued task.
    const disconnectsBefore = mock.disconnects;
    const hang = await submit(t, user, { profile_id: profileId, prompt: "HANG" });
    await until("the held model response", () => mock.requests.some((r) => prompt(r).includes("HANG")));
    const queued = await submit(t, user, { session_id: hang.session_id, prompt: "queued behind" });
    expect(queued.status).toBe("queued");
    // 3. A task running `sleep 300` in its workspace.
    const sleep = await submit(t, user, { profile_id: profileId, prompt: "SLEEP" });
    const sleepCtr = await until("the sleeping workspace", async () => (await s.workspaces.forSession(sleep.session_id))?.docker_id);
    await until("sleep 300 running", () => processes(sleepCtr).includes("sleep 300"));
    // 4. A task waiting for the user's answer.
    const ask = await submit(t, user, { profile_id: profileId, prompt: "ASK" });
    expect((await waitTask(t, user, ask.task_id, ["waiting_input"])).status).toBe("waiting_input");
    // 5. A scheduled playbook with a trigger URL.
    const pb = await api(t, "POST", "/v1/playbooks", user.bearer, { name: "nightly", profile_id: profileId, prompt: "nightly run", schedule: "0 3 * * *", timezone: "UTC" });
    expect(pb.status, JSON.stringify(pb.body)).toBe(201);
    expect(pb.body.next_run_at).not.toBeNull();
    const triggerPath = new URL(pb.body.trigger_url).pathname;

    expect((await s.tasks.byId(hang.task_id))!.status).toBe("running");
    expect((await s.tasks.byId(sleep.task_id))!.status).toBe("running");
    const hangCtr = (await s.workspaces.forSession(hang.session_id))!.docker_id!;
    const askCtr = (await s.workspaces.forSession(ask.session_id))!.docker_id!;
    for (const c of [hangCtr, sleepCtr, askCtr]) expect(running(c)).toBe(true);

    const started = Date.now();
    const r = await api(t, "PATCH", `/admin/users/${user.id}`, ADMIN, { disabled: true });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.disabled).toBe(true);
    // Answered once the work stopped, not after a stop timeout.
    expect(Date.now() - started).toBeLessThan(4_500);

    // Everything below holds as soon as the request is answered (no waiting).
    expect((await s.tasks.byId(hang.task_id))!.status).toBe("cancelled");
    expect((await s.tasks.byId(sleep.task_id))!.status).toBe("cancelled");
    expect((await s.tasks.byId(ask.task_id))!.status).toBe("cancelled");
    const q = (await s.tasks.byId(queued.task_id))!;
    expect(q.status).toBe("failed");
    expect(q.error_code).toBe("FORBIDDEN");
    expect(q.error_message).toContain("disabled");
    // The model stream was abandoned (the mock saw the client go).
    await until("the model stream to be dropped", () => mock.disconnects > disconnectsBefore, 5_000);

    for (const c of [hangCtr, sleepCtr, askCtr]) expect(running(c)).toBe(false);
    for (const sid of [hang.session_id, sleep.session_id, ask.session_id]) expect((await s.workspaces.forSession(sid))!.status).toBe("stopped");
    expect(running(otherCtr)).toBe(true);

    const held = await s.playbooks.get(user.id, pb.body.id);
    expect(held.next_run_at).toBeNull();
    expect(held.enabled).toBe(true);
    const hook = await api(t, "POST", triggerPath, {}, {});
    expect(hook.status).toBe(404);
    expect(await s.playbooks.nextDue()).toBeNull();

    // The account is shut out; nothing of theirs starts again on its own.
    expect((await api(t, "GET", "/v1/profiles", user.bearer)).status).toBe(401);
    await Bun.sleep(300);
    for (const c of [hangCtr, sleepCtr, askCtr]) expect(running(c)).toBe(false);
    expect((await s.tasks.byId(queued.task_id))!.status).toBe("failed");
    // Nothing else of theirs is left active.
    expect(await s.tasks.activeForUser(user.id)).toEqual([]);
    // The other user still works.
    const again = await submit(t, other, { session_id: bystander.session_id, prompt: "still here?" });
    expect((await waitTask(t, other, again.task_id)).status).toBe("completed");

    // Enabled again: the schedule has a next slot in the future, the trigger URL runs the playbook.
    const en = await api(t, "PATCH", `/admin/users/${user.id}`, ADMIN, { disabled: false });
    expect(en.status).toBe(200);
    expect(en.body.disabled).toBe(false);
    const resumed = await s.playbooks.get(user.id, pb.body.id);
    expect(resumed.next_run_at).not.toBeNull();
    expect(Date.parse(resumed.next_run_at!)).toBeGreaterThan(Date.now());
    expect(await s.playbooks.nextDue()).not.toBeNull();
    const fired = await api(t, "POST", triggerPath, {}, {});
    expect(fired.status, JSON.stringify(fired.body)).toBe(202);
    const run = await until("the triggered run to finish", async () => {
      const row = await s.tasks.byId(fired.body.task_id);
      return row && ["completed", "failed", "cancelled"].includes(row.status) ? row : null;
    }, 30_000);
    expect(run.status).toBe("completed");
    // The ended tasks stay ended.
    expect((await s.tasks.byId(hang.task_id))!.status).toBe("cancelled");
    expect((await s.tasks.byId(queued.task_id))!.status).toBe("failed");
  }, 90_000);
});
