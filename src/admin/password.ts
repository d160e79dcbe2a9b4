/**
 * The operator's admin password: stored as an argon2id hash in `settings`, set by
 * `runcell admin set-password`, `--admin-password-file` or RUNCELL_ADMIN_PASSWORD at start.
 * Verified with argon2 (constant time); a successful verification is cached for 60 s under the
 * SHA-256 of the stored hash and the presented password, so /admin/* does not pay argon2 on every
 * call and a password changed by the CLI (another process) stops working at once. Failures are
 * throttled per client IP by the guard (src/admin/guard.ts) through `throttle`.
 */
import { readFileSync, statSync } from "node:fs";
import { adminKeys, type LoginThrottle } from "../auth/throttle.ts";
import { type Config, ConfigError } from "../config.ts";
import type { Logger } from "../log.ts";
import { hashPassword, verifyPassword } from "../auth/passwords.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { sha256Hex } from "../lib/crypto.ts";
import { isDenied, isMissing, readableFix, unreadableReason } from "../lib/file-access.ts";
import type { Settings } from "../db/settings.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";

const KEY = "admin_password_hash";
const CACHE_MS = 60_000;
export const ADMIN_PASSWORD_MIN = 12;
const ADMIN_PASSWORD_MAX = 256;

/**
 * What makes a password unusable as the admin password, or null. It travels in an Authorization
 * header, so it must be what a header carries unchanged: visible ASCII and inner spaces (HTTP
 * strips spaces at the edges of a header value, and Bun reads header bytes as Latin-1, so any
 * other character arrives changed — every /admin call would be 401).
 */
export function adminPasswordProblem(password: string): string | null {
  if (password.length < ADMIN_PASSWORD_MIN) return `the admin password must be at least ${ADMIN_PASSWORD_MIN} characters`;
  if (password.length > ADMIN_PASSWORD_MAX) return `the admin password must be at most ${ADMIN_PASSWORD_MAX} characters`;
  if (password !== password.trim()) return "the admin password must not begin or end with whitespace (HTTP drops it from the Authorization header)";
  if (!/^[\x20-\x7e]+$/.test(password)) return "the admin password must be printable ASCII (letters, digits, punctuation, inner spaces): it is sent in an HTTP header, which carries nothing else unchanged";
  return null;
}

export class AdminPassword {
  private verified = new Map<string, number>();

  constructor(
    private settings: Settings,
    private now: () => number,
    /** Failed admin-password attempts, per client IP (the guard uses it). */
    readonly throttle?: LoginThrottle,
    private audit?: AuditSink,
  ) {}

  async isSet(): Promise<boolean> {
    return !!(await this.settings.get<string>(KEY));
  }

  /** Audited as admin.password_changed (actor: the operator unless `origin` says; `source`: where it came from). */
  async set(password: string, origin: AuditOrigin & { source?: string } = {}) {
    const problem = adminPasswordProblem(password);
    if (problem) throw Errors.validation("password", problem);
    await this.settings.set(KEY, await hashPassword(password));
    this.verified.clear();
    const { source, ...by } = origin;
    await this.audit?.record({ ...by, actor: by.actor ?? "admin", action: "admin.password_changed", details: source ? { source } : undefined });
  }

  /** Stores `password` unless it is already the current one (a restart with the same file). */
  async ensure(password: string, origin: AuditOrigin & { source?: string } = {}): Promise<"unchanged" | "set"> {
    const current = await this.settings.get<string>(KEY);
    if (current && (await verifyPassword(current, password))) return "unchanged";
    await this.set(password, origin);
    return "set";
  }

  /**
   * The /admin/* and /metrics credential check: 401 without a password set (saying how to set
   * one), without a presented one, or with a wrong one; wrong ones are throttled per client IP
   * like sign-in (429 with Retry-After after 5).
   */
  async authorize(presented: string | null, ip: string, client: () => { path?: string; userAgent?: string | null } = () => ({})): Promise<void> {
    if (!(await this.isSet())) throw Errors.unauthorized("No admin password is set: run `runcell admin set-password` or start with --admin-password-file");
    if (!presented) throw Errors.unauthorized("Missing credentials: send Authorization: Bearer <admin password>");
    const check = async () => {
      const ok = await this.verify(presented);
      return { ok, value: ok };
    };
    // A wrong password (a user's own API token included) and a throttled one leave an audit row,
    // as a refused sign-in does: the operator sees who tried the admin surface, and from where.
    // Never the presented value. (No credential at all is a 401 without a row: nothing was tried.)
    const failed = (reason: "wrong_password" | "throttled", meta = client()) =>
      this.audit?.record({
        action: "admin.sign_in_failed",
        actor: "anonymous",
        ip,
        details: { reason, ...(meta.path ? { path: meta.path.slice(0, 200) } : {}), ...(meta.userAgent ? { user_agent: meta.userAgent.slice(0, 200) } : {}) },
      });
    let ok: boolean;
    try {
      ok = this.throttle ? await this.throttle.attempt(adminKeys(ip), check, "admin password") : (await check()).value;
    } catch (e) {
      if (e instanceof AppError && e.code === "RATE_LIMITED") await failed("throttled");
      throw e;
    }
    if (!ok) {
      await failed("wrong_password");
      throw Errors.unauthorized("Invalid admin password");
    }
  }

  /**
   * At start: stores the password from --admin-password-file or RUNCELL_ADMIN_PASSWORD (unless it
   * is already the current one); warns when none is set anywhere. A bad one is a ConfigError.
   */
  async applyConfigured(config: Config, log: Logger): Promise<void> {
    let configured;
    try {
      configured = configuredAdminPassword(config, log);
      if (!configured) {
        if (!(await this.isSet())) log.warn("no admin password is set: /admin/* answers 401 until `runcell admin set-password` or --admin-password-file");
        return;
      }
      if ((await this.ensure(configured.password, { actor: "system", source: configured.source })) === "set") log.info("admin password stored", { source: configured.source });
    } catch (e) {
      const source = configured?.source ?? (config.adminPasswordFile ? `--admin-password-file ${config.adminPasswordFile}` : "RUNCELL_ADMIN_PASSWORD");
      throw new ConfigError(`admin password from ${source}: ${(e as Error).message}`);
    }
  }

  async verify(presented: string): Promise<boolean> {
    const current = await this.settings.get<string>(KEY);
    if (!current) return false;
    const key = sha256Hex(current + "\n" + presented);
    const until = this.verified.get(key);
    if (until && until > this.now()) return true;
    const ok = await verifyPassword(current, presented);
    if (ok) {
      if (this.verified.size > 100) this.verified.clear();
      this.verified.set(key, this.now() + CACHE_MS);
    }
    return ok;
  }
}

/**
 * The configured admin password checked before the data dir is touched (serve calls it before any
 * migration): an unreadable file or one too short is a ConfigError (exit 2) with nothing changed.
 */
export function checkConfiguredAdminPassword(config: Config): void {
  let configured: ReturnType<typeof configuredAdminPassword> = null;
  try {
    configured = configuredAdminPassword(config);
    const problem = configured ? adminPasswordProblem(configured.password) : null;
    if (problem) throw new Error(problem);
  } catch (e) {
    const source = configured?.source ?? (config.adminPasswordFile ? `--admin-password-file ${config.adminPasswordFile}` : "RUNCELL_ADMIN_PASSWORD");
    throw new ConfigError(`admin password from ${source}: ${(e as Error).message}`);
  }
}

/** The admin password to store at start: --admin-password-file wins over RUNCELL_ADMIN_PASSWORD. */
export function configuredAdminPassword(config: Config, log?: Logger): { password: string; source: string } | null {
  if (config.adminPasswordFile) {
    const file = config.adminPasswordFile;
    let password: string;
    try {
      password = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (e) {
      // (The caller names the file.)
      if (isMissing(e)) throw new Error("the file does not exist");
      throw new Error(`the file ${unreadableReason(e)}${isDenied(e) ? `: ${readableFix(file)}` : ""}`);
    }
    try {
      if ((statSync(file).mode & 0o077) !== 0) log?.warn("the admin password file is readable by other users: chmod 600 it", { file });
    } catch {
      // Unreadable metadata is not worth failing the start for.
    }
    return { password, source: "--admin-password-file" };
  }
  if (config.adminPassword) return { password: config.adminPassword, source: "RUNCELL_ADMIN_PASSWORD" };
  return null;
}
