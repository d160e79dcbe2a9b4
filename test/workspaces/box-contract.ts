/**
 * The runner interface's contract (src/workspaces/box.ts), as tests any backend must pass: run
 * `boxContract` with an engine and a spec maker. box.test.ts runs it on Docker; a Kubernetes or
 * Nomad backend would run the same suite against its own engine.
 */
import { describe, expect, test } from "bun:test";
import { Readable } from "node:stream";
import { type Box, type BoxEngine, BoxGone, ContainerNotRunning, ImageMissing, NameTaken, PathMissing, PathUnresolvable } from "../../src/workspaces/box.ts";
import type { ContainerInput } from "../../src/workspaces/spec.ts";
import { LABEL_INSTANCE, LABEL_WORKSPACE } from "../../src/workspaces/spec.ts";
import { entryType } from "../../src/workspaces/archive.ts";
import { TarEntryReader } from "../../src/workspaces/tar.ts";

/** `BoxFactory.spec` for the test image: a small box without network, labelled `instanceId`. */
export function testSpec(instanceId: string, image: string, prefix: string): (overrides?: Partial<ContainerInput>) => ContainerInput {
  return (overrides = {}) => {
    const ctrId = `ctr_${prefix}${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    return {
      ctrId,
      sessionId: `sess_${prefix}`,
      instanceId,
      name: `runcell-${ctrId}`,
      volume: `runcell-${ctrId}`,
      image,
      spec: { network: "none", memory_mb: 256, cpus: 1, pids: 256 },
      init: true,
      ...overrides,
    };
  };
}

export interface BoxFactory {
  engine: BoxEngine;
  /** A new spec (unique name, volume and workspace id) for an image with /bin/sh, sleep and cat; `instanceId` labels it. */
  spec(overrides?: Partial<ContainerInput>): ContainerInput;
}

/** A new running box, and how to remove it with its volume. */
async function running(f: BoxFactory, overrides?: Partial<ContainerInput>) {
  const spec = f.spec(overrides);
  await f.engine.createVolume(spec.volume, { [LABEL_INSTANCE]: spec.instanceId, [LABEL_WORKSPACE]: spec.ctrId });
  const box = await f.engine.create(spec);
  await box.start();
  return { box, spec, remove: () => removeAll(f, box, spec) };
}

async function removeAll(f: BoxFactory, box: Box, spec: ContainerInput) {
  await box.remove();
  await f.engine.removeVolume(spec.volume);
}

/** Runs argv and collects its output by stream, with the exit code. */
async function run(box: Box, cmd: string[], stdin?: string) {
  const exec = await box.exec({ cmd, cwd: "/tmp", stdin: stdin !== undefined });
  const out = { 1: "", 2: "" } as Record<1 | 2, string>;
  exec.onOutput((s, chunk) => (out[s] += new TextDecoder().decode(chunk)));
  if (stdin !== undefined) exec.end(new TextEncoder().encode(stdin));
  await exec.ended;
  return { stdout: out[1], stderr: out[2], exitCode: await exec.exitCode() };
}

/** A one-file tar archive (ustar), made with the system's tar. */
async function tarOf(name: string, content: string): Promise<Uint8Array> {
  const dir = `/tmp/runcell-box-contract-${crypto.randomUUID()}`;
  await Bun.write(`${dir}/${name}`, content);
  const p = Bun.spawn(["tar", "-C", dir, "-cf", "-", name], { stdout: "pipe" });
  const bytes = new Uint8Array(await new Response(p.stdout).arrayBuffer());
  await p.exited;
  Bun.spawnSync(["rm", "-rf", dir]);
  return bytes;
}

export function boxContract(name: string, factory: () => BoxFactory) {
  describe(`runner interface contract: ${name}`, () => {
    test("engine: create, start, list by label, rename, remove; volumes made, listed and removed", async () => {
      const f = factory();
      // Under the factory's own instance label: a cleanup by that label (its file's afterAll) never
      // reaches another file's boxes — the ssh:// contract runs beside the local one in CI.
      const instanceId = `${f.spec().instanceId}-${crypto.randomUUID().slice(0, 8)}`;
      const { box, spec } = await running(f, { instanceId });
      try {
        expect(box.id).toBeTruthy();
        // A second start of a running box is fine.
        await box.start();
        const listed = await f.engine.list({ [LABEL_INSTANCE]: instanceId });
        expect(listed.map((b) => [b.id, b.name, b.state, b.labels[LABEL_WORKSPACE]])).toEqual([[box.id, spec.name, "running", spec.ctrId]]);
        expect(listed[0]!.image).toBe(spec.image);
        expect(await f.engine.list({ [LABEL_INSTANCE]: instanceId, [LABEL_WORKSPACE]: "" })).toHaveLength(1);
        expect(await f.engine.list({ [LABEL_INSTANCE]: instanceId, [LABEL_WORKSPACE]: "no-such" })).toHaveLength(0);
        expect((await f.engine.listVolumes({ [LABEL_INSTANCE]: instanceId })).map((v) => v.name)).toEqual([spec.volume]);
        // Creating a volume of a name that exists answers that volume's own labels, not the ones asked for.
        expect(await f.engine.createVolume(spec.volume, { [LABEL_INSTANCE]: "someone-else" })).toEqual({ [LABEL_INSTANCE]: instanceId, [LABEL_WORKSPACE]: spec.ctrId });
        // The volume is the workspace: what is written there survives a new box on it.
        await run(box, ["/bin/sh", "-c", "echo kept > /workspace/note"]);
        await box.rename(`${spec.name}-renamed`);
        expect((await f.engine.list({ [LABEL_INSTANCE]: instanceId }))[0]!.name).toBe(`${spec.name}-renamed`);
        await box.remove();
        await box.remove(); // gone already: fine
        expect(await f.engine.list({ [LABEL_INSTANCE]: instanceId })).toHaveLength(0);
        const again = await f.engine.create(spec);
        await again.start();
        expect((await run(again, ["cat", "/workspace/note"])).stdout).toBe("kept\n");
        await again.remove();
      } finally {
        await removeAll(f, box, spec);
      }
      expect(await f.engine.listVolumes({ [LABEL_INSTANCE]: instanceId })).toHaveLength(0);
      await f.engine.removeVolume(spec.volume); // gone already: fine
    });

    test("engine: a missing image is ImageMissing, a taken name NameTaken; the box of an unknown id is gone", async () => {
      const f = factory();
      await expect(f.engine.create(f.spec({ image: "runcell-test/no-such-image:never" }))).rejects.toBeInstanceOf(ImageMissing);
      const { spec, remove } = await running(f);
      try {
        await expect(f.engine.create({ ...f.spec(), name: spec.name })).rejects.toBeInstanceOf(NameTaken);
        // The same box reached by its name.
        expect((await f.engine.box(spec.name).state()).running).toBe(true);
      } finally {
        await remove();
      }
      const unknown = f.engine.box("runcell-contract-no-such-box");
      expect(await unknown.state()).toMatchObject({ exists: false, running: false });
      await expect(unknown.start()).rejects.toBeInstanceOf(BoxGone);
      await unknown.stop(1); // fine: not running
    });

    test("volumeSizes: a volume's size as the engine counts it, whatever the box's own du says", async () => {
      const f = factory();
      const { box, spec, remove } = await running(f);
      try {
        const r = await run(box, ["/bin/sh", "-c", "head -c 300000 /dev/zero > /workspace/a && sync && echo ok"]);
        expect(r.stdout.trim()).toBe("ok");
        const size = (await f.engine.volumeSizes()).get(spec.volume);
        expect(size).toBeGreaterThanOrEqual(300_000);
        expect(size).toBeLessThan(400_000);
      } finally {
        await remove();
      }
    });

    test("exec: argv, cwd, env, stdout and stderr apart, the exit code", async () => {
      const { box, remove } = await running(factory());
      try {
        const exec = await box.exec({ cmd: ["/bin/sh", "-c", 'echo "$PWD $GREETING"; echo oops >&2; exit 7'], cwd: "/tmp", env: { GREETING: "hi there" }, stdin: false });
        const out: string[] = [];
        exec.onOutput((s, c) => out.push(`${s}:${new TextDecoder().decode(c)}`));
        await exec.ended;
        expect(out.sort()).toEqual(["1:/tmp hi there\n", "2:oops\n"]);
        expect(await exec.exitCode()).toBe(7);
      } finally {
        await remove();
      }
    });

    test("exec with stdin: written, then ended; output held until onOutput is set", async () => {
      const { box, remove } = await running(factory());
      try {
        expect(await run(box, ["cat"], "line one\nline two\n")).toEqual({ stdout: "line one\nline two\n", stderr: "", exitCode: 0 });
        const exec = await box.exec({ cmd: ["/bin/sh", "-c", "echo early"], cwd: "/", stdin: false });
        await Bun.sleep(300);
        let got = "";
        exec.onOutput((_s, c) => (got += new TextDecoder().decode(c)));
        await exec.ended;
        expect(got).toBe("early\n");
        const streaming = await box.exec({ cmd: ["cat"], cwd: "/", stdin: true });
        let echoed = "";
        streaming.onOutput((_s, c) => (echoed += new TextDecoder().decode(c)));
        streaming.write(new TextEncoder().encode("a"));
        streaming.write(new TextEncoder().encode("b\n"));
        streaming.end();
        await streaming.ended;
        expect(echoed).toBe("ab\n");
      } finally {
        await remove();
      }
    });

    test("stat, writeArchive and readArchive: a file, a directory, a symlink, nothing", async () => {
      const { box, remove } = await running(factory());
      try {
        await box.writeArchive("/tmp", Readable.from([await tarOf("hello.txt", "hello, box\n")]));
        await run(box, ["ln", "-s", "/tmp/hello.txt", "/tmp/link"]);
        const file = await box.stat("/tmp/hello.txt");
        expect(file).toMatchObject({ name: "hello.txt", size: 11 });
        expect(entryType(file!.mode)).toBe("file");
        expect(entryType((await box.stat("/tmp"))!.mode)).toBe("dir");
        const link = await box.stat("/tmp/link");
        expect(entryType(link!.mode)).toBe("symlink");
        expect(link!.linkTarget).toBe("/tmp/hello.txt");
        expect(await box.stat("/tmp/nothing-here")).toBeNull();
        const reader = new TarEntryReader(await box.readArchive("/tmp/hello.txt"));
        const h = await reader.next();
        expect(h).toMatchObject({ type: "file", size: 11 });
        let text = "";
        for await (const c of reader.read(h!.size)) text += new TextDecoder().decode(c);
        reader.close();
        expect(text).toBe("hello, box\n");
        await expect(box.readArchive("/tmp/nothing-here")).rejects.toBeInstanceOf(PathMissing);
      } finally {
        await remove();
      }
    });

    test("a symlink loop and a path through a file are PathUnresolvable, not the engine's failure", async () => {
      const { box, remove } = await running(factory());
      try {
        await run(box, ["/bin/sh", "-c", "cd /tmp && ln -s loop2 loop1 && ln -s loop1 loop2 && echo hi > a.txt"]);
        for (const [path, reason] of [
          ["/tmp/loop1", "symlink loop"],
          ["/tmp/loop1/x", "symlink loop"],
          ["/tmp/a.txt/x", "not a directory"],
        ] as const) {
          const st = await box.stat(path).catch((e: unknown) => e);
          expect(st, path).toBeInstanceOf(PathUnresolvable);
          expect((st as PathUnresolvable).reason).toBe(reason);
          const ar = await box.readArchive(path).catch((e: unknown) => e);
          expect(ar, path).toBeInstanceOf(PathUnresolvable);
          expect((ar as PathUnresolvable).reason).toBe(reason);
        }
        expect((await box.state()).running).toBe(true);
      } finally {
        await remove();
      }
    });

    test("state and stop; archives still work on a stopped box, exec does not", async () => {
      const { box, remove } = await running(factory());
      try {
        expect(await box.state()).toMatchObject({ exists: true, running: true });
        await box.writeArchive("/tmp", Readable.from([await tarOf("kept.txt", "kept")]));
        await box.stop(1);
        const st = await box.state();
        expect(st).toMatchObject({ exists: true, running: false });
        expect(st.detail).toMatch(/exit/);
        expect((await box.stat("/tmp/kept.txt"))?.size).toBe(4);
        const refused = await box.exec({ cmd: ["true"], cwd: "/", stdin: false }).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(ContainerNotRunning);
        // Says what became of the container, whatever the engine's own words.
        expect((refused as Error).message).toContain(st.detail);
      } finally {
        await remove();
      }
      expect(await box.state()).toMatchObject({ exists: false, running: false });
      expect(await box.stat("/tmp")).toBeNull();
      await expect(box.readArchive("/tmp")).rejects.toBeInstanceOf(BoxGone);
      await expect(box.exec({ cmd: ["true"], cwd: "/", stdin: false })).rejects.toBeInstanceOf(ContainerNotRunning);
    });
  });
}
