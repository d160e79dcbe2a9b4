/**
 * The settings an operator changes at run time through `PATCH /admin/config`: the rate limit,
 * the default per-profile concurrency, who may sign up and the policy (src/admin/policy.ts). They are persisted in `settings`
 * (key `runtime_config`, only the fields ever patched) and applied live by writing them into the
 * shared `Config` object (every module reads `config.rateLimit`, `config.defaultMaxConcurrency`
 * and `config.signup` at use time) and reconfiguring the rate limiter.
 *
 * Precedence at start, per field: an option set explicitly (flag, RUNCELL_* env or the data-dir
 * file) wins over the persisted value, with a warning naming both; otherwise the persisted value
 * wins over the built-in default. A PATCH always applies at once and is persisted, so it lasts
 * across restarts unless the operator also pins that option explicitly.
 */
import type { Config } from "../config.ts";
import type { RateLimiter } from "../lib/ratelimit.ts";
import type { Settings } from "../db/settings.ts";
import type { Logger } from "../log.ts";
import type { RuntimePatch, RuntimeSettings } from "../schema/admin.ts";
import { applyPolicy, POLICY_KEYS, POLICY_OPTIONS, policyOf } from "./policy.ts";
import type { AuditOrigin, AuditSink } from "../schema/audit.ts";

export type { RuntimePatch, RuntimeSettings };

const KEY = "runtime_config";

/** The dotted paths of a patch's leaves ("rate_limit.burst"), and the value at such a path. */
const leafPaths = (o: object, prefix = ""): string[] =>
  Object.entries(o).flatMap(([k, v]) => (v === undefined ? [] : v !== null && typeof v === "object" && !Array.isArray(v) ? leafPaths(v, `${prefix}${k}.`) : [prefix + k]));
const valueAt = (o: unknown, path: string): unknown => path.split(".").reduce<unknown>((v, k) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);

export class RuntimeConfig {
  /** Called after every change (start and PATCH) with the effective settings. */
  onChange: ((s: RuntimeSettings) => void)[] = [];
  /** Called with each PATCH applied here, once persisted (the app announces it to the other replicas). */
  onPatched: ((p: RuntimePatch) => void)[] = [];

  constructor(
    private config: Config,
    private settings: Settings,
    private limiter: RateLimiter,
    private log: Logger,
    private audit?: AuditSink,
  ) {}

  get(): RuntimeSettings {
    const c = this.config;
    return { rate_limit: { per_minute: c.rateLimit.perMinute, burst: c.rateLimit.burst }, default_max_concurrency: c.defaultMaxConcurrency, signup: c.signup, policy: policyOf(c.policy) };
  }

  private async persisted(): Promise<RuntimePatch> {
    const v = await this.settings.get<RuntimePatch>(KEY);
    return v && typeof v === "object" ? v : {};
  }

  /** At start (before anything is served): applies the settings saved by earlier PATCHes, unless explicit configuration overrides them. */
  async applyAtStart(): Promise<void> {
    const saved = await this.persisted();
    const src = this.config.sources ?? {};
    const effective = this.get();
    const pick = <T>(field: string, flag: string, current: T, stored: T | undefined): T => {
      if (stored === undefined || stored === current) return current;
      if (src[flag]) {
        this.log.warn("a setting saved with PATCH /admin/config is overridden by explicit configuration", {
          setting: field,
          saved: stored,
          effective: current,
          set_by: src[flag],
        });
        return current;
      }
      return stored;
    };
    effective.rate_limit.per_minute = pick("rate_limit.per_minute", "rate-limit-per-minute", effective.rate_limit.per_minute, saved.rate_limit?.per_minute);
    effective.rate_limit.burst = pick("rate_limit.burst", "rate-limit-burst", effective.rate_limit.burst, saved.rate_limit?.burst);
    effective.default_max_concurrency = pick("default_max_concurrency", "default-max-concurrency", effective.default_max_concurrency, saved.default_max_concurrency);
    effective.signup = pick("signup", "signup", effective.signup, saved.signup);
    for (const k of POLICY_KEYS) {
      (effective.policy as Record<string, unknown>)[k] = pick(`policy.${k}`, POLICY_OPTIONS[k].flag, effective.policy[k], saved.policy?.[k]);
    }
    this.apply(effective);
  }

  private apply(s: RuntimeSettings) {
    this.config.rateLimit = { perMinute: s.rate_limit.per_minute, burst: s.rate_limit.burst };
    this.config.defaultMaxConcurrency = s.default_max_concurrency;
    this.config.signup = s.signup;
    applyPolicy(this.config.policy, s.policy);
    this.limiter.configure(s.rate_limit.per_minute, s.rate_limit.burst);
    for (const f of this.onChange) f(this.get());
  }

  /**
   * Applies a (validated) patch live and persists it. Returns the effective settings. Audited as
   * admin.config_changed with each field sent, `{from, to}` (actor: the operator unless `origin` says).
   */
  async patch(p: RuntimePatch, origin: AuditOrigin = {}): Promise<RuntimeSettings> {
    const before = this.get();
    const next = this.patched(p);

    const saved = await this.persisted();
    const merged: RuntimePatch = { ...saved, ...p, rate_limit: { ...saved.rate_limit, ...p.rate_limit }, policy: { ...saved.policy, ...p.policy } };
    if (!merged.rate_limit || Object.keys(merged.rate_limit).length === 0) delete merged.rate_limit;
    if (!merged.policy || Object.keys(merged.policy).length === 0) delete merged.policy;
    await this.settings.set(KEY, merged);
    this.apply(next);
    this.log.info("runtime configuration changed", { changed: p, effective: this.get() });
    const after = this.get();
    // Only what changed is recorded (a PATCH repeating the current values, or an empty one, writes no row).
    const changes = Object.fromEntries(
      leafPaths(p)
        .map((path) => [path, { from: valueAt(before, path) ?? null, to: valueAt(after, path) ?? null }] as const)
        .filter(([, c]) => JSON.stringify(c.from) !== JSON.stringify(c.to)),
    );
    if (Object.keys(changes).length) await this.audit?.record({ ...origin, actor: origin.actor ?? "admin", action: "admin.config_changed", details: { changes } });
    for (const f of this.onPatched) f(p);
    return after;
  }

  /**
   * A PATCH another replica applied and persisted: applied here live as well (the same fields, the
   * same precedence as on that replica), neither stored nor audited again.
   */
  applyPeer(p: RuntimePatch): void {
    this.apply(this.patched(p));
    this.log.info("runtime configuration changed by another replica", { changed: p, effective: this.get() });
  }

  /**
   * Re-reads what PATCHes saved and applies it if it differs from what runs here (replicas: an
   * announcement this replica missed — its LISTEN connection was down, or the sender crashed
   * between saving and announcing). Whether anything changed.
   */
  async resync(): Promise<boolean> {
    const next = this.patched(await this.persisted());
    if (JSON.stringify(next) === JSON.stringify(this.get())) return false;
    this.apply(next);
    this.log.info("runtime configuration re-read: another replica had changed it", { effective: this.get() });
    return true;
  }

  /** The effective settings with a patch's fields over them. */
  private patched(p: RuntimePatch): RuntimeSettings {
    const next = this.get();
    if (p.rate_limit?.per_minute !== undefined) next.rate_limit.per_minute = p.rate_limit.per_minute;
    if (p.rate_limit?.burst !== undefined) next.rate_limit.burst = p.rate_limit.burst;
    if (p.default_max_concurrency !== undefined) next.default_max_concurrency = p.default_max_concurrency;
    if (p.signup !== undefined) next.signup = p.signup;
    if (p.policy) next.policy = { ...next.policy, ...p.policy };
    return next;
  }
}
