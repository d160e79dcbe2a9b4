/** A real workspace (test app, busybox container) and a ToolContext on it, for running one tool directly. */
import type { ToolContext } from "../../../src/agents/tools/types.ts";
import type { Workspaces } from "../../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../../helpers/app.ts";
import { createUser } from "../../helpers/users.ts";
import { insertProfile, newWorkspace, sweepInstance } from "../../workspaces/helpers.ts";

export interface ToolBench {
  ctx: ToolContext;
  ws: Workspaces;
  /** Runs a shell script in the workspace; its output. */
  sh(script: string): Promise<string>;
  stop(): Promise<void>;
}

export async function toolBench(): Promise<ToolBench> {
  const t: TestApp = await startTestApp();
  const ws = t.app.services.workspaces;
  const u = await createUser(t);
  const { sessionId } = await newWorkspace(t, u.id, await insertProfile(t, u.id));
  const ctx: ToolContext = { userId: u.id, sessionId, taskId: "task_test", signal: new AbortController().signal, workspace: ws, notify: async () => null };
  return {
    ctx,
    ws,
    sh: async (script) => (await ws.exec(sessionId, { cmd: ["/bin/sh", "-c", script] })).output,
    stop: async () => {
      await sweepInstance(ws.instanceId);
      await t.stop();
    },
  };
}
