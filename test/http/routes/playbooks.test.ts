/**
 * /v1/playbooks: the route scenario table (credentials, someone else's playbook, every validated
 * field, success), then the API's promises — every run call is a new run, input in a delimited
 * block, PATCH semantics, schedules and next_run_at, the trigger URL readable by its owner only,
 * and the run list — on a real app with a local Anthropic-format model server and real workspaces.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createProfile, waitTask } from "../../helpers/agent.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { sqlRun } from "../../helpers/db.ts";
import { api, type TestUser } from "../../helpers/users.ts";

let t: TestApp;
let mock: MockProviderServer;
let a: Actors;
const profiles = new Map<string, string>();

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic().script(() => ({ text: "done" }));
  a = await actors(t);
  for (const u of [a.owner, a.other]) profiles.set(u.id, await createProfile(t, u, { mock }));
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
});

const body = (over: Record<string, unknown> = {}, user: TestUser = a.owner) => ({ name: "nightly", profile_id: profiles.get(user.id), prompt: "Check the build.", ...over });
const create = async (over: Record<string, unknown> = {}, user: TestUser = a.owner) => {
  const r = await api(t, "POST", "/v1/playbooks", user.bearer, body(over, user));
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
};
const playbookOf = async (_a: Actors, user: TestUser) => (await create({}, user)).id as string;

/** Bad bodies and the field each names (POST; PATCH gets those that apply to a change). */
const bad: { name: string; body: Record<string, unknown>; field: string }[] = [
  { name: "a cron expression croner cannot parse", body: { schedule: "61 * * * *" }, field: "schedule" },
  { name: "a cron expression with a word", body: { schedule: "every night" }, field: "schedule" },
  { name: "a cron expression with a 7th field (a year)", body: { schedule: "0 0 3 * * * 2027" }, field: "schedule" },
  { name: "an unknown IANA time zone", body: { schedule: "0 3 * * *", timezone: "Mars/Olympus" }, field: "timezone" },
  { name: "a UTC offset, not a zone name", body: { schedule: "0 3 * * *", timezone: "+02:00" }, field: "timezone" },
  { name: "max_continuations out of range", body: { max_continuations: 11 }, field: "max_continuations" },
  { name: "a negative max_continuations", body: { max_continuations: -1 }, field: "max_continuations" },
  { name: "max_turns 0", body: { max_turns: 0 }, field: "max_turns" },
  { name: "max_budget_usd 0", body: { max_budget_usd: 0 }, field: "max_budget_usd" },
  { name: "answer_timeout 0", body: { answer_timeout: 0 }, field: "answer_timeout" },
  { name: "an empty prompt", body: { prompt: "" }, field: "prompt" },
  { name: "a blank prompt", body: { prompt: "  \n" }, field: "prompt" },
  { name: "a blank name", body: { name: "  " }, field: "name" },
  { name: "enabled not a boolean", body: { enabled: "yes" }, field: "enabled" },
  { name: "an unknown field", body: { cron: "* * * * *" }, field: "cron" },
];

routeTable("/v1/playbooks", () => a, [
  {
    route: "POST /v1/playbooks",
    body: () => body({ schedule: "0 3 * * *", timezone: "Europe/Berlin" }),
    invalid: [
      ...bad.map((b) => ({ ...b, body: { name: "nightly", profile_id: "prof_00000000000000000000000000", prompt: "p", ...b.body } })),
      { name: "no profile_id", body: { name: "x", prompt: "p" }, field: "profile_id" },
      { name: "no prompt", body: { name: "x", profile_id: "prof_x" }, field: "prompt" },
    ],
    success: 201,
    check: (r) => {
      expect(r.body.id).toMatch(/^pb_/);
      expect(r.body).toMatchObject({ name: "nightly", schedule: "0 3 * * *", timezone: "Europe/Berlin", enabled: true, max_continuations: 0, max_turns: null, last_runs: [] });
      expect(r.body.trigger_url).toMatch(new RegExp(`^${t.url}/hooks/playbooks/${r.body.id}/[A-Za-z0-9_-]{43}$`));
      expect(Date.parse(r.body.next_run_at)).toBeGreaterThan(Date.now());
    },
  },
  { route: "GET /v1/playbooks", query: "limit=5", invalid: [{ name: "limit=0", query: "limit=0", field: "limit" }], success: 200, check: (r) => expect(r.body.data.length).toBeGreaterThan(0) },
  { route: "GET /v1/playbooks/:id", record: playbookOf, success: 200, viaCookie: true, check: (r, _a, id) => expect(r.body.id).toBe(id) },
  {
    route: "PATCH /v1/playbooks/:id",
    record: playbookOf,
    body: () => ({ name: "renamed" }),
    invalid: bad.filter((b) => b.field !== "name" || b.body.name !== undefined),
    success: 200,
    check: (r) => expect(r.body.name).toBe("renamed"),
  },
  { route: "DELETE /v1/playbooks/:id", record: playbookOf, success: 204 },
  {
    route: "POST /v1/playbooks/:id/run",
    record: playbookOf,
    body: () => ({ input: "today's logs" }),
    invalid: [
      { name: "an input over 64 KiB", body: { input: "x".repeat(64 * 1024 + 1) }, field: "input" },
      { name: "an unknown field", body: { inputs: "x" }, field: "inputs" },
    ],
    success: 202,
    check: async (r, _a, id) => {
      expect(r.body.playbook_id).toBe(id);
      expect(r.body.task_id).toMatch(/^task_/);
      expect(r.body.session_id).toMatch(/^sess_/);
      const task = await waitTask(t, a.owner, r.body.task_id);
      expect(task).toMatchObject({ status: "completed", playbook_id: id, trigger: "manual" });
    },
  },
  { route: "GET /v1/playbooks/:id/runs", record: playbookOf, invalid: [{ name: "a malformed cursor", query: "cursor=nope", field: "cursor" }], success: 200, check: (r) => expect(r.body).toEqual({ data: [], next_cursor: null }) },
  {
    route: "POST /v1/playbooks/:id/rotate-trigger",
    record: playbookOf,
    success: 200,
    check: async (r, _a, id) => {
      expect(r.body.trigger_url).toContain(`/hooks/playbooks/${id}/`);
      expect((await api(t, "GET", `/v1/playbooks/${id}`, a.owner.bearer)).body.trigger_url).toBe(r.body.trigger_url);
    },
  },
]);

describe("runs", () => {
  test("two calls start two runs, each a task in its own new session, listed newest first", async () => {
    const pb = await create({ max_turns: 7, max_budget_usd: 1.5 });
    const one = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer);
    const two = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer, {});
    expect([one.status, two.status]).toEqual([202, 202]);
    expect(one.body.task_id).not.toBe(two.body.task_id);
    expect(one.body.session_id).not.toBe(two.body.session_id);
    for (const r of [one, two]) expect((await waitTask(t, a.owner, r.body.task_id)).status).toBe("completed");
    const task = (await api(t, "GET", `/v1/tasks/${one.body.task_id}`, a.owner.bearer)).body;
    expect([task.max_turns, task.max_budget_usd, task.prompt]).toEqual([7, 1.5, "Check the build."]);
    const runs = await api(t, "GET", `/v1/playbooks/${pb.id}/runs`, a.owner.bearer);
    expect(runs.body.data.map((r: { task_id: string }) => r.task_id)).toEqual([two.body.task_id, one.body.task_id]);
    expect(runs.body.data[0]).toMatchObject({ trigger: "manual", status: "completed", session_id: two.body.session_id, scheduled_for: null, error: null });
    expect(typeof runs.body.data[0].cost_usd).toBe("number");
    expect(runs.body.data[0].ended_at).not.toBeNull();
    const rec = (await api(t, "GET", `/v1/playbooks/${pb.id}`, a.owner.bearer)).body;
    expect(rec.last_runs.map((r: { task_id: string }) => r.task_id)).toEqual([two.body.task_id, one.body.task_id]);
  });

  test("the run list pages with next_cursor", async () => {
    const pb = await create();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer)).body.task_id);
    for (const id of ids) await waitTask(t, a.owner, id);
    const first = await api(t, "GET", `/v1/playbooks/${pb.id}/runs?limit=2`, a.owner.bearer);
    expect(first.body.data).toHaveLength(2);
    const second = await api(t, "GET", `/v1/playbooks/${pb.id}/runs?limit=2&cursor=${first.body.next_cursor}`, a.owner.bearer);
    expect(second.body.next_cursor).toBeNull();
    expect([...first.body.data, ...second.body.data].map((r: { task_id: string }) => r.task_id)).toEqual([...ids].reverse());
  });

  test("input is appended to the prompt in a delimited block; JSON input is serialized", async () => {
    const pb = await create({ prompt: "Summarize." });
    const before = mock.requests.length;
    const r = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer, { input: { branch: "main", failed: 2 } });
    await waitTask(t, a.owner, r.body.task_id);
    const prompt = (await api(t, "GET", `/v1/tasks/${r.body.task_id}`, a.owner.bearer)).body.prompt;
    expect(prompt).toBe('Summarize.\n\n<run_input>\n{\n  "branch": "main",\n  "failed": 2\n}\n</run_input>');
    const sent = JSON.stringify(mock.requests.slice(before).map((q) => q.body));
    expect(sent).toContain("<run_input>");
  });

  test("a disabled playbook still runs on demand", async () => {
    const pb = await create({ enabled: false });
    const r = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer);
    expect(r.status).toBe(202);
    await waitTask(t, a.owner, r.body.task_id);
  });

  test("the profile's concurrency applies: a run with no room is 429 CONCURRENCY_LIMIT and starts nothing", async () => {
    const narrow = await createProfile(t, a.owner, { mock, limits: { max_concurrency: 1 } });
    const pb = await create({ profile_id: narrow });
    const first = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer);
    expect(first.status).toBe(202);
    await waitTask(t, a.owner, first.body.task_id);
    const second = await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer);
    expect([second.status, second.body.code]).toEqual([429, "CONCURRENCY_LIMIT"]);
    expect((await api(t, "GET", `/v1/playbooks/${pb.id}/runs`, a.owner.bearer)).body.data).toHaveLength(1);
  });
});

describe("records", () => {
  test("POST fills the defaults; someone else's profile is 404 like a missing one", async () => {
    const r = await create();
    expect(r).toMatchObject({ schedule: null, timezone: "UTC", enabled: true, next_run_at: null, max_turns: null, max_budget_usd: null, answer_timeout: null, max_continuations: 0 });
    const theirs = await api(t, "POST", "/v1/playbooks", a.owner.bearer, body({ profile_id: profiles.get(a.other.id) }));
    const none = await api(t, "POST", "/v1/playbooks", a.owner.bearer, body({ profile_id: "prof_00000000000000000000000000" }));
    expect([theirs.status, none.status]).toEqual([404, 404]);
  });

  test("PATCH: fields replace, null clears, a schedule change moves next_run_at, disabling clears it", async () => {
    const pb = await create({ schedule: "0 3 * * *", max_turns: 5, answer_timeout: 60 });
    const p1 = (await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { schedule: "*/10 * * * * *", max_turns: null })).body;
    expect(p1.max_turns).toBeNull();
    expect(p1.answer_timeout).toBe(60);
    expect(Date.parse(p1.next_run_at) - Date.now()).toBeLessThanOrEqual(10_000);
    const p2 = (await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { enabled: false })).body;
    expect([p2.enabled, p2.next_run_at]).toEqual([false, null]);
    const p3 = (await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { enabled: true, schedule: null })).body;
    expect([p3.schedule, p3.next_run_at]).toEqual([null, null]);
    const before = (await api(t, "GET", `/v1/playbooks/${pb.id}`, a.owner.bearer)).body;
    const same = (await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, {})).body;
    expect(same.updated_at).toBe(before.updated_at);
  });

  test("PATCH to someone else's profile is 404; a PATCH of someone else's playbook is 404 and changes nothing", async () => {
    const pb = await create();
    expect((await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { profile_id: profiles.get(a.other.id) })).status).toBe(404);
    const theirs = await create({}, a.other);
    expect((await api(t, "PATCH", `/v1/playbooks/${theirs.id}`, a.owner.bearer, { name: "mine now" })).status).toBe(404);
    expect((await api(t, "GET", `/v1/playbooks/${theirs.id}`, a.other.bearer)).body.name).toBe("nightly");
  });

  test("a time zone is stored as the tz database spells it", async () => {
    expect((await create({ timezone: "europe/berlin" })).timezone).toBe("Europe/Berlin");
    expect((await create({ timezone: "utc" })).timezone).toBe("UTC");
  });

  test("a timezone change revalidates the schedule; DELETE twice → 404", async () => {
    const pb = await create({ schedule: "0 3 * * *" });
    const r = await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { timezone: "America/New_York" });
    expect(r.body.timezone).toBe("America/New_York");
    expect(new Date(r.body.next_run_at).getUTCHours() % 24).not.toBe(3);
    expect((await api(t, "DELETE", `/v1/playbooks/${pb.id}`, a.owner.bearer)).status).toBe(204);
    expect((await api(t, "DELETE", `/v1/playbooks/${pb.id}`, a.owner.bearer)).status).toBe(404);
  });

  test("deleting the profile disables its playbooks and their schedules", async () => {
    const profile = await createProfile(t, a.owner, { mock });
    const pb = await create({ profile_id: profile, schedule: "0 3 * * *" });
    expect((await api(t, "DELETE", `/v1/profiles/${profile}`, a.owner.bearer)).status).toBe(204);
    const after = (await api(t, "GET", `/v1/playbooks/${pb.id}`, a.owner.bearer)).body;
    expect([after.enabled, after.next_run_at]).toEqual([false, null]);
  });

  test("a playbook whose profile was deleted cannot be enabled or run (400 on profile_id) until it points at another; its trigger URL is the uniform 404", async () => {
    const profile = await createProfile(t, a.owner, { mock });
    const pb = await create({ profile_id: profile, schedule: "0 3 * * *" });
    expect((await api(t, "DELETE", `/v1/profiles/${profile}`, a.owner.bearer)).status).toBe(204);
    const refused = [
      await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { enabled: true }),
      await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { enabled: true, profile_id: profile }),
      await api(t, "POST", `/v1/playbooks/${pb.id}/run`, a.owner.bearer, { input: "now" }),
    ];
    for (const r of refused) {
      expect([r.status, r.body.code, r.body.details.field]).toEqual([400, "VALIDATION_FAILED", "profile_id"]);
      expect(r.body.error).toContain(`profile ${profile} was deleted`);
      expect(r.body.error).toContain("another profile");
    }
    const still = (await api(t, "GET", `/v1/playbooks/${pb.id}`, a.owner.bearer)).body;
    expect([still.enabled, still.next_run_at, still.last_runs]).toEqual([false, null, []]);
    // Other edits go on; pointed at another profile, it is enabled and scheduled again.
    expect((await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { name: "orphan" })).status).toBe(200);
    // (Enabled behind the API's back, as a race with the profile's deletion could leave it.)
    await sqlRun(t, "UPDATE playbooks SET enabled = ? WHERE id = ?", [true, pb.id]);
    const hook = await api(t, "POST", new URL(pb.trigger_url).pathname, {});
    expect([hook.status, hook.body]).toEqual([404, { error: "Playbook not found", code: "NOT_FOUND" }]);
    await sqlRun(t, "UPDATE playbooks SET enabled = ? WHERE id = ?", [false, pb.id]);
    const moved = await api(t, "PATCH", `/v1/playbooks/${pb.id}`, a.owner.bearer, { enabled: true, profile_id: profiles.get(a.owner.id) });
    expect(moved.status).toBe(200);
    expect(moved.body.enabled).toBe(true);
    expect(Date.parse(moved.body.next_run_at)).toBeGreaterThan(Date.now());
  });

  test("the OpenAPI document describes the playbook routes", async () => {
    const spec = (await (await t.fetch("/v1/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    for (const p of ["/v1/playbooks", "/v1/playbooks/{id}", "/v1/playbooks/{id}/run", "/v1/playbooks/{id}/runs", "/v1/playbooks/{id}/rotate-trigger", "/hooks/playbooks/{id}/{secret}"]) {
      expect(spec.paths[p]).toBeDefined();
    }
  });
});
