/** The operator's records: run-time settings (/admin/config) and counts (/admin/stats). */
import { NOTIFICATION_STATUSES, TASK_STATUSES, WORKSPACE_STATUSES } from "../db/schema.ts";
import { Body, OneOf, type Static, T } from "./common.ts";
import { Policy, PolicyPatch } from "./policy.ts";

export const SIGNUP_MODES = ["closed", "open"] as const;
const Signup = OneOf(SIGNUP_MODES, { description: "closed: only the operator creates accounts; open: anyone may sign up as user" });

export const RuntimeSettings = T.Object(
  {
    rate_limit: T.Object({ per_minute: T.Integer(), burst: T.Integer() }),
    default_max_concurrency: T.Integer(),
    signup: Signup,
    policy: Policy,
  },
  { title: "RuntimeSettings" },
);
export type RuntimeSettings = Static<typeof RuntimeSettings>;

export const RuntimePatch = Body({
  rate_limit: T.Optional(
    T.Object(
      {
        per_minute: T.Optional(T.Integer({ minimum: 1, maximum: 1_000_000_000, description: "Token-bucket refill per caller per minute" })),
        burst: T.Optional(T.Integer({ minimum: 1, maximum: 1_000_000_000, description: "Token-bucket size per caller" })),
      },
      { additionalProperties: false },
    ),
  ),
  default_max_concurrency: T.Optional(T.Integer({ minimum: 1, maximum: 1000, description: "Running workspaces per profile unless the profile says otherwise" })),
  signup: T.Optional(Signup),
  policy: T.Optional(PolicyPatch),
});
export type RuntimePatch = Static<typeof RuntimePatch>;

const byStatus = <const V extends readonly string[]>(statuses: V) =>
  T.Object({ total: T.Integer(), ...(Object.fromEntries(statuses.map((s) => [s, T.Integer()])) as Record<V[number], ReturnType<typeof T.Integer>>) });

export const StatsRecord = T.Object(
  {
    version: T.String(),
    commit: T.String(),
    started_at: T.String(),
    uptime_seconds: T.Integer(),
    users: T.Object({ total: T.Integer(), admins: T.Integer(), disabled: T.Integer() }),
    login_sessions: T.Object({ active: T.Integer() }),
    api_tokens: T.Object({ total: T.Integer() }),
    profiles: T.Object({ total: T.Integer() }),
    sessions: T.Object({ total: T.Integer() }),
    tasks: byStatus(TASK_STATUSES),
    workspaces: byStatus(WORKSPACE_STATUSES),
    notifications: byStatus(NOTIFICATION_STATUSES),
  },
  { title: "Stats" },
);
export type StatsRecord = Static<typeof StatsRecord>;
