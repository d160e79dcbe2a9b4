/** GitPush: offered when the session has repositories; runcell pushes with the credential it holds (src/git/service.ts). */
import { Type } from "@sinclair/typebox";

export const GIT_PUSH = "GitPush";

export const gitPushTool = {
  name: GIT_PUSH,
  description:
    "Push a branch of one of this session's git repositories to its remote. Commit your work first (git commit in the workspace). " +
    "The push is made by the platform with the repository's credential, which is not in the workspace. Returns the pushed commit.",
  input_schema: Type.Object({
    path: Type.String({ minLength: 1, description: "The repository's directory, e.g. /workspace/myrepo" }),
    branch: Type.Optional(Type.String({ minLength: 1, description: "Local branch to push (default: the checked-out branch)" })),
    remote_branch: Type.Optional(Type.String({ minLength: 1, description: "Branch on the remote (default: the same name)" })),
  }),
};
