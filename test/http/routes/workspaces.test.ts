/**
 * /v1/workspaces and their files: the route scenario table (credentials, someone else's workspace,
 * bad input, success) and the behaviour behind it (the record's shape and pages, directory
 * listings, content types and dispositions, streamed downloads, the download cap), on a real app
 * with real containers: one workspace per user, shared by every row, and a fresh one for the
 * DELETE that succeeds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mintTokenString } from "../../../src/auth/tokens.ts";
import { newId } from "../../../src/db/ids.ts";
import { workspaces } from "../../../src/db/tables.ts";
import type { Workspaces } from "../../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api, type TestUser } from "../../helpers/users.ts";
import { insertProfile, insertSession, newWorkspace, sweepInstance } from "../../workspaces/helpers.ts";

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]);
const HELLO = "hello, workspace\n";
let t: TestApp;
let ws: Workspaces;
let a: Actors;
/** Each user's workspace (user id → container and session ids). */
const shared = new Map<string, { id: string; sessionId: string }>();
const mine = () => shared.get(a.owner.id)!;

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  a = await actors(t);
  await Promise.all(
    [a.owner, a.other].map(async (u) => {
      const made = await newWorkspace(t, u.id, await insertProfile(t, u.id));
      shared.set(u.id, { id: made.ws.id, sessionId: made.sessionId });
    }),
  );
  const { sessionId } = mine();
  await ws.writeFile(sessionId, "hello.txt", HELLO);
  await ws.writeFile(sessionId, "img/chart.png", PNG);
  await ws.writeFile(sessionId, "page.html", "<script>alert(1)</script>");
  await ws.exec(sessionId, { cmd: ["/bin/sh", "-c", "ln -s /etc etclink && ln -s loop2 loop1 && ln -s loop1 loop2 && head -c 3000000 /dev/urandom > big.bin"] });
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

/** The user's workspace (shared: nothing that uses it deletes it). */
const workspaceOf = async (_a: Actors, user: TestUser) => shared.get(user.id)!.id;

/** The user's workspace, with hello.txt in it. */
async function withHello(_a: Actors, user: TestUser): Promise<string> {
  const w = shared.get(user.id)!;
  await ws.writeFile(w.sessionId, "hello.txt", HELLO);
  return w.id;
}

/** A workspace of its own, for the DELETE that succeeds. */
const freshWorkspace = async (_a: Actors, user: TestUser) => (await newWorkspace(t, user.id, await insertProfile(t, user.id))).ws.id;

const RECORD_KEYS = ["created_at", "error", "id", "image", "last_active_at", "name", "profile_id", "session_id", "status"];

routeTable("/v1/workspaces", () => a, [
  {
    route: "GET /v1/workspaces",
    query: "limit=100",
    invalid: [
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=101", query: "limit=101", field: "limit" },
      { name: "a cursor over 200 characters", query: `cursor=${"x".repeat(201)}`, field: "cursor" },
    ],
    success: 200,
    check: (r) => {
      const ids = r.body.data.map((w: { id: string }) => w.id);
      expect(ids).toContain(mine().id);
      expect(ids).not.toContain(shared.get(a.other.id)!.id);
      for (const w of r.body.data) expect(Object.keys(w).sort()).toEqual(RECORD_KEYS);
      expect(r.body).toHaveProperty("next_cursor", null);
    },
  },
  {
    route: "GET /v1/workspaces/:id",
    record: workspaceOf,
    viaCookie: true,
    success: 200,
    check: (r, _a, id) => {
      expect(r.body).toMatchObject({ id, session_id: mine().sessionId, status: "running", name: `runcell-${id}`, image: t.config.workspaceImage, error: null });
      expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    },
  },
  {
    route: "DELETE /v1/workspaces/:id",
    record: workspaceOf,
    successRecord: freshWorkspace,
    viaCookie: true,
    success: 204,
    check: async (r, _a, id) => {
      expect(r.body).toBeNull();
      expect(await ws.byId(id!)).toBeNull();
      expect((await api(t, "GET", `/v1/workspaces/${id}`, a.headers("owner"))).status).toBe(404);
      const again = await api(t, "DELETE", `/v1/workspaces/${id}`, a.headers("owner"));
      expect(again.status).toBe(404);
      expect(again.body.code).toBe("NOT_FOUND");
    },
  },
  {
    route: "GET /v1/workspaces/:id/files",
    record: workspaceOf,
    query: "path=img",
    invalid: [
      { name: "a path outside /workspace", query: "path=../etc", field: "path" },
      { name: "a path through a symlink out", query: "path=etclink", field: "path" },
      { name: "a path that is a file", query: "path=hello.txt", field: "path" },
      { name: "limit=5000", query: "limit=5000", field: "limit" },
      { name: "limit=0", query: "limit=0", field: "limit" },
      { name: "limit=1e1 (decimal digits only)", query: "path=img&limit=1e1", field: "limit" },
    ],
    success: 200,
    check: (r) => {
      expect(r.body.path).toBe("img");
      expect(r.body.data).toEqual([expect.objectContaining({ name: "chart.png", type: "file", size: PNG.byteLength, path: "img/chart.png" })]);
    },
  },
  {
    route: "GET /v1/workspaces/:id/files/hello.txt",
    record: withHello,
    viaCookie: true,
    success: 200,
    check: (r) => {
      expect(r.body).toBe(HELLO);
      expect(r.headers.get("content-type")).toStartWith("text/plain");
      expect(r.headers.get("content-length")).toBe(String(HELLO.length));
    },
  },
]);

describe("credentials and bad input", () => {
  const routes = (id: string) => [
    ["GET", "/v1/workspaces"],
    ["GET", `/v1/workspaces/${id}`],
    ["DELETE", `/v1/workspaces/${id}`],
    ["GET", `/v1/workspaces/${id}/files`],
    ["GET", `/v1/workspaces/${id}/files/hello.txt`],
  ];
  const bad = (): [string, Record<string, string>][] => [
    ["a malformed token", { authorization: `Bearer rc_${"0".repeat(64)}` }],
    ["an unknown token", { authorization: `Bearer ${mintTokenString()}` }],
    ["a cookie of no session", { cookie: "runcell.session_token=not-a-session", origin: t.url }],
  ];

  test("a malformed token, an unknown token or a cookie of no session → 401 on every route, and the workspace stays", async () => {
    for (const [what, headers] of bad()) {
      for (const [method, path] of routes(mine().id)) {
        const r = await api(t, method!, path!, headers);
        expect(r.status, `${method} ${path} with ${what}`).toBe(401);
        expect(r.body.code).toBe("UNAUTHORIZED");
      }
    }
    expect((await ws.byId(mine().id))?.status).toBe("running");
  });

  test("an anonymous caller with bad input still gets 401 (credentials are checked first)", async () => {
    const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=../etc&limit=0`);
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("UNAUTHORIZED");
  });

  test("a directory path given twice is refused, not the last one taken", async () => {
    const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=a&path=b`, a.headers("owner"));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", reason: "repeated", in: "query" } });
  });

  test("listing a directory that does not exist → 404", async () => {
    const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=nope`, a.headers("owner"));
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("NOT_FOUND");
  });

  test.each([
    ["through a symlink out", "etclink/passwd"],
    ["an encoded escape", "img/..%2F..%2Fetc%2Fpasswd"],
    ["bad percent-encoding", "%E0%A4%A"],
    ["a directory", "img"],
    ["a symlink loop", "loop1"],
    ["a path through a file", "hello.txt/x"],
    ["a file's path ending in /", "hello.txt/"],
  ])("downloading %s → 400 on path", async (_n, rest) => {
    const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files/${rest}`, a.headers("owner"));
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("VALIDATION_FAILED");
    expect(r.body.details.field).toBe("path");
  });

  test("listing a symlink loop or a path through a file → 400 on path, saying which", async () => {
    const loop = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=loop1`, a.headers("owner"));
    expect(loop.status).toBe(400);
    expect(loop.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", reason: "symlink loop" } });
    expect(loop.body.error).toContain("symlink loop");
    const through = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=hello.txt/x`, a.headers("owner"));
    expect(through.status).toBe(400);
    expect(through.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", reason: "not a directory" } });
    expect(through.body.error).toContain("/workspace/hello.txt is not a directory");
  });

  test("downloading a file that does not exist → 404", async () => {
    const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files/nope.txt`, a.headers("owner"));
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("NOT_FOUND");
  });
});

describe("behaviour", () => {
  test("list and get: the caller's records, newest first, in pages", async () => {
    // A second (failed) workspace of the owner's, so there are two pages of one.
    const row = (await ws.byId(mine().id))!;
    const failed = newId("container");
    const now = Date.now();
    await t.app.services.db
      .insert(workspaces)
      .values({ ...row, id: failed, session_id: await insertSession(t, a.owner.id, row.profile_id), name: `runcell-${failed}`, volume: `runcell-${failed}`, docker_id: null, status: "failed", error: "image missing", created_at: now, updated_at: now, last_active_at: now });
    const page = await api(t, "GET", "/v1/workspaces?limit=1", a.headers("owner"));
    expect(page.body.data.map((w: { id: string }) => w.id)).toEqual([failed]);
    expect(page.body.data[0]).toMatchObject({ status: "failed", error: "image missing" });
    const next = await api(t, "GET", `/v1/workspaces?limit=1&cursor=${page.body.next_cursor}`, a.headers("owner"));
    expect(next.body.data.map((w: { id: string }) => w.id)).toEqual([mine().id]);
    expect(next.body.next_cursor).toBeNull();
  });

  test("file listing and downloads: types, content types, dispositions, streaming", async () => {
    const root = await api(t, "GET", `/v1/workspaces/${mine().id}/files`, a.headers("owner"));
    expect(root.body.path).toBe("");
    const names = root.body.data.map((e: { name: string }) => e.name);
    expect(names).toEqual(expect.arrayContaining(["hello.txt", "img", "page.html", "etclink", "big.bin"]));
    expect(root.body.data.find((e: { name: string }) => e.name === "hello.txt")).toMatchObject({ type: "file", size: HELLO.length, path: "hello.txt" });

    // A directory's path may end in "/".
    const img = await api(t, "GET", `/v1/workspaces/${mine().id}/files?path=img/`, a.headers("owner"));
    expect(img.body.data.map((e: { name: string }) => e.name)).toContain("chart.png");

    const png = await t.fetch(`/v1/workspaces/${mine().id}/files/img/chart.png`, { headers: a.headers("owner") });
    expect(png.headers.get("content-type")).toBe("image/png");
    expect(png.headers.get("content-disposition")).toStartWith("inline;");
    expect(png.headers.get("content-length")).toBe(String(PNG.byteLength));
    expect(new Uint8Array(await png.arrayBuffer())).toEqual(PNG);
    // The document's {path} parameter, as a generated client sends it: its slash as %2F.
    const encoded = await t.fetch(`/v1/workspaces/${mine().id}/files/${encodeURIComponent("img/chart.png")}`, { headers: a.headers("owner") });
    expect(encoded.status).toBe(200);
    expect(new Uint8Array(await encoded.arrayBuffer())).toEqual(PNG);

    const html = await t.fetch(`/v1/workspaces/${mine().id}/files/page.html`, { headers: a.headers("owner") });
    expect(html.headers.get("content-disposition")).toStartWith("attachment;");
    expect(html.headers.get("content-security-policy")).toContain("sandbox");

    const big = await t.fetch(`/v1/workspaces/${mine().id}/files/big.bin`, { headers: a.headers("owner") });
    expect(big.status).toBe(200);
    const sum = (await ws.exec(mine().sessionId, { cmd: ["sha256sum", "big.bin"] })).output.split(" ")[0];
    expect(new Bun.CryptoHasher("sha256").update(await big.arrayBuffer()).digest("hex")).toBe(sum!);
  });

  test("a file over the download cap is a clear 400", async () => {
    const cap = ws.maxFileBytes;
    ws.maxFileBytes = 1_000_000;
    try {
      const r = await api(t, "GET", `/v1/workspaces/${mine().id}/files/big.bin`, a.headers("owner"));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", size: 3_000_000, limit_bytes: 1_000_000 } });
      expect(r.body.error).toContain("limit");
    } finally {
      ws.maxFileBytes = cap;
    }
  });

  test("the routes are in the OpenAPI document", async () => {
    const doc = (await api(t, "GET", "/v1/openapi.json")).body;
    for (const p of ["/v1/workspaces", "/v1/workspaces/{id}", "/v1/workspaces/{id}/files", "/v1/workspaces/{id}/files/{path}"]) expect(Object.keys(doc.paths)).toContain(p);
  });
});
