/**
 * The operator's policy: what each user may consume, so sign-up can be opened safely. The
 * operator's settings (flags / environment / config file, changed live with PATCH /admin/config)
 * with per-user overrides (PATCH /admin/users/:id `policy`). Admins are exempt from everything but
 * the disk cap. Checked where the consumption starts: a profile saved (ceilings, image, network,
 * count), a task submitted (its limits, the monthly spend), a workspace reserved (running ones per
 * user), a model request made (the monthly spend), a playbook's schedule saved (how often it may
 * run; src/playbooks/); and watched for disk (src/workspaces/disk.ts).
 * Violations answer the interface's codes and name the limit in `details.limit`.
 */
import { and, count, eq, gte, inArray, sql } from "drizzle-orm";
import { glob } from "../lib/glob.ts";
import type { Config, PolicyDefaults } from "../config.ts";
import { type DB, first } from "../db/client.ts";
import { type PolicyOverrides, type UserRow, type WorkspaceSpec } from "../db/schema.ts";
import { profiles, usageTables, workspaces } from "../db/tables.ts";
import { AppError, Errors } from "../lib/errors.ts";
import { formatUsd, roundUsd, usdReached } from "../lib/usd.ts";
import type { Policy, PolicyKey, Usage } from "../schema/policy.ts";

/** Each policy field, its Config key and its option (for the precedence rule of RuntimeConfig). */
export const POLICY_OPTIONS: Record<PolicyKey, { key: keyof PolicyDefaults; flag: string }> = {
  max_profiles: { key: "maxProfiles", flag: "max-profiles-per-user" },
  max_running_workspaces: { key: "maxRunningWorkspaces", flag: "max-running-workspaces-per-user" },
  max_memory_mb: { key: "maxMemoryMb", flag: "max-memory-mb" },
  max_cpus: { key: "maxCpus", flag: "max-cpus" },
  max_pids: { key: "maxPids", flag: "max-pids" },
  max_concurrency: { key: "maxConcurrency", flag: "max-profile-concurrency" },
  max_turns: { key: "maxTurns", flag: "max-turns" },
  max_budget_usd: { key: "maxBudgetUsd", flag: "max-task-budget-usd" },
  allowed_images: { key: "allowedImages", flag: "allowed-images" },
  allow_bridge_network: { key: "allowBridgeNetwork", flag: "allow-bridge-network" },
  monthly_spend_usd: { key: "monthlySpendUsd", flag: "monthly-spend-usd" },
  workspace_disk_mb: { key: "workspaceDiskMb", flag: "workspace-disk-mb" },
  min_schedule_interval: { key: "minScheduleIntervalSec", flag: "min-schedule-interval" },
};
export const POLICY_KEYS = Object.keys(POLICY_OPTIONS) as PolicyKey[];

/** Each limit of a profile and the policy field that is its ceiling. */
const CEILINGS = [
  ["memory_mb", "max_memory_mb"],
  ["cpus", "max_cpus"],
  ["pids", "max_pids"],
  ["max_concurrency", "max_concurrency"],
  ["max_turns", "max_turns"],
  ["max_budget_usd", "max_budget_usd"],
] as const satisfies readonly (readonly [keyof ProfileShape["limits"], PolicyKey])[];

/** What of a profile the policy looks at. */
interface ProfileShape {
  image: string;
  network: string;
  warm_pool?: number;
  limits: { memory_mb: number; cpus: number; pids: number; max_concurrency: number; max_turns: number; max_budget_usd: number };
}

/** The operator's settings as the API shows them. */
export function policyOf(p: PolicyDefaults): Policy {
  const out = {} as Record<PolicyKey, unknown>;
  for (const k of POLICY_KEYS) out[k] = p[POLICY_OPTIONS[k].key];
  return out as Policy;
}

/** Writes API-shaped settings into the shared config (read at use time everywhere). */
export function applyPolicy(target: PolicyDefaults, p: Partial<Policy>) {
  for (const k of POLICY_KEYS) if (p[k] !== undefined) (target as unknown as Record<string, unknown>)[POLICY_OPTIONS[k].key] = p[k];
}

export interface EffectivePolicy extends Policy {
  exempt: boolean;
}

export class Policies {
  constructor(
    private d: {
      config: Pick<Config, "policy" | "workspaceImage"> & Partial<Pick<Config, "maxWarmPool">>;
      db: DB;
      users: { byId(id: string): UserRow | undefined | Promise<UserRow | undefined> };
      now: () => number;
    },
  ) {}

  /** The user's policy: the operator's settings with the user's overrides; admins are exempt. */
  async forUser(userId: string): Promise<EffectivePolicy> {
    const user = await this.d.users.byId(userId);
    const base = policyOf(this.d.config.policy);
    const overrides: PolicyOverrides = user?.policy ?? {};
    return { ...base, ...overrides, exempt: user?.role === "admin" };
  }

  /** The images a policy allows (the server's workspace image when it names none). */
  imageAllowed(p: Policy, image: string): boolean {
    const patterns = p.allowed_images.length ? p.allowed_images : [this.d.config.workspaceImage];
    return patterns.some((pat) => glob(pat).test(image));
  }

  /** The ceilings of a profile's limits for the user (null: an admin, exempt). */
  async limitCeilings(userId: string): Promise<ProfileShape["limits"] | null> {
    const p = await this.forUser(userId);
    if (p.exempt) return null;
    return Object.fromEntries(CEILINGS.map(([field, limit]) => [field, p[limit]])) as ProfileShape["limits"];
  }

  /** A profile about to be saved: its limits within the ceilings, an allowed image and network; a new one within the count. */
  async checkProfile(userId: string, f: ProfileShape, isNew: boolean, before?: ProfileShape): Promise<void> {
    const p = await this.forUser(userId);
    // A change is held to the policy in what it changes: a field kept as it was saved (before a
    // ceiling was lowered) does not block editing another; its containers are clamped (workspaces).
    const kept = (get: (x: ProfileShape) => unknown) => before !== undefined && get(before) === get(f);
    if (p.exempt) return;
    if (isNew) {
      const n = await this.profileCount(userId);
      if (n >= p.max_profiles) {
        throw Errors.validation("profile", `You have ${n} profiles, the most this server allows (max_profiles ${p.max_profiles}): delete one first`, { limit: "max_profiles", max: p.max_profiles });
      }
    }
    for (const [field, limit] of CEILINGS) {
      if (kept((x) => x.limits[field])) continue;
      const max = p[limit] as number;
      if (f.limits[field] > max) throw Errors.validation(`limits.${field}`, `limits.${field} must be at most ${max} on this server (${limit})`, { limit, max });
    }
    if (!kept((x) => x.image) && !this.imageAllowed(p, f.image)) {
      const allowed = p.allowed_images.length ? p.allowed_images.join(", ") : this.d.config.workspaceImage;
      throw Errors.validation("image", `image ${f.image} is not allowed on this server (allowed_images: ${allowed})`, { limit: "allowed_images", allowed: p.allowed_images.length ? p.allowed_images : [this.d.config.workspaceImage] });
    }
    const maxPool = this.d.config.maxWarmPool;
    if (maxPool !== undefined && (f.warm_pool ?? 0) > maxPool && !kept((x) => x.warm_pool ?? 0)) {
      throw Errors.validation("warm_pool", `warm_pool must be at most ${maxPool} on this server (max_warm_pool)`, { limit: "max_warm_pool", max: maxPool });
    }
    if (f.network === "bridge" && !p.allow_bridge_network && !kept((x) => x.network)) {
      throw Errors.validation("network", 'network "bridge" is not allowed on this server (allow_bridge_network is off): workspaces run without a network', { limit: "allow_bridge_network" });
    }
  }

  /** A task about to be submitted: explicit limits within the ceilings; the monthly spend when the server pays. */
  async checkSubmit(userId: string, explicit: { max_turns?: number; max_budget_usd?: number }, serverPaid: boolean): Promise<void> {
    const p = await this.forUser(userId);
    if (p.exempt) return;
    this.withinCeilings(p, explicit);
    if (serverPaid) await this.assertSpend(userId, p);
  }

  /** Task limits about to be saved (a playbook's): within the ceilings, as a task's would be checked when it runs. */
  async checkTaskLimits(userId: string, explicit: { max_turns?: number | null; max_budget_usd?: number | null }): Promise<void> {
    const p = await this.forUser(userId);
    if (p.exempt) return;
    this.withinCeilings(p, { max_turns: explicit.max_turns ?? undefined, max_budget_usd: explicit.max_budget_usd ?? undefined });
  }

  private withinCeilings(p: { max_turns: number; max_budget_usd: number }, explicit: { max_turns?: number; max_budget_usd?: number }): void {
    if (explicit.max_turns !== undefined && explicit.max_turns > p.max_turns) {
      throw Errors.validation("max_turns", `max_turns must be at most ${p.max_turns} on this server (max_turns)`, { limit: "max_turns", max: p.max_turns });
    }
    if (explicit.max_budget_usd !== undefined && explicit.max_budget_usd > p.max_budget_usd) {
      throw Errors.validation("max_budget_usd", `max_budget_usd must be at most ${p.max_budget_usd} on this server (max_budget_usd)`, { limit: "max_budget_usd", max: p.max_budget_usd });
    }
  }

  /** The task limits in effect: the profile's (or the request's), within the ceilings. */
  async clampTask(userId: string, t: { maxTurns: number; maxBudgetUsd: number }): Promise<{ maxTurns: number; maxBudgetUsd: number }> {
    const p = await this.forUser(userId);
    if (p.exempt) return t;
    return { maxTurns: Math.min(t.maxTurns, p.max_turns), maxBudgetUsd: Math.min(t.maxBudgetUsd, p.max_budget_usd) };
  }

  /** A container's shape within the ceilings (a profile saved before the operator lowered them). */
  async clampSpec(userId: string, s: WorkspaceSpec): Promise<WorkspaceSpec> {
    const p = await this.forUser(userId);
    if (p.exempt) return s;
    return { network: s.network === "bridge" && !p.allow_bridge_network ? "none" : s.network, memory_mb: Math.min(s.memory_mb, p.max_memory_mb), cpus: Math.min(s.cpus, p.max_cpus), pids: Math.min(s.pids, p.max_pids) };
  }

  /**
   * The shortest time between two runs of the user's playbook schedules, in seconds (null: an
   * admin, exempt). Checked when a schedule is saved; a schedule saved under a lower floor is
   * thinned to it when it fires (src/playbooks/service.ts fireDue).
   */
  async scheduleFloorSec(userId: string): Promise<number | null> {
    const p = await this.forUser(userId);
    return p.exempt ? null : p.min_schedule_interval;
  }

  /** Running workspaces the user may have (null: no limit). */
  async runningLimit(userId: string): Promise<number | null> {
    const p = await this.forUser(userId);
    return p.exempt ? null : p.max_running_workspaces;
  }

  /** The disk cap of the user's workspaces in bytes (null: none); it binds admins too. */
  async diskCapBytes(userId: string): Promise<number | null> {
    const mb = (await this.forUser(userId)).workspace_disk_mb;
    return mb > 0 ? mb * 1024 * 1024 : null;
  }

  private monthStart(): number {
    const d = new Date(this.d.now());
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  }

  private async profileCount(userId: string): Promise<number> {
    return (await first(this.d.db.select({ n: count() }).from(profiles).where(eq(profiles.user_id, userId))))?.n ?? 0;
  }

  private async runningCount(userId: string): Promise<number> {
    const running = and(eq(workspaces.user_id, userId), inArray(workspaces.status, ["starting", "running"]));
    return (await first(this.d.db.select({ n: count() }).from(workspaces).where(running)))?.n ?? 0;
  }

  /** The cost of the user's server-paid tasks created this month (UTC), deleted sessions' included. */
  async monthSpend(userId: string): Promise<number> {
    const since = this.monthStart();
    let total = 0;
    for (const t of usageTables()) {
      const usd = sql<number | null>`sum(${t.cost_usd})`.mapWith(Number);
      const row = await first(this.d.db.select({ usd }).from(t).where(and(eq(t.user_id, userId), eq(t.server_paid, true), gte(t.created_at, since))));
      total += row?.usd ?? 0;
    }
    return roundUsd(total);
  }

  /** 402 BUDGET_EXCEEDED when the user's monthly spend on the server's keys has reached the cap. */
  async assertSpend(userId: string, policy?: EffectivePolicy): Promise<void> {
    const p = policy ?? (await this.forUser(userId));
    if (p.exempt || p.monthly_spend_usd <= 0) return;
    const spent = await this.monthSpend(userId);
    if (usdReached(spent, p.monthly_spend_usd)) {
      throw new AppError(
        "BUDGET_EXCEEDED",
        `This month's spend on the server's model keys ($${formatUsd(spent)}) has reached your cap of $${formatUsd(p.monthly_spend_usd)} (monthly_spend_usd): use a profile with your own key (model.api_key_secret), or ask the operator`,
        { limit: "monthly_spend_usd", max: p.monthly_spend_usd, spent },
      );
    }
  }

  /** GET /v1/me's limits and usage. */
  async me(userId: string): Promise<{ limits: EffectivePolicy; usage: Usage }> {
    return { limits: await this.forUser(userId), usage: await this.usage(userId) };
  }

  async usage(userId: string): Promise<Usage> {
    return { profiles: await this.profileCount(userId), running_workspaces: await this.runningCount(userId), month_spend_usd: await this.monthSpend(userId) };
  }
}
