/**
 * /v1/sessions: the route scenario table (credentials, someone else's session, bad input,
 * success), on a real app with real workspaces for the routes that start one.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createProfile } from "../../helpers/agent.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../../helpers/mock-anthropic.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, type TestUser } from "../../helpers/users.ts";
import { type GitServer, startGitServer } from "../../helpers/git-server.ts";
import { submit, waitTask } from "../../helpers/agent.ts";

let t: TestApp;
let mock: MockProviderServer;
let a: Actors;
let git: GitServer;
let repoUrl: string;
const profiles = new Map<string, string>();

beforeAll(async () => {
  t = await startTestApp();
  mock = startMockAnthropic().script(() => ({ text: "ok" }));
  a = await actors(t);
  for (const u of [a.owner, a.other]) profiles.set(u.id, await createProfile(t, u, { mock }));
  git = await startGitServer();
  repoUrl = await git.createRepo("app");
  await api(t, "PUT", "/v1/secrets/GIT", a.owner.bearer, { value: `${git.user}:${git.password}` });
});
afterAll(async () => {
  await t.stop();
  await mock.stop();
  await git.stop();
});

/** A session of the owner whose workspace holds a clone of the test repository at /workspace/app. */
async function sessionWithRepository(_a: Actors, user: TestUser): Promise<string> {
  const r = await submit(t, user, { profile_id: profiles.get(user.id), prompt: "hi", repositories: [{ url: repoUrl, credential_secret: "GIT" }] });
  expect((await waitTask(t, user, r.task_id)).status).toBe("completed");
  return r.session_id;
}

/** A session row of `user` with one stored frame (no workspace: the routes read and delete rows). */
async function session(_a: Actors, user: TestUser): Promise<string> {
  const s = t.app.services;
  const row = await s.agentSessions.create(user.id, profiles.get(user.id)!, "a title");
  s.hub.publish(row.id, { type: "task:token", task_id: "task_00000000000000000000000000", text: "hi" });
  return row.id;
}

routeTable("/v1/sessions", () => a, [
  {
    route: "POST /v1/sessions",
    body: () => ({ profile_id: profiles.get(a.owner.id) }),
    invalid: [
      { name: "no profile_id", body: {}, field: "profile_id" },
      { name: "a profile_id that is not a string", body: { profile_id: 7 }, field: "profile_id" },
      { name: "an unknown field", body: { profile_id: "prof_x", title: "t" }, field: "title" },
    ],
    success: 201,
    check: (r) => {
      expect(r.body.id).toMatch(/^sess_/);
      expect(r.body.container_id).toMatch(/^ctr_/);
      expect(r.body.status).toBe("idle");
    },
  },
  { route: "GET /v1/sessions", query: "limit=10", invalid: [{ name: "limit=101", query: "limit=101", field: "limit" }], success: 200, check: (r) => expect(r.body.data.length).toBeGreaterThan(0) },
  { route: "GET /v1/sessions/:id", record: session, success: 200, check: (r, _a, id) => expect([r.body.id, r.body.title, r.body.container_id]).toEqual([id, "a title", null]) },
  {
    route: "GET /v1/sessions/:id/events",
    record: session,
    query: "after=0",
    invalid: [
      { name: "a negative after", query: "after=-1", field: "after" },
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "a non-numeric cursor", query: "cursor=abc", field: "cursor" },
      { name: "after=1e1 (decimal digits only)", query: "after=1e1", field: "after" },
      { name: "cursor=0x1", query: "cursor=0x1", field: "cursor" },
      { name: "limit=%2010", query: "limit=%2010", field: "limit" },
      { name: "after given twice", query: "after=8&after=2", field: "after" },
      { name: "both after and cursor (the same position)", query: "after=8&cursor=2", field: "cursor" },
    ],
    success: 200,
    check: (r, _a, id) => {
      expect(r.body.data).toHaveLength(1);
      expect(r.body.data[0]).toMatchObject({ type: "task:token", session_id: id, seq: 1, text: "hi" });
      expect(r.body.next_cursor).toBeNull();
    },
  },
  {
    route: "POST /v1/sessions/:id/git/push",
    record: session,
    successRecord: sessionWithRepository,
    body: () => ({ path: "app", branch: "main" }),
    invalid: [
      { name: "no path", body: {}, field: "path" },
      { name: "a branch name starting with -", body: { path: "app", branch: "-f" }, field: "branch" },
      { name: "an unknown field", body: { path: "app", force: true }, field: "force" },
      { name: "a path that is none of the session's repositories", body: { path: "elsewhere" }, field: "path" },
    ],
    success: 200,
    check: (r) => expect(r.body).toMatchObject({ repository: repoUrl, path: "/workspace/app", branch: "main", remote_branch: "main", status: "up_to_date" }),
  },
  {
    route: "DELETE /v1/sessions/:id",
    record: session,
    success: 204,
    check: async (_r, _a, id) => expect((await api(t, "GET", `/v1/sessions/${id}`, a.owner.bearer)).status).toBe(404),
  },
]);

test("POST /v1/sessions with someone else's profile → 404, like a missing one", async () => {
  const theirs = await api(t, "POST", "/v1/sessions", a.owner.bearer, { profile_id: profiles.get(a.other.id) });
  const none = await api(t, "POST", "/v1/sessions", a.owner.bearer, { profile_id: "prof_00000000000000000000000000" });
  expect([theirs.status, none.status]).toEqual([404, 404]);
  expect(theirs.body.error.replace(profiles.get(a.other.id)!, ":id")).toBe(none.body.error.replace("prof_00000000000000000000000000", ":id"));
});

test("DELETE twice → 404 the second time", async () => {
  const id = await session(a, a.owner);
  expect((await api(t, "DELETE", `/v1/sessions/${id}`, a.owner.bearer)).status).toBe(204);
  const again = await api(t, "DELETE", `/v1/sessions/${id}`, a.owner.bearer);
  expect([again.status, again.body.code]).toEqual([404, "NOT_FOUND"]);
});

test("DELETEs at the same time: exactly one 204, the others 404; the workspace and the records are gone", async () => {
  // With a workspace: removing its container takes long enough for the deletes to overlap.
  const created = await api(t, "POST", "/v1/sessions", a.owner.bearer, { profile_id: profiles.get(a.owner.id) });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const answers = await Promise.all(Array.from({ length: 4 }, () => api(t, "DELETE", `/v1/sessions/${id}`, a.owner.bearer)));
  expect(answers.map((r) => r.status).sort()).toEqual([204, 404, 404, 404]);
  for (const r of answers.filter((r) => r.status === 404)) expect(r.body.code).toBe("NOT_FOUND");
  expect((await api(t, "GET", `/v1/sessions/${id}`, a.owner.bearer)).status).toBe(404);
  expect(await t.app.services.workspaces.forSession(id)).toBeNull();
});

test("a huge made-up profile id is 404 without echoing it whole", async () => {
  const r = await api(t, "POST", "/v1/sessions", a.owner.bearer, { profile_id: `prof_${"a".repeat(900_000)}` });
  expect([r.status, r.body.code]).toEqual([404, "NOT_FOUND"]);
  expect(JSON.stringify(r.body).length).toBeLessThan(300);
  expect(r.body.error).toContain(`prof_${"a".repeat(59)}…`);
});
