/** GET /v1/me: the caller, the limits the operator's policy sets for them, and their use of it. */
import { POLICY_FIELDS, Usage } from "./policy.ts";
import { type Static, T } from "./common.ts";
import { PublicUser } from "./user.ts";

export const Me = T.Object(
  {
    ...PublicUser.properties,
    limits: T.Object({ ...POLICY_FIELDS, exempt: T.Boolean({ description: "Admins are exempt from the policy (but the disk cap)" }) }),
    usage: Usage,
  },
  { title: "Me" },
);
export type Me = Static<typeof Me>;
