/**
 * /admin/workspaces: the route scenario table (anonymous and a user's token → 401, a workspace that
 * does not exist, bad input, the admin password → success) and the list's filters, on a real app
 * with real containers: one workspace per user, and a fresh one for the DELETE that succeeds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Workspaces } from "../../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";
import { insertProfile, newWorkspace, sweepInstance } from "../../workspaces/helpers.ts";

let t: TestApp;
let ws: Workspaces;
let a: Actors;
/** Each user's workspace (user id → container id). */
const shared = new Map<string, string>();

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  a = await actors(t);
  await Promise.all([a.owner, a.other].map(async (u) => shared.set(u.id, (await newWorkspace(t, u.id, await insertProfile(t, u.id))).ws.id)));
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

const RECORD_KEYS = ["created_at", "docker_id", "error", "host", "id", "image", "last_active_at", "name", "profile_id", "session_id", "status", "updated_at", "user_id", "volume"];

routeTable("/admin/workspaces", () => a, [
  {
    route: "GET /admin/workspaces",
    query: "limit=100",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "an unknown status", query: "status=sleeping", field: "status" },
      { name: "a user_id over 64 characters", query: `user_id=usr_${"0".repeat(62)}`, field: "user_id" },
    ],
    success: 200,
    check: (r) => {
      for (const u of [a.owner, a.other]) {
        const id = shared.get(u.id)!;
        expect(r.body.data.find((w: { id: string }) => w.id === id)).toMatchObject({ user_id: u.id, volume: `runcell-${id}`, docker_id: expect.any(String), status: "running" });
      }
      for (const w of r.body.data) expect(Object.keys(w).sort()).toEqual(RECORD_KEYS);
    },
  },
  {
    route: "DELETE /admin/workspaces/:id",
    record: async (_a, user) => shared.get(user.id)!,
    successRecord: async (_a, user) => (await newWorkspace(t, user.id, await insertProfile(t, user.id))).ws.id,
    success: 204,
    check: async (r, _a, id) => {
      expect(r.body).toBeNull();
      expect(await ws.byId(id!)).toBeNull();
      expect((await api(t, "GET", `/v1/workspaces/${id}`, a.headers("owner"))).status).toBe(404);
      const again = await api(t, "DELETE", `/admin/workspaces/${id}`, a.headers("admin"));
      expect(again.status).toBe(404);
      expect(again.body.code).toBe("NOT_FOUND");
    },
  },
]);

test("the list filters by user_id and status, and the refused DELETEs left the workspaces running", async () => {
  const others = await api(t, "GET", `/admin/workspaces?user_id=${a.other.id}&status=running`, a.headers("admin"));
  expect(others.status).toBe(200);
  expect(others.body.data.map((w: { id: string }) => w.id)).toEqual([shared.get(a.other.id)]);
  const owners = await api(t, "GET", `/admin/workspaces?user_id=${a.owner.id}`, a.headers("admin"));
  expect(owners.body.data.map((w: { id: string }) => w.id)).toEqual([shared.get(a.owner.id)]);
  expect((await api(t, "GET", "/admin/workspaces?status=failed", a.headers("admin"))).body.data).toEqual([]);
  expect((await api(t, "GET", "/admin/workspaces?user_id=usr_nobody", a.headers("admin"))).body.data).toEqual([]);
});

test("pages of one, newest first", async () => {
  const page = await api(t, "GET", "/admin/workspaces?limit=1", a.headers("admin"));
  expect(page.body.data).toHaveLength(1);
  const next = await api(t, "GET", `/admin/workspaces?limit=1&cursor=${page.body.next_cursor}`, a.headers("admin"));
  expect(next.body.data).toHaveLength(1);
  expect(next.body.data[0].id < page.body.data[0].id).toBe(true);
});

test("the routes are in the OpenAPI document", async () => {
  const doc = (await api(t, "GET", "/v1/openapi.json")).body;
  for (const p of ["/admin/workspaces", "/admin/workspaces/{id}"]) expect(Object.keys(doc.paths)).toContain(p);
});
