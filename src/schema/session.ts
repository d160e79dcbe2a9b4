/** Agent sessions: the conversation record, and the body that starts one. */
import { sessions } from "../db/schema.ts";
import { Body, CostUsd, Nullable, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

export const SESSION_STATES = ["active", "idle"] as const;

export const SessionRecord = T.Object(
  {
    ...recordColumns(sessions, ["id", "profile_id"]),
    container_id: Nullable(T.String(), { description: "ctr_… of its workspace, null when it has none" }),
    status: OneOf(SESSION_STATES, { description: "active: a task is queued, running or waiting for an answer" }),
    ...recordColumns(sessions, ["title", "input_tokens", "output_tokens"]),
    cost_usd: CostUsd,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: "Session" },
);
export type SessionRecord = Static<typeof SessionRecord>;

export const SessionCreateBody = Body({ profile_id: T.String() });

/** A branch name git accepts (and no option-like or path-escaping one); the GitPush tool's input is held to it too (src/git/service.ts). */
/**
 * A branch name `git check-ref-format --branch` accepts, in the characters runcell allows: no
 * component that starts with "." or ends with ".lock", no "..", "//", trailing "/" or ".", not
 * "HEAD", and not a full ref ("refs/…" would become refs/heads/refs/…).
 */
export const BRANCH_PATTERN = "^(?!-)(?!\\.)(?!HEAD$)(?!refs/)(?!.*\\.\\.)(?!.*//)(?!.*/\\.)(?!.*\\.lock(?:/|$))(?!.*/$)(?!.*\\.$)[A-Za-z0-9._/-]{1,255}$";
const BranchName = T.String({ minLength: 1, maxLength: 255, pattern: BRANCH_PATTERN, "x-hint": "a git branch name" });

/** POST /v1/sessions/:id/git/push: which repository (its directory) and branch to push. */
export const GitPushBody = Body(
  {
    path: T.String({ minLength: 1, maxLength: 4096, description: "The repository's directory in the workspace, e.g. /workspace/app (one of the session's repositories)" }),
    branch: T.Optional({ ...BranchName, description: "Local branch to push (default: the checked-out branch)" }),
    remote_branch: T.Optional({ ...BranchName, description: "Branch on the remote (default: the same name)" }),
  },
  { title: "GitPush" },
);

export const GitPushResult = T.Object(
  {
    repository: T.String({ description: "The remote's URL (no credentials)" }),
    path: T.String(),
    branch: T.String(),
    remote_branch: T.String(),
    commit: T.String({ description: "The commit the remote branch now points at" }),
    status: OneOf(["pushed", "up_to_date"] as const),
  },
  { title: "GitPushResult" },
);
