/**
 * /v1/workspaces, /files and /admin/workspaces: the route scenario table (no credential, bad
 * credential, someone else's record, bad input, success) on a real app with real containers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mintTokenString } from "../../src/auth/tokens.ts";
import type { Workspaces } from "../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { insertProfile, newWorkspace, sweepInstance } from "./helpers.ts";

const ADMIN = "operator password for tests";
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]);
let t: TestApp;
let ws: Workspaces;
let alice: TestUser;
let bob: TestUser;
let aliceWs: string;
let aliceSession: string;
let bobWs: string;
const doomed: string[] = [];

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  await t.app.services.adminPassword.set(ADMIN);
  [alice, bob] = await Promise.all([createUser(t), createUser(t)]);
  const pa = insertProfile(t, alice.id);
  const made = await Promise.all([newWorkspace(t, alice.id, pa), newWorkspace(t, bob.id, insertProfile(t, bob.id)), newWorkspace(t, alice.id, pa), newWorkspace(t, bob.id, insertProfile(t, bob.id))]);
  aliceWs = made[0].ws.id;
  aliceSession = made[0].sessionId;
  bobWs = made[1].ws.id;
  doomed.push(made[2].ws.id, made[3].ws.id);
  await ws.writeFile(aliceSession, "hello.txt", "hello, alice\n");
  await ws.writeFile(aliceSession, "img/chart.png", PNG);
  await ws.writeFile(aliceSession, "page.html", "<script>alert(1)</script>");
  await ws.exec(aliceSession, { cmd: ["/bin/sh", "-c", "ln -s /etc etclink && head -c 3000000 /dev/urandom > big.bin"] });
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

type Creds = "none" | "malformed token" | "unknown token" | "bad cookie" | "token" | "cookie" | "admin" | "wrong admin";
const headersFor = (c: Creds): Record<string, string> => {
  switch (c) {
    case "none":
      return {};
    case "malformed token":
      return { authorization: `Bearer rc_${"0".repeat(64)}` };
    case "unknown token":
      return { authorization: `Bearer ${mintTokenString()}` };
    case "bad cookie":
      return { cookie: "runcell.session_token=not-a-session", origin: t.url };
    case "token":
      return { authorization: `Bearer ${alice.token}` };
    case "cookie":
      return { cookie: alice.cookie, origin: t.url };
    case "admin":
      return { authorization: `Bearer ${ADMIN}` };
    case "wrong admin":
      return { authorization: "Bearer not the admin password" };
  }
};

interface Scenario {
  name: string;
  method: string;
  path: () => string;
  creds: Creds;
  status: number;
  code?: string;
  field?: string;
}

const S = (name: string, method: string, path: () => string, creds: Creds, status: number, code?: string, field?: string): Scenario => ({ name, method, path, creds, status, code, field });
const signed = (path: string) => new URL(ws.signedFileUrl(aliceWs, path)).pathname + new URL(ws.signedFileUrl(aliceWs, path)).search;

const scenarios: Scenario[] = [];
for (const creds of ["none", "malformed token", "unknown token", "bad cookie"] as const) {
  scenarios.push(
    S(`list with ${creds}`, "GET", () => "/v1/workspaces", creds, 401, "UNAUTHORIZED"),
    S(`get with ${creds}`, "GET", () => `/v1/workspaces/${aliceWs}`, creds, 401, "UNAUTHORIZED"),
    S(`delete with ${creds}`, "DELETE", () => `/v1/workspaces/${aliceWs}`, creds, 401, "UNAUTHORIZED"),
    S(`list files with ${creds}`, "GET", () => `/v1/workspaces/${aliceWs}/files`, creds, 401, "UNAUTHORIZED"),
    S(`download with ${creds}`, "GET", () => `/v1/workspaces/${aliceWs}/files/hello.txt`, creds, 401, "UNAUTHORIZED"),
  );
}
scenarios.push(
  S("anonymous bad input is still 401", "GET", () => `/v1/workspaces/${aliceWs}/files?path=../etc`, "none", 401, "UNAUTHORIZED"),
  S("get someone else's workspace", "GET", () => `/v1/workspaces/${bobWs}`, "token", 404, "NOT_FOUND"),
  S("delete someone else's workspace", "DELETE", () => `/v1/workspaces/${bobWs}`, "cookie", 404, "NOT_FOUND"),
  S("list someone else's files", "GET", () => `/v1/workspaces/${bobWs}/files`, "token", 404, "NOT_FOUND"),
  S("download someone else's file", "GET", () => `/v1/workspaces/${bobWs}/files/hello.txt`, "token", 404, "NOT_FOUND"),
  S("get a workspace that never existed", "GET", () => "/v1/workspaces/ctr_01aaaaaaaaaaaaaaaaaaaaaaaa", "token", 404, "NOT_FOUND"),
  S("list with limit=0", "GET", () => "/v1/workspaces?limit=0", "token", 400, "VALIDATION_FAILED", "limit"),
  S("list files outside /workspace", "GET", () => `/v1/workspaces/${aliceWs}/files?path=../etc`, "token", 400, "VALIDATION_FAILED", "path"),
  S("list files through a symlink out", "GET", () => `/v1/workspaces/${aliceWs}/files?path=etclink`, "token", 400, "VALIDATION_FAILED", "path"),
  S("list files with limit=5000", "GET", () => `/v1/workspaces/${aliceWs}/files?limit=5000`, "token", 400, "VALIDATION_FAILED", "limit"),
  S("list a missing directory", "GET", () => `/v1/workspaces/${aliceWs}/files?path=nope`, "token", 404, "NOT_FOUND"),
  S("download through a symlink out", "GET", () => `/v1/workspaces/${aliceWs}/files/etclink/passwd`, "token", 400, "VALIDATION_FAILED", "path"),
  S("download an encoded escape", "GET", () => `/v1/workspaces/${aliceWs}/files/img/..%2F..%2Fetc%2Fpasswd`, "token", 400, "VALIDATION_FAILED", "path"),
  S("download bad percent-encoding", "GET", () => `/v1/workspaces/${aliceWs}/files/%E0%A4%A`, "token", 400, "VALIDATION_FAILED", "path"),
  S("download a directory", "GET", () => `/v1/workspaces/${aliceWs}/files/img`, "token", 400, "VALIDATION_FAILED", "path"),
  S("download a missing file", "GET", () => `/v1/workspaces/${aliceWs}/files/nope.txt`, "token", 404, "NOT_FOUND"),
  S("list", "GET", () => "/v1/workspaces", "token", 200),
  S("list with a cookie", "GET", () => "/v1/workspaces", "cookie", 200),
  S("get", "GET", () => `/v1/workspaces/${aliceWs}`, "cookie", 200),
  S("list files", "GET", () => `/v1/workspaces/${aliceWs}/files?path=img`, "token", 200),
  S("download", "GET", () => `/v1/workspaces/${aliceWs}/files/hello.txt`, "cookie", 200),
  S("signed URL without signature", "GET", () => `/files/${aliceWs}/hello.txt`, "none", 404, "NOT_FOUND"),
  S("signed URL with a bad signature", "GET", () => signed("hello.txt").replace(/sig=./, (m) => (m.endsWith("0") ? "sig=1" : "sig=0")), "none", 404, "NOT_FOUND"),
  S("signed URL for a missing file", "GET", () => signed("nope.txt"), "none", 404, "NOT_FOUND"),
  S("signed URL", "GET", () => signed("hello.txt"), "none", 200),
  S("admin list without credential", "GET", () => "/admin/workspaces", "none", 401, "UNAUTHORIZED"),
  S("admin list with a user token", "GET", () => "/admin/workspaces", "token", 401, "UNAUTHORIZED"),
  S("admin list with a wrong password", "GET", () => "/admin/workspaces", "wrong admin", 401, "UNAUTHORIZED"),
  S("admin delete without credential", "DELETE", () => `/admin/workspaces/${bobWs}`, "none", 401, "UNAUTHORIZED"),
  S("admin list with limit=0", "GET", () => "/admin/workspaces?limit=0", "admin", 400, "VALIDATION_FAILED", "limit"),
  S("admin delete of a missing workspace", "DELETE", () => "/admin/workspaces/ctr_01aaaaaaaaaaaaaaaaaaaaaaaa", "admin", 404, "NOT_FOUND"),
  S("admin list with an unknown status", "GET", () => "/admin/workspaces?status=sleeping", "admin", 400, "VALIDATION_FAILED", "status"),
  S("admin list", "GET", () => "/admin/workspaces", "admin", 200),
);

const RECORD_KEYS = ["created_at", "error", "id", "image", "last_active_at", "name", "profile_id", "session_id", "status"];

describe("workspace route scenarios", () => {
  test.each(scenarios.map((s) => [s.name, s] as const))("%s", async (_n, s) => {
    const r = await api(t, s.method, s.path(), headersFor(s.creds));
    expect(r.status).toBe(s.status);
    if (s.code) expect(r.body.code).toBe(s.code);
    if (s.field) expect(r.body.details.field).toBe(s.field);
  });

  test("list and get: the caller's records, in the documented shape", async () => {
    const list = await api(t, "GET", "/v1/workspaces", headersFor("token"));
    const ids = list.body.data.map((w: { id: string }) => w.id);
    expect(ids).toContain(aliceWs);
    expect(ids).not.toContain(bobWs);
    for (const w of list.body.data) expect(Object.keys(w).sort()).toEqual(RECORD_KEYS);
    const one = await api(t, "GET", `/v1/workspaces/${aliceWs}`, headersFor("token"));
    expect(one.body).toMatchObject({ id: aliceWs, session_id: aliceSession, status: "running", name: `runcell-${aliceWs}`, image: t.config.workspaceImage, error: null });
    expect(one.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const page = await api(t, "GET", "/v1/workspaces?limit=1", headersFor("token"));
    expect(page.body.data.length).toBe(1);
    const next = await api(t, "GET", `/v1/workspaces?limit=1&cursor=${page.body.next_cursor}`, headersFor("token"));
    expect(next.body.data[0].id).not.toBe(page.body.data[0].id);
  });

  test("file listing and downloads: types, content types, dispositions, streaming", async () => {
    const root = await api(t, "GET", `/v1/workspaces/${aliceWs}/files`, headersFor("token"));
    expect(root.body.path).toBe("");
    const names = root.body.data.map((e: { name: string }) => e.name);
    expect(names).toEqual(expect.arrayContaining(["hello.txt", "img", "page.html", "etclink", "big.bin"]));
    expect(root.body.data.find((e: { name: string }) => e.name === "hello.txt")).toMatchObject({ type: "file", size: 13, path: "hello.txt" });

    const png = await t.fetch(`/v1/workspaces/${aliceWs}/files/img/chart.png`, { headers: headersFor("token") });
    expect(png.headers.get("content-type")).toBe("image/png");
    expect(png.headers.get("content-disposition")).toStartWith("inline;");
    expect(new Uint8Array(await png.arrayBuffer())).toEqual(PNG);

    const html = await t.fetch(`/v1/workspaces/${aliceWs}/files/page.html`, { headers: headersFor("token") });
    expect(html.headers.get("content-disposition")).toStartWith("attachment;");
    expect(html.headers.get("content-security-policy")).toContain("sandbox");

    expect(png.headers.get("content-length")).toBe(String(PNG.byteLength));
    const big = await t.fetch(`/v1/workspaces/${aliceWs}/files/big.bin`, { headers: headersFor("token") });
    expect(big.status).toBe(200);
    const sum = (await ws.exec(aliceSession, { cmd: ["sha256sum", "big.bin"] })).output.split(" ")[0];
    expect(new Bun.CryptoHasher("sha256").update(await big.arrayBuffer()).digest("hex")).toBe(sum!);
  });

  test("a file over the download cap is a clear 400", async () => {
    const cap = ws.maxFileBytes;
    ws.maxFileBytes = 1_000_000;
    try {
      const r = await api(t, "GET", `/v1/workspaces/${aliceWs}/files/big.bin`, headersFor("token"));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", size: 3_000_000, limit_bytes: 1_000_000 } });
      expect(r.body.error).toContain("limit");
    } finally {
      ws.maxFileBytes = cap;
    }
  });

  test("DELETE removes the workspace: 204, then 404; admin DELETE the same", async () => {
    const [mine, theirs] = doomed as [string, string];
    expect((await api(t, "DELETE", `/v1/workspaces/${mine}`, headersFor("cookie"))).status).toBe(204);
    expect((await api(t, "GET", `/v1/workspaces/${mine}`, headersFor("token"))).status).toBe(404);
    expect((await api(t, "DELETE", `/v1/workspaces/${mine}`, headersFor("token"))).status).toBe(404);
    const all = await api(t, "GET", "/admin/workspaces?limit=100", headersFor("admin"));
    const rec = all.body.data.find((w: { id: string }) => w.id === theirs);
    expect(rec).toMatchObject({ user_id: bob.id, volume: `runcell-${theirs}` });
    expect(all.body.data.some((w: { user_id: string }) => w.user_id === alice.id)).toBe(true);
    const bobs = await api(t, "GET", `/admin/workspaces?user_id=${bob.id}&status=running`, headersFor("admin"));
    expect(bobs.body.data.map((w: { id: string }) => w.id).sort()).toEqual([bobWs, theirs].sort());
    expect((await api(t, "GET", "/admin/workspaces?status=failed", headersFor("admin"))).body.data).toEqual([]);
    expect((await api(t, "DELETE", `/admin/workspaces/${theirs}`, headersFor("admin"))).status).toBe(204);
    expect((await api(t, "DELETE", `/admin/workspaces/${theirs}`, headersFor("admin"))).status).toBe(404);
    expect(ws.byId(theirs)).toBeNull();
  });

  test("the routes are in the OpenAPI document", async () => {
    const doc = (await api(t, "GET", "/v1/openapi.json")).body;
    for (const p of ["/v1/workspaces/", "/v1/workspaces/{id}", "/v1/workspaces/{id}/files", "/admin/workspaces/", "/admin/workspaces/{id}"]) {
      expect(Object.keys(doc.paths).some((k) => k.replace(/\/$/, "") === p.replace(/\/$/, ""))).toBe(true);
    }
  });
});
