/**
 * `runcell image build`: argument handling, the pieces of the debootstrap build, and the real
 * rootfs → docker import path (a tiny busybox root filesystem; the full debootstrap build takes
 * minutes and is run by hand, see docs/workspaces.md).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptMirror, debootstrapArgs, importChanges, PACKAGES, prepareRootfs, splitTag } from "../../src/workspaces/build-image.ts";
import { docker } from "../workspaces/helpers.ts";
import { runCli } from "../helpers/cli.ts";

const dirs: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), "runcell-image-test-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("runcell image: arguments", () => {
  test.each([
    [["image"], /missing subcommand/],
    [["image", "rebuild"], /unknown subcommand "rebuild"/],
    [["image", "build", "extra"], /unexpected argument "extra"/],
    [["image", "build", "--bogus"], /unknown flag --bogus/],
    [["image", "build", "--tag"], /--tag needs a value/],
    [["image", "build", "--tag", "Not A Tag!"], /--tag: "Not A Tag!" is not a valid image reference/],
    [["image", "build", "--suite", "Bookworm;rm"], /--suite: .* is not a Debian suite name/],
    [["image", "build", "--mirror", "ftp://x"], /--mirror: expected an http\(s\) URL/],
    [["image", "build", "--docker-host", "gopher://x"], /unsupported Docker host/],
  ])("%p exits 2 naming the problem", async (args, message) => {
    const r = await runCli(args as string[]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  test("--help documents the command; the main help lists it", async () => {
    const r = await runCli(["image", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("runcell image build");
    expect(r.stdout).toContain("--rootfs DIR");
    expect((await runCli(["--help"])).stdout).toMatch(/\n {2}image +Build the default workspace image/);
  });

  test("a missing root filesystem is a run-time failure (exit 1) with the reason", async () => {
    const r = await runCli(["image", "build", "--rootfs", "/nonexistent/rootfs", "--tag", "runcell-test/never:1"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("/nonexistent/rootfs is not a directory");
  });

  test("an unreachable engine is reported before any work", async () => {
    const r = await runCli(["image", "build", "--rootfs", temp(), "--docker-host", "unix:///nonexistent.sock", "--tag", "runcell-test/never:1"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("cannot reach the Docker engine");
  });
});

describe("image build pieces", () => {
  test("the Debian mirror comes from apt's sources (deb822 and one-line), security mirrors skipped", () => {
    const d = temp();
    const deb822 = join(d, "debian.sources");
    writeFileSync(
      deb822,
      "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://mirror.example.org/debian/\nSuites: bookworm\n",
    );
    const oneLine = join(d, "sources.list");
    writeFileSync(oneLine, "# comment\ndeb [signed-by=/k.gpg] https://ftp.example.net/debian bookworm main\n");
    expect(aptMirror([deb822])).toBe("http://mirror.example.org/debian");
    expect(aptMirror([oneLine])).toBe("https://ftp.example.net/debian");
    expect(aptMirror([join(d, "missing.list")])).toBeNull();
  });

  test("debootstrap arguments, import changes and tags", () => {
    expect(debootstrapArgs("bookworm", "/tmp/r", "http://m/debian")).toEqual([
      "debootstrap",
      "--variant=minbase",
      "--include=bash,coreutils,git,curl,ca-certificates,python3",
      "bookworm",
      "/tmp/r",
      "http://m/debian",
    ]);
    expect(PACKAGES).toEqual(["bash", "coreutils", "git", "curl", "ca-certificates", "python3"]);
    const changes = importChanges("bookworm");
    expect(changes).toContain("WORKDIR /workspace");
    expect(changes.some((c) => c.startsWith("ENV PATH="))).toBe(true);
    expect(splitTag("runcell/workspace:latest")).toEqual(["runcell/workspace", "latest"]);
    expect(splitTag("localhost:5000/ws")).toEqual(["localhost:5000/ws", "latest"]);
    expect(splitTag("localhost:5000/ws:v2")).toEqual(["localhost:5000/ws", "v2"]);
  });

  test("the debootstrapped tree is tidied: /workspace, the mirror for apt, no package caches", () => {
    const root = temp();
    mkdirSync(join(root, "etc/apt"), { recursive: true });
    mkdirSync(join(root, "var/cache/apt/archives/partial"), { recursive: true });
    mkdirSync(join(root, "var/lib/apt/lists"), { recursive: true });
    writeFileSync(join(root, "var/cache/apt/archives/git_1.deb"), "x");
    writeFileSync(join(root, "var/lib/apt/lists/deb.debian.org_Packages"), "x");
    prepareRootfs(root, "bookworm", "http://m/debian");
    expect(existsSync(join(root, "workspace"))).toBe(true);
    expect(readFileSync(join(root, "etc/apt/sources.list"), "utf8")).toBe("deb http://m/debian bookworm main\n");
    expect(existsSync(join(root, "var/cache/apt/archives/git_1.deb"))).toBe(false);
    expect(existsSync(join(root, "var/cache/apt/archives/partial"))).toBe(true);
    expect(existsSync(join(root, "var/lib/apt/lists/deb.debian.org_Packages"))).toBe(false);
  });
});

describe("rootfs → docker import", () => {
  test("imports a root filesystem with progress, as an image workspaces can run", async () => {
    const root = temp();
    mkdirSync(join(root, "bin"), { recursive: true });
    cpSync("/bin/busybox", join(root, "bin/busybox"));
    for (const applet of ["sh", "echo", "cat", "pwd"]) symlinkSync("busybox", join(root, "bin", applet));
    writeFileSync(join(root, "hello.txt"), "from the rootfs\n");
    const tag = `runcell-test/imported:${crypto.randomUUID().slice(0, 8)}`;
    try {
      const r = await runCli(["image", "build", "--rootfs", root, "--tag", tag]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("[1/2] checking prerequisites");
      expect(r.stdout).toContain(`[2/2] importing ${root} into Docker as ${tag}`);
      expect(r.stdout).toMatch(/sent [\d.]+ MB of ~[\d.]+ MB/);
      expect(r.stdout).toMatch(new RegExp(`built ${tag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \\(sha256:`));
      const info = await docker.getImage(tag).inspect();
      expect(info.Config.WorkingDir).toBe("/workspace");
      expect(info.Config.Labels).toMatchObject({ "runcell.image": "workspace" });
      expect(info.Config.Env).toContain("LANG=C.UTF-8");
      const c = await docker.createContainer({ Image: tag, Cmd: ["/bin/sh", "-c", "cat /hello.txt; pwd"], HostConfig: { NetworkMode: "none" } });
      try {
        await c.start();
        await c.wait();
        const logs = (await c.logs({ stdout: true, stderr: true })).toString("latin1");
        expect(logs).toContain("from the rootfs");
        expect(logs).toContain("/workspace");
      } finally {
        await c.remove({ force: true });
      }
    } finally {
      await docker.getImage(tag).remove({ force: true }).catch(() => {});
    }
  });
});
