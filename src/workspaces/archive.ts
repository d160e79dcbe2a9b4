/**
 * File access through the box's archive operations (box.ts; on Docker its archive API,
 * `HEAD/GET /containers/:id/archive`). They work on running and stopped boxes alike, so downloads
 * and signed URLs never start a workspace. `checkChain` stats every component of a path (in
 * parallel) and refuses one that resolves, via a symlink, outside /workspace: the stat reports
 * each symlink's target fully resolved in the scope of the box's root (Docker does), which is
 * exactly what the check needs.
 */
import { AppError, Errors } from "../lib/errors.ts";
import { type Box, BoxGone, PathMissing, type PathStat, PathUnresolvable } from "./box.ts";
import { componentPaths, insideWorkspace, WORKSPACE_ROOT } from "./paths.ts";
import type { EntryType } from "../schema/workspace.ts";
import { TarEntryReader, TruncatedEntry } from "./tar.ts";

const MODE_DIR = 2 ** 31;
const MODE_SYMLINK = 1 << 27;
const MODE_IRREGULAR_BITS = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19);

export function entryType(mode: number): EntryType {
  if (mode >= MODE_DIR) return "dir";
  if (mode & MODE_SYMLINK) return "symlink";
  if (mode & MODE_IRREGULAR_BITS) return "other";
  return "file";
}

const gone = (why: string) => new AppError("CONTAINER_FAILED", `The workspace container is gone (${why}); it is recreated on the session's next turn`);

export interface Resolved {
  /** What the path finally points at (null: it does not exist). */
  stat: PathStat | null;
  /** The path to operate on: the input, or a final symlink's target inside /workspace. */
  path: string;
}

/**
 * Checks every component of `abs` (already lexically inside /workspace) and returns the stat of
 * the path. Throws VALIDATION_FAILED when a symlink leads outside /workspace, when the path cannot
 * name anything (a symlink loop, a component that is a file: `a.txt/x`), or — `asDir`, the
 * caller's path ended in "/" — when it names something that is not a directory; CONTAINER_FAILED
 * when the container does not exist.
 */
export async function checkChain(box: Box, abs: string, opts: { field?: string; asDir?: boolean } = {}): Promise<Resolved> {
  const field = opts.field ?? "path";
  const shown = opts.asDir ? `${abs}/` : abs;
  const paths = [WORKSPACE_ROOT, ...componentPaths(abs)];
  const stats = await Promise.all(paths.map((p) => box.stat(p).catch((e: unknown) => e as Error)));
  if (stats[0] instanceof Error) throw stats[0];
  if (!stats[0]) {
    // /workspace always exists (it is the volume's mount point): is the box itself missing?
    const st = await box.state();
    if (!st.exists) throw gone(st.detail);
    throw new AppError("CONTAINER_FAILED", `${WORKSPACE_ROOT} is missing in the workspace container`);
  }
  // Shallowest first: a symlink out is refused before anything deeper is looked at.
  let target = abs;
  for (let i = 1; i < stats.length; i++) {
    const s = stats[i]!;
    if (s instanceof PathUnresolvable) throw unresolvable(s, paths[i]!, paths[i - 1]!, shown, field);
    if (s instanceof Error) throw s;
    if (!s) return { stat: null, path: abs };
    if (s.linkTarget && !insideWorkspace(s.linkTarget)) {
      throw Errors.validation(field, `${paths[i]} is a symlink to ${s.linkTarget}, outside ${WORKSPACE_ROOT}; refusing to follow it`, {
        path: paths[i],
      });
    }
    if (i === stats.length - 1 && s.linkTarget) target = s.linkTarget;
  }
  const last = stats[stats.length - 1] as PathStat;
  // A final symlink inside /workspace: the target's own stat (it may be missing: a dangling link).
  const stat = target === abs ? last : await box.stat(target).catch((e: unknown) => {
    throw e instanceof PathUnresolvable ? unresolvable(e, abs, null, shown, field) : e;
  });
  if (opts.asDir && stat && entryType(stat.mode) !== "dir") throw notADirectory(abs, shown, field);
  return { stat, path: target };
}

/** `culprit` is not a directory, though `shown` goes through it (`a.txt/x`) or names it as one (`a.txt/`). */
const notADirectory = (culprit: string, shown: string, field: string) =>
  Errors.validation(field, `${culprit} is not a directory (${shown} treats it as one)`, { path: culprit, reason: "not a directory" });

/**
 * The engine could not resolve `at` (a component of `shown`): a loop is named where it starts; a
 * "not a directory" is its parent's fault (`a.txt` for `a.txt/x`) when there is one below the root
 * — otherwise a symlink on the way leads through a file.
 */
function unresolvable(e: PathUnresolvable, at: string, parent: string | null, shown: string, field: string): AppError {
  if (e.reason === "symlink loop") {
    return Errors.validation(field, `${at} is or leads into a symlink loop (too many levels of symbolic links), so ${shown} cannot be resolved`, {
      path: at,
      reason: "symlink loop",
    });
  }
  if (parent && parent !== WORKSPACE_ROOT) return notADirectory(parent, shown, field);
  return Errors.validation(field, `${shown} cannot be resolved: a symlink on the way leads through something that is not a directory`, {
    path: at,
    reason: "not a directory",
  });
}

/**
 * Opens the single entry of `GET /archive?path=` (a regular file) as a stream of its bytes.
 * `close` ends the engine's stream whether or not `body` was ever read (returning a generator that
 * never started runs none of its cleanup): until then, on Docker, the container's lock is held.
 */
export async function openFile(box: Box, abs: string): Promise<{ size: number; body: AsyncGenerator<Uint8Array>; close(): void }> {
  let res: AsyncIterable<Uint8Array>;
  try {
    res = await box.readArchive(abs);
  } catch (e) {
    if (e instanceof PathMissing) throw Errors.notFound("File", abs);
    if (e instanceof BoxGone) throw gone(e.message);
    // Checked just before (checkChain), so changed since: a file moved and a loop or file put in its way.
    if (e instanceof PathUnresolvable) throw unresolvable(e, abs, null, abs, "path");
    throw e;
  }
  const reader = new TarEntryReader(res);
  const header = await reader.next();
  if (!header || header.type !== "file") {
    reader.close();
    throw Errors.validation("path", `${abs} is not a regular file`);
  }
  return { size: header.size, body: whole(reader.body(header.size), abs), close: () => reader.close() };
}

/** A file that changed while it was read (a command writing it): 400 (the interface pairs VALIDATION_FAILED with 400), and a tool's error the agent can retry — not a broken workspace. */
export const changedWhileRead = (abs: string) =>
  new AppError("VALIDATION_FAILED", `${abs} changed while it was read (something in the workspace is writing it): try again`, { field: "path", reason: "changed while read" });

async function* whole(body: AsyncGenerator<Uint8Array>, abs: string): AsyncGenerator<Uint8Array> {
  try {
    yield* body;
  } catch (e) {
    throw e instanceof TruncatedEntry ? changedWhileRead(abs) : e;
  }
}

/** Reads a whole regular file (at most `maxBytes`). */
export async function readAll(box: Box, abs: string, maxBytes: number): Promise<Uint8Array> {
  const { size, body, close } = await openFile(box, abs);
  if (size > maxBytes) {
    close();
    throw tooLarge(abs, size, maxBytes);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for await (const chunk of body) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

export function tooLarge(abs: string, size: number, maxBytes: number): AppError {
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return Errors.validation("path", `${abs} is ${mb(size)}, over the ${mb(maxBytes)} limit for reading a workspace file; split or compress it in the workspace first`, {
    size,
    limit_bytes: maxBytes,
  });
}
