/**
 * Symlinks of a checkout that climb above /workspace (`tests/fixtures/up -> ../../../outside`):
 * legal git content, but Docker's archive API refuses to unpack a relative symlink whose target
 * leaves the directory it unpacks into. They are taken out of the checkout on the host before it
 * is packed, and made inside the container after the copy (`ln -s`, as the container's user): a
 * link there resolves in the container's own filesystem, so it is harmless wherever it points,
 * and nothing is ever written outside the workspace on the host.
 */
import { readdir, readlink, unlink } from "node:fs/promises";
import { join, posix } from "node:path";
import { insideWorkspace } from "../workspaces/paths.ts";

export interface ClimbingLink {
  /** Absolute path of the link in the container. */
  path: string;
  /** Its target, as committed. */
  target: string;
}

/**
 * Removes from the checkout `dir` (to be copied to `containerPath`) every relative symlink whose
 * target leaves /workspace, and returns them. Absolute targets are left in: Docker accepts them.
 */
export async function takeClimbingLinks(dir: string, containerPath: string): Promise<ClimbingLink[]> {
  const out: ClimbingLink[] = [];
  // Walked by hand: a recursive readdir would follow a link to a directory (`lib -> /usr/lib`) out
  // of the checkout into the host's filesystem.
  const walk = async (hostDir: string, at: string): Promise<void> => {
    for (const e of await readdir(hostDir, { withFileTypes: true })) {
      const host = join(hostDir, e.name);
      const path = posix.join(at, e.name);
      if (e.isDirectory()) await walk(host, path);
      else if (e.isSymbolicLink()) {
        const target = await readlink(host);
        if (target.startsWith("/") || insideWorkspace(posix.join(posix.dirname(path), target))) continue;
        await unlink(host);
        out.push({ path, target });
      }
    }
  };
  await walk(dir, containerPath);
  return out;
}

const LINK = `while [ $# -gt 1 ]; do ln -sn -- "$1" "$2" || exit 1; shift 2; done`;
/** Bytes of arguments per exec, well under the kernel's limit for one command line. */
const BATCH_BYTES = 64 * 1024;

/** The commands (`sh -c`) that make `links` in the container, a batch of them each. */
export function linkCommands(links: ClimbingLink[]): string[][] {
  const cmds: string[][] = [];
  let cur: string[] = [];
  let bytes = 0;
  for (const l of links) {
    const size = Buffer.byteLength(l.target) + Buffer.byteLength(l.path) + 2;
    if (cur.length && bytes + size > BATCH_BYTES) {
      cmds.push(["/bin/sh", "-c", LINK, "runcell-git", ...cur]);
      cur = [];
      bytes = 0;
    }
    cur.push(l.target, l.path);
    bytes += size;
  }
  if (cur.length) cmds.push(["/bin/sh", "-c", LINK, "runcell-git", ...cur]);
  return cmds;
}
