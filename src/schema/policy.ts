/**
 * The operator's policy: what each non-admin user may consume. The effective record (the
 * operator's settings with the user's overrides), the patch of /admin/config and of a user's
 * overrides, and the use GET /v1/me reports (src/schema/me.ts).
 */
import type { TNull, TUnion } from "@sinclair/typebox";
import { closed, type Static, T } from "./common.ts";

export const POLICY_FIELDS = {
  max_profiles: T.Integer({ minimum: 0, maximum: 1_000_000, description: "Profiles per user" }),
  max_running_workspaces: T.Integer({ minimum: 0, maximum: 100_000, description: "Running workspaces per user, across all their profiles" }),
  max_memory_mb: T.Integer({ minimum: 64, maximum: 262_144, description: "Ceiling of a profile's limits.memory_mb" }),
  max_cpus: T.Number({ minimum: 0.1, maximum: 64, description: "Ceiling of a profile's limits.cpus" }),
  max_pids: T.Integer({ minimum: 32, maximum: 65_536, description: "Ceiling of a profile's limits.pids" }),
  max_concurrency: T.Integer({ minimum: 1, maximum: 1000, description: "Ceiling of a profile's limits.max_concurrency" }),
  max_turns: T.Integer({ minimum: 1, maximum: 1000, description: "Ceiling of a profile's and a task's max_turns" }),
  max_budget_usd: T.Number({ minimum: 0.01, maximum: 10_000, description: "Ceiling of a profile's and a task's max_budget_usd" }),
  allowed_images: T.Array(T.String({ minLength: 1, maxLength: 512 }), { maxItems: 100, description: "Image patterns profiles may use (* matches anything); empty: the server's workspace image only" }),
  allow_bridge_network: T.Boolean({ description: "Whether profiles may use network: bridge" }),
  monthly_spend_usd: T.Number({ minimum: 0, maximum: 1_000_000, description: "Monthly spend on the server's own provider keys (0: no cap)" }),
  workspace_disk_mb: T.Integer({ minimum: 0, maximum: 10_000_000, description: "Disk cap per workspace volume (0: no cap)" }),
  min_schedule_interval: T.Integer({ minimum: 1, maximum: 86_400, description: "Shortest time between two runs of a playbook's schedule, in seconds" }),
};
export type PolicyKey = keyof typeof POLICY_FIELDS;

export const Policy = T.Object(POLICY_FIELDS, { title: "Policy" });
export type Policy = Static<typeof Policy>;

/** Any subset of the fields (PATCH /admin/config `policy`, a user's overrides). */
export const PolicyPatch = closed(T.Partial(T.Object(POLICY_FIELDS), { title: "PolicyPatch", additionalProperties: false }));
export type PolicyPatch = Static<typeof PolicyPatch>;

export const Usage = T.Object(
  {
    profiles: T.Integer(),
    running_workspaces: T.Integer(),
    month_spend_usd: T.Number({ description: "Spend on the server's own provider keys since the 1st of this month (UTC)" }),
  },
  { title: "Usage" },
);
export type Usage = Static<typeof Usage>;

/** A user's overrides as PATCH /admin/users/:id takes them: a field set to null goes back to the operator's setting. */
export const PolicyOverridePatch = closed(
  T.Partial(T.Object(Object.fromEntries(Object.entries(POLICY_FIELDS).map(([k, v]) => [k, T.Union([v, T.Null()])])) as unknown as { [K in PolicyKey]: TUnion<[(typeof POLICY_FIELDS)[K], TNull]> }), {
    title: "PolicyOverridePatch",
    additionalProperties: false,
  }),
);
