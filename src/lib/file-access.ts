/**
 * Why a file named by a flag (--vault-key-file, --admin-password-file) cannot be read. A file this
 * process may not read (or whose directory it may not enter) is not a missing one: the hint for a
 * missing file is to make one, which over an existing key would lose every secret it opens.
 */

/** The read failed because the file is not there (ENOENT, or a path through a non-directory). */
export const isMissing = (e: unknown) => ["ENOENT", "ENOTDIR"].includes((e as NodeJS.ErrnoException | null)?.code ?? "");

/** The read failed for want of permission: the file (or a directory above it) is not this user's to read. */
export const isDenied = (e: unknown) => ["EACCES", "EPERM"].includes((e as NodeJS.ErrnoException | null)?.code ?? "");

/** "cannot be read by uid 998 (permission denied)", or the error's code for other failures. */
export function unreadableReason(e: unknown): string {
  if (isDenied(e)) return `cannot be read by uid ${process.getuid?.() ?? "?"} (permission denied)`;
  return `cannot be read (${(e as NodeJS.ErrnoException | null)?.code ?? (e as Error).message})`;
}

/** The fix for a file that is there (or may be) but cannot be read by the user runcell runs as. */
export function readableFix(path: string): string {
  return `let the user runcell runs as read ${path} and enter every directory above it (e.g. chown runcell ${path}; chmod 600 ${path}; for /etc/runcell: chgrp runcell /etc/runcell; chmod 750 /etc/runcell); do not write a new file in its place`;
}
