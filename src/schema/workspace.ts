/** Workspaces (one container per session) and the listing of their files. */
import { WORKSPACE_STATUSES, workspaces } from "../db/schema.ts";
import { Nullable, NullableTimestamp, OneOf, recordColumns, type Static, T, Timestamp } from "./common.ts";

export const WorkspaceStatus = OneOf(WORKSPACE_STATUSES);

const record = {
  ...recordColumns(workspaces, ["id", "name", "session_id", "profile_id", "image"]),
  status: WorkspaceStatus,
  error: Nullable(T.String(), { description: "Why it is stopped or failed, when known" }),
  last_active_at: Timestamp,
  created_at: Timestamp,
};
export const WorkspaceRecord = T.Object(record, { title: "Workspace" });
export type WorkspaceRecord = Static<typeof WorkspaceRecord>;

export const AdminWorkspaceRecord = T.Object(
  { ...record, ...recordColumns(workspaces, ["user_id", "host", "docker_id", "volume"]), updated_at: Timestamp },
  { title: "AdminWorkspace" },
);
export type AdminWorkspaceRecord = Static<typeof AdminWorkspaceRecord>;

export const ENTRY_TYPES = ["file", "dir", "symlink", "other"] as const;
export type EntryType = (typeof ENTRY_TYPES)[number];

export const DirEntry = T.Object({
  name: T.String(),
  path: T.String({ description: "Relative to /workspace" }),
  type: OneOf(ENTRY_TYPES),
  size: Nullable(T.Integer()),
  modified: NullableTimestamp,
});
export type DirEntry = Static<typeof DirEntry>;

export const DirListing = T.Object(
  { path: T.String({ description: "The directory, relative to /workspace" }), data: T.Array(DirEntry), next_cursor: Nullable(T.String()) },
  { title: "DirListing" },
);
export type DirListing = Static<typeof DirListing>;
