/**
 * POSIX shell quoting, for the places that hand a command line to a shell: a suggested command the
 * operator pastes (db/pg/database-args.ts) and the `GIT_SSH_COMMAND` git runs through `sh -c`
 * (git/command.ts).
 */

/** An argument as a POSIX shell reads it back: unquoted when plain, else in single quotes. */
export function shellArg(a: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`;
}

/** A command line a POSIX shell splits back into exactly `argv`. */
export function shellLine(argv: readonly string[]): string {
  return argv.map(shellArg).join(" ");
}
