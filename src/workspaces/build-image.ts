/**
 * Building the default workspace image without any registry: `debootstrap --variant=minbase` of
 * Debian (bookworm) with bash, coreutils, git, curl, ca-certificates and python3 from the Debian
 * mirror apt already uses, a little tidying of the root filesystem, then a streamed `docker
 * import` (through the Engine API, so --docker-host works for a remote engine too). Progress goes
 * to `out` as numbered steps with elapsed time.
 */
import type Docker from "dockerode";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { dockerMessage } from "./docker.ts";

export const DEFAULT_TAG = "runcell/workspace:latest";
export const DEFAULT_SUITE = "bookworm";
export const DEFAULT_MIRROR = "http://deb.debian.org/debian";
export const PACKAGES = ["bash", "coreutils", "git", "curl", "ca-certificates", "python3"];

/** The first Debian (non-security) mirror in apt's sources: deb822 `URIs:` or one-line `deb URL …`. */
export function aptMirror(files?: string[]): string | null {
  const list =
    files ??
    [
      "/etc/apt/sources.list",
      ...(existsSync("/etc/apt/sources.list.d") ? readdirSync("/etc/apt/sources.list.d").map((f) => join("/etc/apt/sources.list.d", f)) : []),
    ].filter((f) => /\.(list|sources)$/.test(f));
  for (const file of list) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    const urls = [
      ...[...text.matchAll(/^\s*URIs:\s*(.+)$/gim)].flatMap((m) => m[1]!.trim().split(/\s+/)),
      ...[...text.matchAll(/^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)/gim)].map((m) => m[1]!),
    ];
    const debian = urls.find((u) => /^https?:\/\//.test(u) && /\/debian\/?$/.test(u));
    if (debian) return debian.replace(/\/+$/, "");
  }
  return null;
}

export function debootstrapArgs(suite: string, dir: string, mirror: string): string[] {
  return ["debootstrap", "--variant=minbase", `--include=${PACKAGES.join(",")}`, suite, dir, mirror];
}

export function importChanges(suite: string | null): string[] {
  return [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    "WORKDIR /workspace",
    'CMD ["/bin/bash"]',
    `LABEL runcell.image=workspace runcell.suite=${suite ?? "custom"} runcell.built=${new Date().toISOString()}`,
  ];
}

/** Makes the debootstrapped tree a workspace image: /workspace, the mirror for apt, no caches. */
export function prepareRootfs(dir: string, suite: string, mirror: string) {
  mkdirSync(join(dir, "workspace"), { recursive: true });
  writeFileSync(join(dir, "etc/apt/sources.list"), `deb ${mirror} ${suite} main\n`);
  for (const sub of ["var/cache/apt/archives", "var/lib/apt/lists"]) {
    const path = join(dir, sub);
    if (!existsSync(path)) continue;
    for (const f of readdirSync(path)) if (f !== "partial" && f !== "lock") rmSync(join(path, f), { recursive: true, force: true });
  }
}

function duBytes(dir: string): number {
  const r = Bun.spawnSync(["du", "-sb", dir], { stderr: "ignore" });
  return Number(new TextDecoder().decode(r.stdout).split(/\s/)[0]) || 0;
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

/** Streams `tar -C dir -c .` into `docker import`; returns the new image id. */
export async function importRootfs(
  client: Docker,
  dir: string,
  tag: string,
  changes: string[],
  progress: (sent: number, total: number) => void = () => {},
): Promise<string> {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
  const total = duBytes(dir);
  const tar = Bun.spawn(["tar", "--numeric-owner", "-C", dir, "-c", "."], { stdout: "pipe", stderr: "pipe" });
  let sent = 0;
  const counted = new PassThrough();
  const source = Readable.fromWeb(tar.stdout as unknown as import("node:stream/web").ReadableStream<Uint8Array>);
  source.on("data", (chunk: Buffer) => {
    sent += chunk.length;
    progress(sent, total);
  });
  source.pipe(counted);
  const [repo, version] = splitTag(tag);
  const res = (await client.importImage(counted as unknown as NodeJS.ReadableStream, { repo, tag: version, changes } as never)) as unknown as NodeJS.ReadableStream;
  let body = "";
  for await (const chunk of res) body += chunk.toString();
  const code = await tar.exited;
  if (code !== 0) throw new Error(`tar failed (exit ${code}): ${(await new Response(tar.stderr).text()).trim()}`);
  const events = body
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { status?: string; error?: string });
  const err = events.find((e) => e.error);
  if (err) throw new Error(`docker import failed: ${err.error}`);
  const id = events.map((e) => e.status ?? "").find((s) => s.startsWith("sha256:"));
  return id ?? (await client.getImage(tag).inspect()).Id;
}

/** "repo/name:tag" → ["repo/name", "tag"] (a registry port is not a tag). */
export function splitTag(ref: string): [string, string] {
  const at = ref.lastIndexOf(":");
  if (at > ref.lastIndexOf("/")) return [ref.slice(0, at), ref.slice(at + 1)];
  return [ref, "latest"];
}

export interface BuildOptions {
  client: Docker;
  tag: string;
  suite: string;
  mirror: string;
  /** An existing root filesystem to import instead of running debootstrap. */
  rootfs?: string;
  workDir: string;
  keep: boolean;
  out: (line: string) => void;
}

export async function buildImage(o: BuildOptions): Promise<{ id: string; size: number; ms: number }> {
  const started = Date.now();
  const elapsed = () => {
    const s = Math.round((Date.now() - started) / 1000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  };
  const steps = o.rootfs ? 2 : 4;
  let n = 0;
  const step = (what: string) => o.out(`[${++n}/${steps}] ${what}  (${elapsed()})`);

  step("checking prerequisites");
  try {
    await o.client.ping();
  } catch (e) {
    throw new Error(`cannot reach the Docker engine: ${dockerMessage(e)} (start it, or pass --docker-host)`);
  }
  let dir = o.rootfs;
  if (!dir) {
    if (!Bun.which("debootstrap")) throw new Error("debootstrap is not installed (apt-get install debootstrap), or pass --rootfs DIR");
    if (process.getuid?.() !== 0) throw new Error("debootstrap needs root: run `sudo runcell image build`");
    dir = join(o.workDir, "rootfs");
    mkdirSync(dir, { recursive: true });

    step(`debootstrap --variant=minbase ${o.suite} from ${o.mirror} (+ ${PACKAGES.join(", ")})`);
    const proc = Bun.spawn(debootstrapArgs(o.suite, dir, o.mirror), { stdout: "pipe", stderr: "pipe" });
    const tail: string[] = [];
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      let buf = "";
      const reader = stream.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += new TextDecoder().decode(value);
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          tail.push(line);
          if (tail.length > 20) tail.shift();
          if (/^[IWE]: /.test(line)) o.out(`      ${elapsed()}  ${line.slice(3)}`);
        }
      }
    };
    const [code] = await Promise.all([proc.exited, pump(proc.stdout), pump(proc.stderr)]);
    if (code !== 0) throw new Error(`debootstrap failed (exit ${code}):\n${tail.join("\n")}`);

    step("preparing the root filesystem (/workspace, apt sources, no package caches)");
    prepareRootfs(dir, o.suite, o.mirror);
  }

  step(`importing ${dir} into Docker as ${o.tag}`);
  let last = 0;
  const id = await importRootfs(o.client, dir, o.tag, importChanges(o.rootfs ? null : o.suite), (sent, total) => {
    if (Date.now() - last < 1000) return;
    last = Date.now();
    o.out(`      ${elapsed()}  sent ${mb(sent)}${total ? ` of ~${mb(total)} (${Math.min(100, Math.round((sent / total) * 100))}%)` : ""}`);
  });
  if (!o.rootfs && !o.keep) rmSync(o.workDir, { recursive: true, force: true });
  const info = await o.client.getImage(o.tag).inspect();
  return { id, size: info.Size, ms: Date.now() - started };
}
