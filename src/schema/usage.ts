/** GET /v1/usage: tokens and cost of the caller's tasks per UTC day or per profile, with totals. */
import { CostUsd, Nullable, OneOf, type Static, T, Timestamp } from "./common.ts";

export const USAGE_GROUPS = ["day", "profile"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];
/** The longest range one request may cover. */
export const USAGE_MAX_DAYS = 366;

const figures = {
  tasks: T.Integer({ description: "Tasks created in the bucket" }),
  input_tokens: T.Integer(),
  output_tokens: T.Integer(),
  cost_usd: CostUsd,
};

export const UsageBucket = T.Object(
  {
    key: T.String({ description: "The UTC day (YYYY-MM-DD) or the profile id" }),
    profile_name: Nullable(T.String(), { description: "group_by=profile: the profile's name (null once deleted)" }),
    ...figures,
  },
  { title: "UsageBucket" },
);

export const UsageReport = T.Object(
  {
    from: Timestamp,
    to: Timestamp,
    group_by: OneOf(USAGE_GROUPS),
    data: T.Array(UsageBucket, { description: "day: every day of the range in order, zeros included; profile: profiles with tasks in the range, most expensive first" }),
    totals: T.Object(figures),
  },
  { title: "UsageReport" },
);
export type UsageReport = Static<typeof UsageReport>;
export type UsageBucket = Static<typeof UsageBucket>;
