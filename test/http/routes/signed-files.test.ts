/**
 * GET /files/<ctr>/<path>?exp=&sig=: a workspace file through a signed URL. The surface is public
 * (no credential is needed, and none changes the answer); a missing, wrong or expired signature, a
 * signature for another path or workspace, a workspace that does not exist and a missing file all
 * answer 404. On a real app with one real container.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Workspaces } from "../../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { type Actors, actors, routeTable } from "../../helpers/scenarios.ts";
import { api } from "../../helpers/users.ts";
import { insertProfile, newWorkspace, sweepInstance } from "../../workspaces/helpers.ts";

const HELLO = "hello, signed world\n";
let offsetMs = 0;
let t: TestApp;
let ws: Workspaces;
let a: Actors;
let ctr: string;

beforeAll(async () => {
  t = await startTestApp({ now: () => Date.now() + offsetMs });
  ws = t.app.services.workspaces;
  a = await actors(t);
  const made = await newWorkspace(t, a.owner.id, await insertProfile(t, a.owner.id));
  ctr = made.ws.id;
  await ws.writeFile(made.sessionId, "hello.txt", HELLO);
  await ws.writeFile(made.sessionId, "my dir/résumé #1.txt", "encoded");
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

/** The path and query of a signed URL (its host is the public URL, not the test server's). */
const signed = (id: string, path: string, ttlSec?: number) => {
  const u = new URL(ws.signedFileUrl(id, path, ttlSec));
  return u.pathname + u.search;
};
const get = (pathAndQuery: string, headers: Record<string, string> = {}) => api(t, "GET", pathAndQuery, headers);

routeTable("/files (signed URLs)", () => a, [
  {
    route: "GET /files/:id/hello.txt",
    record: async () => ctr,
    // The signature exists only once the workspace does: read when the request is made.
    get query() {
      return new URL(ws.signedFileUrl(ctr, "hello.txt")).search.slice(1);
    },
    invalid: [{ name: "an exp over 20 characters", query: `exp=${"9".repeat(21)}&sig=${"0".repeat(64)}`, field: "exp" }],
    success: 200,
    check: (r) => {
      expect(r.body).toBe(HELLO);
      expect(r.headers.get("content-type")).toStartWith("text/plain");
      expect(r.headers.get("content-disposition")).toStartWith("inline;");
    },
  },
]);

describe("signed URLs", () => {
  const notFound = async (pathAndQuery: string) => {
    const r = await get(pathAndQuery);
    expect(r.status, pathAndQuery).toBe(404);
    expect(r.body.code).toBe("NOT_FOUND");
    return r.body;
  };

  test("a name that needs encoding", async () => {
    const url = signed(ctr, "my dir/résumé #1.txt");
    expect(url).toStartWith(`/files/${ctr}/my%20dir/r%C3%A9sum%C3%A9%20%231.txt?exp=`);
    const r = await get(url);
    expect(r.status).toBe(200);
    expect(r.body).toBe("encoded");
  });

  test("no credential is needed, and none is looked at: a user's token, the admin password or a bad token give the same file", async () => {
    for (const headers of [a.headers("other"), a.headers("admin"), { authorization: "Bearer rc_not-a-token" }]) {
      const r = await get(signed(ctr, "hello.txt"), headers);
      expect(r.status).toBe(200);
      expect(r.body).toBe(HELLO);
    }
  });

  test("without a signature, or without exp → 404", async () => {
    await notFound(`/files/${ctr}/hello.txt`);
    const url = new URL(signed(ctr, "hello.txt"), t.url);
    url.searchParams.delete("exp");
    await notFound(url.pathname + url.search);
    const noSig = new URL(signed(ctr, "hello.txt"), t.url);
    noSig.searchParams.delete("sig");
    await notFound(noSig.pathname + noSig.search);
  });

  test("a wrong signature → 404, the same answer whether or not the workspace and the file exist", async () => {
    const wrongSig = (pathAndQuery: string) => {
      const url = new URL(pathAndQuery, t.url);
      const sig = url.searchParams.get("sig")!;
      url.searchParams.set("sig", (sig[0] === "a" ? "b" : "a") + sig.slice(1));
      return url.pathname + url.search;
    };
    const existing = await notFound(wrongSig(signed(ctr, "hello.txt")));
    expect(existing).toEqual({ error: "File not found", code: "NOT_FOUND" });
    expect(await notFound(wrongSig(signed(ctr, "nope.txt")))).toEqual(existing);
    expect(await notFound(wrongSig(signed("ctr_01m7zzzzzzzzzzzzzzzzzzzzzz", "hello.txt")))).toEqual(existing);
  });

  test("a signature for another path, another workspace or a later expiry → 404", async () => {
    const url = new URL(signed(ctr, "hello.txt"), t.url);
    await notFound(url.pathname.replace("hello.txt", "my%20dir/r%C3%A9sum%C3%A9%20%231.txt") + url.search);
    await notFound(url.pathname.replace(ctr, "ctr_01m7zzzzzzzzzzzzzzzzzzzzzz") + url.search);
    const later = new URL(url);
    later.searchParams.set("exp", String(Number(url.searchParams.get("exp")) + 3600));
    await notFound(later.pathname + later.search);
    expect((await get(url.pathname + url.search)).status).toBe(200);
  });

  test("a valid signature for a file or a workspace that does not exist → 404", async () => {
    await notFound(signed(ctr, "nope.txt"));
    await notFound(signed("ctr_01m7zzzzzzzzzzzzzzzzzzzzzz", "hello.txt"));
  });

  test("bad percent-encoding in the path → 404, not an error", async () => {
    const url = new URL(signed(ctr, "hello.txt"), t.url);
    await notFound(`/files/${ctr}/%E0%A4%A${url.search}`);
  });

  test("an expired URL → 404", async () => {
    const url = signed(ctr, "hello.txt", 60);
    expect((await get(url)).status).toBe(200);
    offsetMs = 61_000;
    try {
      await notFound(url);
    } finally {
      offsetMs = 0;
    }
  });
});
