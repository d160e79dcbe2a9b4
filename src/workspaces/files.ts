/**
 * Workspace file operations beyond plain reads:
 * - writes run `mkdir -p` + `cat >` through exec, so files get the container user's ownership
 *   and umask and an existing file keeps its mode (the archive API would replace it as root);
 * - listings run one exec with POSIX sh builtins only (glob + test) for names and types, sort and
 *   page them here, then one `stat` exec for the page's sizes and times (null where the image
 *   has no `stat`);
 * - downloads stream the file out of Docker's archive API without starting the container.
 * Every path first passes `checkChain` (archive.ts): no component may be a symlink out of
 * /workspace.
 */
import type { Box } from "./box.ts";
import { posix } from "node:path";
import { AppError, Errors } from "../lib/errors.ts";
import type { DirEntry, DirListing, EntryType } from "../schema/workspace.ts";
import { checkChain, entryType, openFile, tooLarge } from "./archive.ts";
import type { ExecOptions, ExecResult } from "./exec.ts";
import { relativePath } from "./paths.ts";
import { detach, type SpoolBudget } from "./spool.ts";
import type { WorkspaceRow } from "../db/schema.ts";

/** What the file helpers need from the service. */
export interface FileHost {
  /** The row's box on its host. */
  box(row: WorkspaceRow): Box;
  execIn(row: WorkspaceRow, opts: ExecOptions): Promise<ExecResult>;
}

export interface Download {
  name: string;
  size: number;
  /** The bytes, already read out of the box (spool.ts): a slow client holds nothing of the container. */
  body: AsyncGenerator<Uint8Array>;
  /** Releases the bytes' spool file; called when the response is cancelled before its end (idempotent). */
  close(): Promise<void>;
}

const LIST_MAX_BYTES = 32 * 1024 * 1024;

const NAMES = `cd -- "$1" 2>/dev/null || exit 3
for f in * .[!.]* ..?*; do
  if [ -L "$f" ]; then t=l; elif [ -d "$f" ]; then t=d; elif [ -f "$f" ]; then t=f; elif [ -e "$f" ]; then t=o; else continue; fi
  printf '%s%s\\0' "$t" "$f"
done`;

const STATS = `cd -- "$1" 2>/dev/null || exit 3
shift
if command -v stat >/dev/null 2>&1; then
  for f do s=$(stat -c '%s %Y' -- "$f" 2>/dev/null) || s='- -'; printf '%s\\0' "$s"; done
else
  for f do printf '%s\\0' '- -'; done
fi`;

const TYPES: Record<string, EntryType> = { f: "file", d: "dir", l: "symlink", o: "other" };

function failed(what: string, r: ExecResult): AppError {
  return Errors.validation("path", `${what}: ${r.output.trim() || `exit code ${r.exitCode}`}`);
}

export async function writeViaExec(host: FileHost, row: WorkspaceRow, abs: string, data: string | Uint8Array): Promise<void> {
  const r = await checkChain(host.box(row), abs);
  if (r.stat && entryType(r.stat.mode) === "dir") throw Errors.validation("path", `${abs} is a directory, not a file`);
  const res = await host.execIn(row, {
    cmd: ["/bin/sh", "-c", 'mkdir -p -- "$1" && cat > "$2"', "runcell-write", posix.dirname(r.path), r.path],
    stdin: data,
    maxOutputBytes: 4096,
    timeoutMs: 120_000,
  });
  if (res.exitCode !== 0) throw failed(`Could not write ${abs}`, res);
}

export async function listDirectory(host: FileHost, row: WorkspaceRow, abs: string, page: { limit?: number; cursor?: string }): Promise<DirListing> {
  const r = await checkChain(host.box(row), abs);
  if (!r.stat) throw Errors.notFound("Directory", abs);
  if (entryType(r.stat.mode) !== "dir") throw Errors.validation("path", `${abs} is not a directory`);
  const names = await host.execIn(row, { cmd: ["/bin/sh", "-c", NAMES, "runcell-ls", r.path], maxOutputBytes: LIST_MAX_BYTES, timeoutMs: 60_000 });
  if (names.exitCode === 3) throw Errors.notFound("Directory", abs);
  if (names.exitCode !== 0) throw failed(`Could not list ${abs}`, names);
  if (names.truncated) throw Errors.validation("path", `${abs} has too many entries to list; use the Bash tool`);
  const all = names.output
    .split("\0")
    .filter((rec) => rec.length > 1)
    .map((rec) => ({ type: TYPES[rec[0]!] ?? "other", name: rec.slice(1) }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const limit = page.limit ?? 100;
  const after = page.cursor ? all.filter((e) => e.name > page.cursor!) : all;
  const slice = after.slice(0, limit);
  let stats: string[] = [];
  if (slice.length) {
    const st = await host.execIn(row, { cmd: ["/bin/sh", "-c", STATS, "runcell-stat", r.path, ...slice.map((e) => e.name)], maxOutputBytes: LIST_MAX_BYTES, timeoutMs: 60_000 });
    if (st.exitCode === 0) stats = st.output.split("\0");
  }
  const rel = relativePath(abs);
  const data = slice.map((e, i): DirEntry => {
    const [size, mtime] = (stats[i] ?? "- -").split(" ");
    return {
      name: e.name,
      path: rel ? `${rel}/${e.name}` : e.name,
      type: e.type,
      size: e.type === "dir" || size === "-" || size === undefined ? null : Number(size),
      modified: mtime && mtime !== "-" ? new Date(Number(mtime) * 1000).toISOString() : null,
    };
  });
  return { path: rel, data, next_cursor: after.length > limit ? slice[slice.length - 1]!.name : null };
}

/**
 * `asDir`: the caller's path ended in "/" (paths.ts namesDirectory). `spool`: where a file over
 * 1 MiB is held while the client reads it, and the disk all such files may take at once (spool.ts).
 */
export async function openDownload(c: Box, abs: string, maxBytes: number, spool: { dir: string; budget: SpoolBudget }, asDir = false): Promise<Download> {
  const r = await checkChain(c, abs, { asDir });
  if (!r.stat) throw Errors.notFound("File", abs);
  const type = entryType(r.stat.mode);
  if (type === "dir") throw Errors.validation("path", `${abs} is a directory; list it with ?path= instead`);
  if (type !== "file") throw Errors.validation("path", `${abs} is not a regular file`);
  if (r.stat.size > maxBytes) throw tooLarge(abs, r.stat.size, maxBytes);
  const file = await openFile(c, r.path);
  // Grown past the limit since its stat: refused like one that was already too large.
  if (file.size > maxBytes) {
    file.close();
    throw tooLarge(abs, file.size, maxBytes);
  }
  try {
    const { body, close } = await detach(file.body, file.size, spool.dir, spool.budget);
    return { name: posix.basename(abs), size: file.size, body, close };
  } finally {
    file.close();
  }
}
