/**
 * The configuration of the commands that work on the data dir rather than serve it (admin, token,
 * audit, migrate, backup): one way to parse their flags and resolve their settings.
 */
import { type Config, type ParsedArgs, parseArgs, resolveConfig } from "../config.ts";

/**
 * The configuration openDataDir reads: the flags admin, token, audit, migrate and backup take
 * (serve's others are a usage error there), and the only settings they read from the environment
 * and runcell.toml (serve's there are left alone, even broken: they are serve's to check).
 */
export const STATE_FLAGS = ["data-dir", "database", "vault-key-file"] as const;

/** parseArgs for the commands that work on the data dir: their own `commandFlags` and STATE_FLAGS. */
export const parseStateArgs = (argv: string[], command: string, commandFlags: Record<string, boolean> = {}): ParsedArgs =>
  parseArgs(argv, commandFlags, { command, only: STATE_FLAGS });

/** Their configuration: STATE_FLAGS from the flags, the environment and runcell.toml; serve's settings not read. */
export const resolveStateConfig = (flags: Map<string, unknown>): Config => resolveConfig(flags, process.env, STATE_FLAGS);
