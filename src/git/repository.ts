/**
 * Repository entries of a profile or a session: the URL grammar (https, ssh, scp-style
 * `git@host:path`; plain http only where the network guard lets the owner reach the host, see
 * src/git/service.ts), the directory each one is checked out to, and the rules a schema cannot
 * state (no credentials in the URL, paths unique and inside /workspace).
 */
import { posix } from "node:path";
import type { RepositoryConfig } from "../db/schema.ts";
import { Errors } from "../lib/errors.ts";
import { resolveWorkspacePath } from "../workspaces/paths.ts";

export interface RepoUrl {
  scheme: "https" | "http" | "ssh";
  /** Host name without brackets, lower case. */
  host: string;
  port: number;
  /** The URL git is given (scp-style rewritten to ssh://). */
  url: string;
}

const SCP = /^([A-Za-z0-9._-]+)@([A-Za-z0-9.-]+):(?!\/\/)(.+)$/;
const DEFAULT_PORT = { https: 443, http: 80, ssh: 22 } as const;

/** The URL of a repository entry, or VALIDATION_FAILED naming `field`. */
export function parseRepoUrl(raw: string, field: string): RepoUrl {
  const scp = SCP.exec(raw);
  const text = scp ? `ssh://${scp[1]}@${scp[2]}/${scp[3]!.replace(/^\//, "")}` : raw;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw Errors.validation(field, `${field} must be an https:// or ssh:// URL (or git@host:path)`, { reason: "invalid URL" });
  }
  const scheme = u.protocol.replace(/:$/, "");
  if (scheme !== "https" && scheme !== "http" && scheme !== "ssh") {
    throw Errors.validation(field, `${field} must use https or ssh, not ${scheme}`, { reason: "invalid scheme" });
  }
  if (u.password || (scheme !== "ssh" && u.username)) {
    throw Errors.validation(field, `${field} must not contain credentials: store the token in the vault and name it in credential_secret`, { reason: "credentials in URL" });
  }
  if (u.search || u.hash || raw.includes("#")) throw Errors.validation(field, `${field} must not have a query string or fragment`, { reason: "query or fragment" });
  if (!u.hostname || u.pathname === "/" || !u.pathname) throw Errors.validation(field, `${field} must name a host and a repository path`, { reason: "incomplete URL" });
  if (raw.startsWith("-") || /[\s\x00-\x1f]/.test(raw)) throw Errors.validation(field, `${field} is not a valid repository URL`, { reason: "invalid URL" });
  const s = scheme as RepoUrl["scheme"];
  return { scheme: s, host: u.hostname.replace(/^\[|\]$/g, "").toLowerCase(), port: u.port ? Number(u.port) : DEFAULT_PORT[s], url: u.href };
}

/** The directory a repository is checked out to: its `path`, else the URL's last segment without `.git`. */
export function checkoutPath(r: RepositoryConfig, field: string): string {
  if (r.path !== undefined) {
    const abs = resolveWorkspacePath(r.path, `${field}.path`);
    if (abs === "/workspace") throw Errors.validation(`${field}.path`, `${field}.path must be a directory below /workspace, not /workspace itself`, { reason: "invalid path" });
    return abs;
  }
  const url = parseRepoUrl(r.url, `${field}.url`).url;
  const base = posix.basename(new URL(url).pathname).replace(/\.git$/, "");
  if (!base || base === "." || base === "..") throw Errors.validation(`${field}.path`, `${field}.path is required: no directory name follows from the URL`, { reason: "required" });
  return resolveWorkspacePath(base, `${field}.path`);
}

/** Checks a list of (schema-valid) entries: URLs, and directories that are distinct and not nested. */
export function checkRepositories(list: RepositoryConfig[], field = "repositories"): RepositoryConfig[] {
  const seen: string[] = [];
  list.forEach((r, i) => {
    const f = `${field}[${i}]`;
    parseRepoUrl(r.url, `${f}.url`);
    const p = checkoutPath(r, f);
    const clash = seen.find((q) => q === p || q.startsWith(p + "/") || p.startsWith(q + "/"));
    if (clash) throw Errors.validation(`${f}.path`, `${f} would be checked out to ${p}, which overlaps ${clash} of another repository: give it a distinct path`, { reason: "duplicate" });
    seen.push(p);
  });
  return list;
}

/**
 * A session's own repositories (checked alone) beside its profile's: one at the same directory as
 * one of the profile's replaces it; one nested in, or around, another of the profile's is refused
 * as two of one list would be.
 */
export function checkBesideProfile(profile: RepositoryConfig[], session: RepositoryConfig[], field = "repositories"): void {
  const theirs = profile.map((r, i) => checkoutPath(r, `the profile's repositories[${i}]`));
  session.forEach((r, i) => {
    const f = `${field}[${i}]`;
    const p = checkoutPath(r, f);
    const clash = theirs.find((q) => q.startsWith(p + "/") || p.startsWith(q + "/"));
    if (clash) {
      throw Errors.validation(`${f}.path`, `${f} would be checked out to ${p}, which overlaps ${clash} of the profile's repositories: give it a distinct path, or that same path to replace it`, { reason: "duplicate" });
    }
  });
}

/** A profile's repositories and a session's own, the session's replacing any with the same directory. */
export function mergeRepositories(profile: RepositoryConfig[], session: RepositoryConfig[] | null | undefined): RepositoryConfig[] {
  if (!session?.length) return profile;
  const paths = new Set(session.map((r, i) => checkoutPath(r, `repositories[${i}]`)));
  return [...profile.filter((r, i) => !paths.has(checkoutPath(r, `repositories[${i}]`))), ...session];
}

/** The URL as logs and events show it (never credentials: an ssh user name is kept). */
export function displayUrl(raw: string): string {
  try {
    return parseRepoUrl(raw, "url").url;
  } catch {
    return "(invalid URL)";
  }
}
