/**
 * Workspace paths. Every file operation takes a path relative to /workspace (or an absolute one
 * under it) and works on the normalised absolute container path. Lexical escapes (`..` above the
 * root, absolute paths elsewhere) are refused here; symlinks that lead out are refused by
 * `checkChain` (archive.ts), which asks Docker how each component resolves.
 */
import { posix } from "node:path";
import { Errors } from "../lib/errors.ts";

export const WORKSPACE_ROOT = "/workspace";
const MAX_PATH = 4096;
/** Longest name of one file or directory, in bytes of UTF-8 (Linux's NAME_MAX). */
export const MAX_NAME_BYTES = 255;

/** True when `abs` (already normalised) is /workspace or below it. */
export const insideWorkspace = (abs: string) => abs === WORKSPACE_ROOT || abs.startsWith(WORKSPACE_ROOT + "/");

/**
 * Normalises a caller's path to an absolute path under /workspace. `""`, `"."` and `"/workspace"`
 * are the root itself. Throws VALIDATION_FAILED (naming `field`) for anything that leaves it.
 */
export function resolveWorkspacePath(input: string, field = "path"): string {
  if (typeof input !== "string") throw Errors.validation(field, `${field} must be a string`);
  if (input.includes("\0")) throw Errors.validation(field, `${field} must not contain NUL bytes`);
  if (input.length > MAX_PATH) throw Errors.validation(field, `${field} is longer than ${MAX_PATH} characters`);
  const joined = input.startsWith("/") ? input : posix.join(WORKSPACE_ROOT, input);
  const abs = posix.normalize(joined).replace(/\/+$/, "") || "/";
  if (!insideWorkspace(abs)) {
    throw Errors.validation(field, `${input} is outside ${WORKSPACE_ROOT}: workspace paths must stay under ${WORKSPACE_ROOT}`, { path: input });
  }
  // A name no file can have (ENAMETOOLONG): the caller's mistake, said before the engine is asked
  // (which answers it as its own failure).
  for (const name of abs.split("/")) {
    const bytes = Buffer.byteLength(name);
    if (bytes > MAX_NAME_BYTES) {
      throw Errors.validation(field, `${field} has a name of ${bytes} bytes (${name.slice(0, 24)}…): a file or directory name is at most ${MAX_NAME_BYTES} bytes`, {
        reason: "name too long",
        max_bytes: MAX_NAME_BYTES,
      });
    }
  }
  return abs;
}

/**
 * True when the caller's path ends in "/" (or "/."): it names a directory, as the kernel reads it —
 * `a.txt/` is "not a directory", never the file a.txt. resolveWorkspacePath drops the slash; file
 * operations check this instead.
 */
export const namesDirectory = (input: string) => /\/\.?$/.test(input);

/** The path relative to /workspace ("" for the root). */
export function relativePath(abs: string): string {
  return abs === WORKSPACE_ROOT ? "" : abs.slice(WORKSPACE_ROOT.length + 1);
}

/** Every ancestor below the root and the path itself, shallowest first: /workspace/a, /workspace/a/b … */
export function componentPaths(abs: string): string[] {
  const rel = relativePath(abs);
  if (!rel) return [];
  const parts = rel.split("/");
  return parts.map((_, i) => `${WORKSPACE_ROOT}/${parts.slice(0, i + 1).join("/")}`);
}
