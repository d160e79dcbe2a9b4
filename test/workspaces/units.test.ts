/** The pure pieces of the workspace module: paths, the tar reader, exec output handling, signing. */
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppError } from "../../src/lib/errors.ts";
import { statusOf } from "../../src/http/errors.ts";
import { entryType, openFile, readAll } from "../../src/workspaces/archive.ts";
import { pullFailure } from "../../src/workspaces/image.ts";
import type { Box } from "../../src/workspaces/box.ts";
import { KeyedMutex } from "../../src/workspaces/mutex.ts";
import { CappedOutput, Demuxer } from "../../src/workspaces/output.ts";
import { componentPaths, relativePath, resolveWorkspacePath } from "../../src/workspaces/paths.ts";
import { FileUrlSigner } from "../../src/workspaces/signing.ts";
import { TarEntryReader } from "../../src/workspaces/tar.ts";

describe("workspace paths", () => {
  test.each([
    ["", "/workspace"],
    [".", "/workspace"],
    ["a.txt", "/workspace/a.txt"],
    ["./a/b/../c.txt", "/workspace/a/c.txt"],
    ["/workspace", "/workspace"],
    ["/workspace/", "/workspace"],
    ["/workspace/x//y/", "/workspace/x/y"],
    ["/workspace/../workspace/z", "/workspace/z"],
    ["dir with space/é.png", "/workspace/dir with space/é.png"],
  ])("%p → %p", (input, abs) => {
    expect(resolveWorkspacePath(input)).toBe(abs);
  });

  test.each(["..", "../etc/passwd", "a/../../x", "/etc/passwd", "/", "/workspacefoo", "/workspace/../etc", "a\0b"])("%p is refused", (input) => {
    let err: unknown;
    try {
      resolveWorkspacePath(input, "file_path");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe("VALIDATION_FAILED");
    expect((err as AppError).details?.field).toBe("file_path");
  });

  test("relative paths and components", () => {
    expect(relativePath("/workspace")).toBe("");
    expect(relativePath("/workspace/a/b")).toBe("a/b");
    expect(componentPaths("/workspace/a/b/c")).toEqual(["/workspace/a", "/workspace/a/b", "/workspace/a/b/c"]);
    expect(componentPaths("/workspace")).toEqual([]);
  });

  test("Go FileMode bits map to entry types", () => {
    expect(entryType(2147484141)).toBe("dir");
    expect(entryType(134218239)).toBe("symlink");
    expect(entryType(420)).toBe("file");
    expect(entryType((1 << 25) | 0o644)).toBe("other");
  });
});

describe("tar reader", () => {
  async function* chunked(data: Uint8Array, size: number) {
    for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
  }

  test("reads ustar, GNU long-name and PAX entries, streaming bodies across odd chunk sizes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tar-"));
    try {
      const long = "n".repeat(150) + ".txt";
      const body = new Uint8Array(70_000).map((_, i) => i % 251);
      writeFileSync(join(dir, "small.txt"), "hello");
      writeFileSync(join(dir, long), body);
      mkdirSync(join(dir, "sub"));
      for (const format of ["gnu", "pax", "ustar"]) {
        const names = format === "ustar" ? ["small.txt", "sub"] : ["small.txt", long, "sub"];
        const tar = Bun.spawnSync(["tar", `--format=${format}`, "-C", dir, "-cf", "-", ...names]).stdout;
        for (const size of [1, 7, 512, 100_000]) {
          const r = new TarEntryReader(chunked(tar, size));
          expect(await r.next()).toEqual({ name: "small.txt", size: 5, type: "file" });
          let text = "";
          for await (const c of r.body(5)) text += new TextDecoder().decode(c);
          expect(text).toBe("hello");
        }
        if (format !== "ustar") {
          // Skip the first entry by hand and read the long-named one.
          const r3 = new TarEntryReader(chunked(tar, 333));
          await r3.discard((await r3.next())!.size);
          const h = (await r3.next())!;
          expect(h.name).toBe(long);
          expect(h.size).toBe(body.length);
          const parts: Uint8Array[] = [];
          for await (const c of r3.body(h.size)) parts.push(c.slice());
          expect(Buffer.concat(parts).equals(Buffer.from(body))).toBe(true);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an empty archive has no entries", async () => {
    const r = new TarEntryReader(chunked(new Uint8Array(1024), 512));
    expect(await r.next()).toBeNull();
  });

  test("a file that shrank while Docker read it (the archive ends inside the entry): 400 VALIDATION_FAILED naming the path, for downloads and reads alike", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tar-"));
    try {
      writeFileSync(join(dir, "log.txt"), "x".repeat(5000));
      const tar = Bun.spawnSync(["tar", "--format=ustar", "-C", dir, "-cf", "-", "log.txt"]).stdout;
      // The header announces 5000 bytes; the stream ends after 1000 of them.
      const cut = tar.subarray(0, 512 + 1000);
      const box = { readArchive: async () => chunked(cut, 300) } as unknown as Box;
      const { size, body } = await openFile(box, "/workspace/log.txt");
      expect(size).toBe(5000);
      const err = await (async () => {
        for await (const _ of body) void _;
      })().catch((e) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "path", reason: "changed while read" } });
      expect(statusOf(err)).toBe(400);
      expect(err.message).toContain("/workspace/log.txt changed while it was read");
      const read = await readAll(box, "/workspace/log.txt", 1 << 20).catch((e) => e);
      expect(read).toMatchObject({ code: "VALIDATION_FAILED", details: { reason: "changed while read" } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("exec output", () => {
  const frame = (type: number, text: string) => {
    const payload = Buffer.from(text);
    const h = Buffer.alloc(8);
    h[0] = type;
    h.writeUInt32BE(payload.length, 4);
    return Buffer.concat([h, payload]);
  };

  test("the demuxer reassembles frames split anywhere", () => {
    const stream = Buffer.concat([frame(1, "out-1\n"), frame(2, "err\n"), frame(1, "x".repeat(3000))]);
    for (const size of [1, 3, 9, 100, stream.length]) {
      const got: [number, string][] = [];
      const d = new Demuxer((t, p) => got.push([t, Buffer.from(p).toString()]));
      for (let i = 0; i < stream.length; i += size) d.push(stream.subarray(i, i + size));
      const joined = got.reduce<[number, string][]>((acc, [t, s]) => {
        const last = acc[acc.length - 1];
        if (last && last[0] === t) last[1] += s;
        else acc.push([t, s]);
        return acc;
      }, []);
      expect(joined).toEqual([
        [1, "out-1\n"],
        [2, "err\n"],
        [1, "x".repeat(3000)],
      ]);
    }
  });

  test("the capped collector keeps everything under the cap", () => {
    const c = new CappedOutput(100);
    c.push(Buffer.from("a".repeat(60)));
    c.push(Buffer.from("b".repeat(40)));
    expect(c.truncated).toBe(false);
    expect(c.text()).toBe("a".repeat(60) + "b".repeat(40));
  });

  test("over the cap it keeps the head and the tail and says what it dropped", () => {
    const c = new CappedOutput(100);
    for (let i = 0; i < 1000; i++) c.push(Buffer.from(String(i % 10)));
    expect(c.truncated).toBe(true);
    expect(c.totalBytes).toBe(1000);
    const text = c.text();
    expect(text.startsWith("0123456789".repeat(5))).toBe(true);
    expect(text.endsWith("0123456789".repeat(5))).toBe(true);
    expect(text).toContain("[… 900 bytes of output omitted …]");
  });
});

describe("signed file URLs", () => {
  let clock = 1_800_000_000_000;
  const signer = new FileUrlSigner(new Uint8Array(32).fill(7), "https://agents.example.com", () => clock);
  const parse = (url: string) => {
    const u = new URL(url);
    return { path: decodeURIComponent(u.pathname.split("/").slice(3).join("/")), exp: u.searchParams.get("exp")!, sig: u.searchParams.get("sig")! };
  };

  test("shape, validity and expiry", () => {
    const url = signer.url("ctr_1", "out/chart one.png", 3600);
    expect(url).toMatch(/^https:\/\/agents\.example\.com\/files\/ctr_1\/out\/chart%20one\.png\?exp=\d+&sig=[0-9a-f]{64}$/);
    const { path, exp, sig } = parse(url);
    expect(path).toBe("out/chart one.png");
    expect(Number(exp)).toBe(1_800_000_000 + 3600);
    expect(signer.verify("ctr_1", path, exp, sig)).toBe(true);
    expect(signer.verify("ctr_2", path, exp, sig)).toBe(false);
    expect(signer.verify("ctr_1", "out/other.png", exp, sig)).toBe(false);
    expect(signer.verify("ctr_1", path, String(Number(exp) + 1), sig)).toBe(false);
    expect(signer.verify("ctr_1", path, exp, sig.replace(/^./, (c) => (c === "0" ? "1" : "0")))).toBe(false);
    expect(signer.verify("ctr_1", path, undefined, sig)).toBe(false);
    expect(signer.verify("ctr_1", path, "12x", sig)).toBe(false);
    clock += 3601 * 1000;
    expect(signer.verify("ctr_1", path, exp, sig)).toBe(false);
  });
});

describe("keyed mutex", () => {
  test("serialises per key, not across keys", async () => {
    const m = new KeyedMutex();
    const order: string[] = [];
    const job = (key: string, name: string, ms: number) =>
      m.run(key, async () => {
        order.push(`${name}+`);
        await Bun.sleep(ms);
        order.push(`${name}-`);
      });
    await Promise.all([job("a", "a1", 30), job("a", "a2", 1), job("b", "b1", 5)]);
    expect(order.indexOf("a1-")).toBeLessThan(order.indexOf("a2+"));
    expect(order.indexOf("b1+")).toBeLessThan(order.indexOf("a1-"));
    expect(m.busy("a")).toBe(false);
    await expect(m.run("a", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await m.run("a", async () => 42)).toBe(42);
  });
});

test("a failed pull is told to the user in words, never in the engine's (resolver, registry addresses)", () => {
  const cases: [string, string][] = [
    ['Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host', "the registry could not be reached from the Docker host"],
    ["Get https://r.example/v2/: net/http: request canceled (Client.Timeout exceeded while awaiting headers)", "the registry could not be reached from the Docker host"],
    ["pull access denied for acme/x, repository does not exist or may require 'docker login'", "the registry has no such image, or it needs a login"],
    ["manifest for acme/x:9 not found: manifest unknown", "the registry has no such image, or it needs a login"],
    ['invalid reference format: repository name (library/Ab) must be lowercase', "the image name is not valid"],
    ["something else at 10.1.2.3", "the pull failed; the server log has the Docker engine's own words"],
  ];
  for (const [engine, words] of cases) expect([engine, pullFailure(engine)]).toEqual([engine, words]);
});
