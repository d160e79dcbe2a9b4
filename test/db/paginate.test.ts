/**
 * Every id-keyed list of the API (each GET without a path parameter that takes `cursor`, read from
 * the OpenAPI document so a new list is covered too) refuses a cursor that is not a next_cursor
 * with 400 on `cursor`, instead of comparing it with ids as text.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { ADMIN_PASSWORD, actors, type Actors } from "../helpers/scenarios.ts";
import { api } from "../helpers/users.ts";

let t: TestApp;
let a: Actors;
let lists: string[] = [];

beforeAll(async () => {
  t = await startTestApp();
  a = await actors(t);
  const doc = (await api(t, "GET", "/v1/openapi.json", {})).body as { paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema?: { type?: string } }[] }>> };
  lists = Object.entries(doc.paths)
    .filter(([path, ops]) => !path.includes("{") && ops.get?.parameters?.some((p) => p.in === "query" && p.name === "cursor" && p.schema?.type === "string"))
    .map(([path]) => path);
});
afterAll(() => t.stop());

const headersFor = (path: string) => (path.startsWith("/admin") ? { authorization: `Bearer ${ADMIN_PASSWORD}` } : a.headers("owner"));

test("the OpenAPI document lists the id-keyed lists", () => {
  expect(lists).toEqual(expect.arrayContaining(["/v1/api-tokens", "/v1/profiles", "/v1/sessions", "/v1/tasks", "/v1/playbooks", "/v1/notifications", "/v1/secrets", "/admin/users", "/admin/audit"]));
});

test("a made-up cursor is 400 on cursor; a well-formed one reads the page after it", async () => {
  for (const path of lists) {
    for (const cursor of ["garbage", "zzzz", "tok_!", "%27%20OR%201%3D1"]) {
      const r = await api(t, "GET", `${path}?cursor=${cursor}`, headersFor(path));
      expect(r.status, `${path}?cursor=${cursor}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.code).toBe("VALIDATION_FAILED");
      expect(r.body.details.field).toBe("cursor");
    }
    if (path === "/v1/secrets") continue; // its cursor is opaque (name and time), not an id
    const own = PREFIXES[path];
    expect(own, `the id prefix of ${path}'s records (add it to PREFIXES)`).toBeDefined();
    const r = await api(t, "GET", `${path}?cursor=${own}_${"z".repeat(26)}`, headersFor(path));
    expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(200);
    // A well-formed cursor of another list is not one of this list's.
    const foreign = own === "tok" ? "aud" : "tok";
    const f = await api(t, "GET", `${path}?cursor=${foreign}_${"z".repeat(26)}`, headersFor(path));
    expect(f.status, `${path}?cursor=${foreign}_…: ${JSON.stringify(f.body)}`).toBe(400);
    expect(f.body.details.field).toBe("cursor");
  }
});

/** Each id-keyed list's record prefix (src/db/ids.ts). */
const PREFIXES: Record<string, string> = {
  "/v1/api-tokens": "tok",
  "/v1/profiles": "prof",
  "/v1/sessions": "sess",
  "/v1/tasks": "task",
  "/v1/playbooks": "pb",
  "/v1/notifications": "ntf",
  "/v1/integrations": "int",
  "/v1/workspaces": "ctr",
  "/admin/users": "usr",
  "/admin/audit": "aud",
  "/admin/workspaces": "ctr",
  "/admin/notifications": "ntf",
};
