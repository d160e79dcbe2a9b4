/** Workspace files: read/write/list, escapes refused, size cap, signed URLs. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AppError } from "../../src/lib/errors.ts";
import type { Workspaces } from "../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser } from "../helpers/users.ts";
import { docker, insertProfile, newWorkspace, sweepInstance } from "./helpers.ts";

let offsetMs = 0;
let t: TestApp;
let ws: Workspaces;
let sessionId: string;
let ctrId: string;

const sh = async (script: string) => {
  const r = await ws.exec(sessionId, { cmd: ["/bin/sh", "-c", script] });
  expect(r.exitCode).toBe(0);
  return r.output;
};
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e) => (e instanceof AppError ? e.code : String(e)));

beforeAll(async () => {
  // The spool's budget (--download-spool-mb) holds one 8 MB download and not two.
  t = await startTestApp({ now: () => Date.now() + offsetMs, flags: ["--download-spool-mb", "10"] });
  ws = t.app.services.workspaces;
  const u = await createUser(t);
  const made = await newWorkspace(t, u.id, await insertProfile(t, u.id));
  sessionId = made.sessionId;
  ctrId = made.ws.id;
  await sh(
    "mkdir -p sub/deeper && echo inside > sub/f.txt && ln -s /etc etclink && ln -s /etc/passwd pw && ln -s ../../etc sub/up && ln -s sub sublink && ln -s sub/f.txt flink && ln -s missing dangling && ln -s loop2 loop1 && ln -s loop1 loop2 && echo plain > sub/plain.txt",
  );
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

describe("read and write", () => {
  test("write creates parent directories; read returns the bytes", async () => {
    await ws.writeFile(sessionId, "a/b/c/hello.txt", "hello\n");
    expect(text(await ws.readFile(sessionId, "/workspace/a/b/c/hello.txt"))).toBe("hello\n");
    expect(await sh("cat a/b/c/hello.txt")).toBe("hello\n");
  });

  test("binary round trip and empty files", async () => {
    const bytes = new Uint8Array(300_000).map((_, i) => (i * 31) % 256);
    await ws.writeFile(sessionId, "bin.dat", bytes);
    expect(Buffer.from(await ws.readFile(sessionId, "bin.dat")).equals(Buffer.from(bytes))).toBe(true);
    await ws.writeFile(sessionId, "empty.txt", "");
    expect((await ws.readFile(sessionId, "empty.txt")).byteLength).toBe(0);
  });

  test("overwriting keeps the file's mode", async () => {
    await ws.writeFile(sessionId, "run.sh", "#!/bin/sh\necho one\n");
    await sh("chmod 755 run.sh");
    await ws.writeFile(sessionId, "run.sh", "#!/bin/sh\necho two\n");
    expect(await sh("./run.sh")).toBe("two\n");
  });

  test("symlinks inside /workspace are followed", async () => {
    expect(text(await ws.readFile(sessionId, "sublink/f.txt"))).toBe("inside\n");
    expect(text(await ws.readFile(sessionId, "flink"))).toBe("inside\n");
    await ws.writeFile(sessionId, "flink", "through the link\n");
    expect(await sh("cat sub/f.txt; [ -L flink ] && echo still-a-link")).toBe("through the link\nstill-a-link\n");
  });

  test.each([
    ["a missing file", "nope.txt", "NOT_FOUND"],
    ["a missing directory", "nope/x.txt", "NOT_FOUND"],
    ["a dangling symlink", "dangling", "NOT_FOUND"],
    ["a directory", "sub", "VALIDATION_FAILED"],
    ["the parent of /workspace", "../etc/passwd", "VALIDATION_FAILED"],
    ["an absolute path elsewhere", "/etc/passwd", "VALIDATION_FAILED"],
    ["a lexical escape", "/workspace/../etc/passwd", "VALIDATION_FAILED"],
    ["a directory symlink out", "etclink/passwd", "VALIDATION_FAILED"],
    ["a file symlink out", "pw", "VALIDATION_FAILED"],
    ["a relative symlink out", "sub/up/passwd", "VALIDATION_FAILED"],
    ["a symlink loop", "loop1", "VALIDATION_FAILED"],
    ["a path through a symlink loop", "loop1/x", "VALIDATION_FAILED"],
    ["a path through a file", "sub/plain.txt/x", "VALIDATION_FAILED"],
    ["a path through a symlink to a file", "flink/x", "VALIDATION_FAILED"],
    ["a file's path ending in /", "sub/plain.txt/", "VALIDATION_FAILED"],
    ["a file's path ending in /.", "sub/plain.txt/.", "VALIDATION_FAILED"],
    ["a missing path ending in /", "nope/", "NOT_FOUND"],
  ])("reading %s → %s", async (_what, path, code) => {
    expect(await codeOf(ws.readFile(sessionId, path))).toBe(code);
  });

  test("the error says what is wrong", async () => {
    const e = (await ws.readFile(sessionId, "etclink/passwd").catch((x) => x)) as AppError;
    expect(e.message).toContain("/workspace/etclink is a symlink to /etc");
    expect(e.details?.field).toBe("path");
    const nf = (await ws.readFile(sessionId, "nope.txt").catch((x) => x)) as AppError;
    expect(nf.message).toContain("/workspace/nope.txt");
  });

  test("a symlink loop or a path through a file is the caller's path error, and the engine's host paths stay hidden", async () => {
    const loop = (await ws.readFile(sessionId, "loop1/x").catch((x) => x)) as AppError;
    expect(loop.message).toContain("/workspace/loop1 is or leads into a symlink loop");
    expect(loop.details).toMatchObject({ field: "path", path: "/workspace/loop1", reason: "symlink loop" });
    for (const p of ["sub/plain.txt/x", "sub/plain.txt/"]) {
      const e = (await ws.readFile(sessionId, p).catch((x) => x)) as AppError;
      expect(e.message).toBe(`/workspace/sub/plain.txt is not a directory (/workspace/${p} treats it as one)`);
      expect(e.details).toMatchObject({ field: "path", path: "/workspace/sub/plain.txt", reason: "not a directory" });
    }
    for (const e of [loop, (await ws.readFile(sessionId, "flink/x").catch((x) => x)) as AppError]) expect(e.message).not.toContain("overlay");
    // The container is fine: it still runs and serves files.
    expect((await ws.byId(ctrId))!.status).toBe("running");
    expect(text(await ws.readFile(sessionId, "sub/plain.txt"))).toBe("plain\n");
  });

  test.each([
    ["through a directory symlink out", "etclink/evil"],
    ["through a file symlink out", "pw"],
    ["outside", "/tmp/x"],
    ["onto a directory", "sub"],
    ["onto /workspace itself", "/workspace"],
    ["onto a symlink loop", "loop1"],
    ["through a file", "sub/plain.txt/x"],
    ["onto a file's path ending in /", "sub/plain.txt/"],
    ["onto a new path ending in /", "newdir/"],
  ])("writing %s is refused", async (_what, path) => {
    expect(await codeOf(ws.writeFile(sessionId, path, "x"))).toBe("VALIDATION_FAILED");
    expect(await sh("ls /etc/evil newdir 2>/dev/null; cat sub/plain.txt; true")).toBe("plain\n");
  });

  test("a name over 255 bytes is the caller's path error (reading, writing, listing), not a broken container", async () => {
    const long = "a".repeat(256);
    for (const p of [long, `sub/${long}/x`, `${"é".repeat(128)}`]) {
      for (const op of [ws.readFile(sessionId, p), ws.writeFile(sessionId, p, "x"), ws.listDir(sessionId, p)]) {
        const e = (await op.catch((x) => x)) as AppError;
        expect([e.code, e.details?.field, e.details?.reason]).toEqual(["VALIDATION_FAILED", "path", "name too long"]);
        expect(e.message).toContain("at most 255 bytes");
      }
    }
    // 255 bytes is a name like any other.
    await ws.writeFile(sessionId, "b".repeat(255), "ok");
    expect(text(await ws.readFile(sessionId, "b".repeat(255)))).toBe("ok");
  });

  test("a file over the size cap is refused with its size", async () => {
    const cap = ws.maxFileBytes;
    ws.maxFileBytes = 1000;
    try {
      const e = (await ws.readFile(sessionId, "bin.dat").catch((x) => x)) as AppError;
      expect(e.code).toBe("VALIDATION_FAILED");
      expect(e.details).toMatchObject({ size: 300_000, limit_bytes: 1000 });
    } finally {
      ws.maxFileBytes = cap;
    }
  });
});

/** Whether `p` settles within `ms` (an engine call held behind a container lock would not). */
const within = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true), Bun.sleep(ms).then(() => false)]);

describe("reading never holds the container", () => {
  // On Docker an archive read holds the container's lock until its stream ends: one left open
  // (a refused read, a stalled client) would hang every later call on the container.
  beforeAll(async () => {
    await sh("head -c 8000000 /dev/zero > big.bin");
  });

  test("a read refused as over the cap leaves the container answering at once", async () => {
    const cap = ws.maxFileBytes;
    ws.maxFileBytes = 1_000_000;
    try {
      const e = (await ws.readFile(sessionId, "big.bin").catch((x) => x)) as AppError;
      expect(e.details).toMatchObject({ size: 8_000_000, limit_bytes: 1_000_000 });
    } finally {
      ws.maxFileBytes = cap;
    }
    expect(await within(sh("echo alive"), 10_000)).toBe(true);
  });

  test("a download whose client stalls after its first bytes leaves the container answering; its spool is released on close", async () => {
    const row = (await ws.forSession(sessionId))!;
    const dl = await ws.openDownload(row, "big.bin");
    expect(dl.size).toBe(8_000_000);
    const first = await dl.body.next();
    expect(first.done).toBe(false);
    // The client reads nothing more: the container still answers.
    expect(await within(sh("echo alive"), 10_000)).toBe(true);
    let total = (first.value as Uint8Array).byteLength;
    for await (const chunk of dl.body) total += chunk.byteLength;
    expect(total).toBe(8_000_000);
    await dl.close();
    // Nothing is left in the spool directory (its file was unlinked as soon as it was open).
    const left = await Array.fromAsync(new Bun.Glob("*").scan({ cwd: ws.spoolDir, onlyFiles: true }));
    expect(left).toEqual([]);
  });
});

describe("the spool's disk budget", () => {
  test("downloads under way hold their size: one past the budget is RATE_LIMITED with a retry time, taken again once another ends", async () => {
    const row = (await ws.forSession(sessionId))!;
    expect(ws.spoolBudget.limit).toBe(10 * 1024 * 1024);
    const first = await ws.openDownload(row, "big.bin");
    expect(ws.spoolBudget.inUse).toBe(8_000_000);
    const refused = (await ws.openDownload(row, "big.bin").catch((e) => e)) as AppError;
    expect(refused.code).toBe("RATE_LIMITED");
    expect(refused.details).toMatchObject({ retry_after: 5 });
    // The refused one left the container as it was.
    expect(await within(sh("echo alive"), 10_000)).toBe(true);
    // A small file is held in memory: not counted.
    await ws.writeFile(sessionId, "small.txt", "small");
    const small = await ws.openDownload(row, "small.txt");
    expect(text((await small.body.next()).value as Uint8Array)).toBe("small");
    await first.close();
    expect(ws.spoolBudget.inUse).toBe(0);
    const again = await ws.openDownload(row, "big.bin");
    let total = 0;
    for await (const chunk of again.body) total += chunk.byteLength;
    expect(total).toBe(8_000_000);
    expect(ws.spoolBudget.inUse).toBe(0);
  });
});

describe("listing", () => {
  test("types, sizes, times, dotfiles and odd names, sorted by name", async () => {
    await sh("mkdir -p ls && cd ls && printf 12345 > 'b file.txt' && mkdir dir && ln -s dir link && touch .hidden \"$(printf 'new\\nline')\" && mkfifo pipe");
    const l = await ws.listDir(sessionId, "ls");
    expect(l.path).toBe("ls");
    expect(l.next_cursor).toBeNull();
    const by = Object.fromEntries(l.data.map((e) => [e.name, e]));
    expect(l.data.map((e) => e.name)).toEqual([".hidden", "b file.txt", "dir", "link", "new\nline", "pipe"]);
    expect(by["b file.txt"]).toMatchObject({ path: "ls/b file.txt", type: "file", size: 5 });
    expect(by.dir).toMatchObject({ type: "dir", size: null });
    expect(by.link!.type).toBe("symlink");
    expect(by.pipe!.type).toBe("other");
    expect(Math.abs(Date.parse(by["b file.txt"]!.modified!) - Date.now())).toBeLessThan(120_000);
  });

  test("pages with limit and cursor", async () => {
    await sh("mkdir -p many && cd many && for i in 1 2 3 4 5; do touch f$i; done");
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await ws.listDir(sessionId, "many", { limit: 2, cursor });
      seen.push(...page.data.map((e) => e.name));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    expect(seen).toEqual(["f1", "f2", "f3", "f4", "f5"]);
  });

  test("the root, a missing directory, a file, and escapes", async () => {
    expect((await ws.listDir(sessionId, "")).data.some((e) => e.name === "sub")).toBe(true);
    expect(await codeOf(ws.listDir(sessionId, "nope"))).toBe("NOT_FOUND");
    expect(await codeOf(ws.listDir(sessionId, "sub/f.txt"))).toBe("VALIDATION_FAILED");
    expect(await codeOf(ws.listDir(sessionId, "etclink"))).toBe("VALIDATION_FAILED");
    expect(await codeOf(ws.listDir(sessionId, ".."))).toBe("VALIDATION_FAILED");
    expect(await codeOf(ws.listDir(sessionId, "loop1"))).toBe("VALIDATION_FAILED");
    expect(await codeOf(ws.listDir(sessionId, "sub/plain.txt/x"))).toBe("VALIDATION_FAILED");
    expect((await ws.listDir(sessionId, "sub/")).data.map((e) => e.name)).toContain("f.txt");
    expect((await ws.listDir(sessionId, "sublink")).data.map((e) => e.name)).toContain("f.txt");
  });
});

describe("signed URLs", () => {
  const local = (url: string) => url.replace(t.config.publicUrl, t.url);

  test("a signed URL serves the file without credentials, with its content type", async () => {
    await ws.writeFile(sessionId, "charts/plot.svg", "<svg xmlns='http://www.w3.org/2000/svg'/>");
    const url = ws.signedFileUrl(ctrId, "/workspace/charts/plot.svg");
    expect(url.startsWith(`${t.config.publicUrl}/files/${ctrId}/charts/plot.svg?exp=`)).toBe(true);
    const res = await fetch(local(url));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/svg+xml");
    expect(res.headers.get("content-security-policy")).toContain("sandbox");
    expect(await res.text()).toContain("<svg");
  });

  test("names that need encoding", async () => {
    await ws.writeFile(sessionId, "my dir/résumé #1.txt", "ok");
    const res = await fetch(local(ws.signedFileUrl(ctrId, "my dir/résumé #1.txt")));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok");
  });

  test("a wrong signature, another path or another workspace is 404", async () => {
    const url = new URL(local(ws.signedFileUrl(ctrId, "sub/f.txt")));
    const sig = url.searchParams.get("sig")!;
    const bad = new URL(url);
    bad.searchParams.set("sig", (sig[0] === "a" ? "b" : "a") + sig.slice(1));
    const other = new URL(url);
    other.pathname = other.pathname.replace("sub/f.txt", "bin.dat");
    const noSig = new URL(url);
    noSig.search = "";
    // The same signature on another spelling of the path (a trailing slash, //) is another path.
    const spelled = ["sub/f.txt/", "sub//f.txt"].map((p) => {
      const u = new URL(url);
      u.pathname = u.pathname.replace("sub/f.txt", p);
      return u;
    });
    for (const u of [bad, other, noSig, new URL(url.href.replace(ctrId, "ctr_01m7zzzzzzzzzzzzzzzzzzzzzz")), ...spelled]) {
      const res = await fetch(u);
      expect(res.status).toBe(404);
      expect((await res.json()).code).toBe("NOT_FOUND");
    }
    expect((await fetch(url)).status).toBe(200);
  });

  test("an expired URL is 404", async () => {
    const url = local(ws.signedFileUrl(ctrId, "sub/f.txt", 60));
    expect((await fetch(url)).status).toBe(200);
    offsetMs = 61_000;
    try {
      expect((await fetch(url)).status).toBe(404);
    } finally {
      offsetMs = 0;
    }
  });

  test("downloads and reads work while the workspace is stopped, without starting it", async () => {
    const url = local(ws.signedFileUrl(ctrId, "sub/f.txt"));
    await ws.stop(ctrId);
    const dockerId = (await ws.byId(ctrId))!.docker_id!;
    expect((await docker.getContainer(dockerId).inspect()).State.Running).toBe(false);
    expect(await (await fetch(url)).text()).toBe("through the link\n");
    expect(text(await ws.readFile(sessionId, "sub/f.txt"))).toBe("through the link\n");
    expect((await docker.getContainer(dockerId).inspect()).State.Running).toBe(false);
    expect((await ws.byId(ctrId))!.status).toBe("stopped");
    // Writing needs the container: it starts again.
    await ws.writeFile(sessionId, "after-stop.txt", "x");
    expect((await ws.byId(ctrId))!.status).toBe("running");
  });
});
