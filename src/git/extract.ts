/**
 * Reading a repository's history out of a workspace for a push, without trusting the workspace:
 * only the object store and the refs are copied (objects/, refs/, packed-refs, HEAD, shallow) into
 * a fresh bare repository on the host — never the workspace's config, hooks, alternates or
 * anything else git would act on — and only regular files at plain relative paths are written.
 */
import type { Box } from "../workspaces/box.ts";
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Errors } from "../lib/errors.ts";
import { TarEntryReader } from "../workspaces/tar.ts";

export const PUSH_MAX_BYTES = 4 * 1024 * 1024 * 1024;

const wanted = (rel: string) =>
  rel === "HEAD" || rel === "packed-refs" || rel === "shallow" || rel.startsWith("refs/") || (rel.startsWith("objects/") && !/^objects\/info\/(http-)?alternates$/.test(rel));

const plain = (rel: string) => rel.split("/").every((seg) => seg !== "" && seg !== "." && seg !== ".." && !seg.includes("\0"));

/** Copies the history of `<gitDir>` in the container into the bare repository `bare`; returns the files copied. */
export async function copyHistory(box: Box, gitDir: string, bare: string): Promise<number> {
  let res: AsyncIterable<Uint8Array>;
  try {
    res = await box.readArchive(gitDir);
  } catch {
    throw Errors.validation("path", `${gitDir} is not a git repository in the workspace`, { reason: "not a repository" });
  }
  const reader = new TarEntryReader(res);
  let files = 0;
  let bytes = 0;
  try {
    for (;;) {
      const h = await reader.next();
      if (!h) break;
      const rel = h.name.replace(/^\.\/?/, "").replace(/^[^/]+\/?/, "");
      if (h.type !== "file" || !rel || !wanted(rel) || !plain(rel)) {
        await reader.discard(h.size);
        continue;
      }
      bytes += h.size;
      if (bytes > PUSH_MAX_BYTES) throw Errors.validation("path", `${gitDir} holds more than ${PUSH_MAX_BYTES / 1024 ** 3} GiB of history; push it from the workspace instead`, { reason: "too large" });
      const target = join(bare, rel);
      await mkdir(dirname(target), { recursive: true });
      const w = Bun.file(target).writer();
      for await (const chunk of reader.read(h.size)) w.write(chunk);
      await w.end();
      files++;
    }
  } finally {
    reader.close();
  }
  return files;
}
