/**
 * Workspace test helpers: profile and session rows inserted directly (the profile and session
 * services are tested on their own), and a sweep of every Docker object this app instance made.
 */
import Docker from "dockerode";
import { newId } from "../../src/db/ids.ts";
import { eq } from "drizzle-orm";
import type { ProfileLimits } from "../../src/db/schema.ts";
import { profiles, sessions } from "../../src/db/tables.ts";
import type { ProfileRow } from "../../src/workspaces/service.ts";
import { LABEL_INSTANCE } from "../../src/workspaces/spec.ts";
import type { TestApp } from "../helpers/app.ts";

export const docker = new Docker({ socketPath: "/var/run/docker.sock" });

export async function insertProfile(t: TestApp, userId: string, over: Omit<Partial<ProfileRow>, "limits"> & { limits?: Partial<ProfileLimits> } = {}): Promise<ProfileRow> {
  const now = Date.now();
  const row: ProfileRow = {
    id: newId("profile"),
    user_id: userId,
    name: "test",
    system_prompt: "test",
    model: { provider: "demo", name: "demo" },
    image: t.config.workspaceImage,
    tools: ["Bash"],
    env: {},
    network: "none",
    warm_pool: 0,
    mcp_servers: [],
    allowed_tools: [],
    host_labels: [],
    repositories: [],
    created_at: now,
    updated_at: now,
    ...over,
    limits: { max_turns: 10, max_budget_usd: 1, max_concurrency: 5, memory_mb: 256, cpus: 0.5, pids: 128, ...over.limits },
  };
  await t.app.services.db.insert(profiles).values(row);
  return row;
}

export async function insertSession(t: TestApp, userId: string, profileId: string): Promise<string> {
  const id = newId("session");
  const now = Date.now();
  await t.app.services.db.insert(sessions).values({ id, user_id: userId, profile_id: profileId, created_at: now, updated_at: now });
  return id;
}

/** A session with a running workspace; `env` becomes the profile's (its commands get it per exec). */
export async function newWorkspace(t: TestApp, userId: string, profile: ProfileRow, env: Record<string, string> = {}) {
  if (Object.keys(env).length) await t.app.services.db.update(profiles).set({ env }).where(eq(profiles.id, profile.id));
  const sessionId = await insertSession(t, userId, profile.id);
  const ws = await t.app.services.workspaces.createForSession({ userId, sessionId, profile })
  return { sessionId, ws };
}

/** Removes every container and volume labelled with this app's instance id (on `engine`: the usual dockerd unless given). */
export async function sweepInstance(instanceId: string, engine: Docker = docker) {
  const filters = JSON.stringify({ label: [`${LABEL_INSTANCE}=${instanceId}`] });
  for (const c of await engine.listContainers({ all: true, filters })) await engine.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (const v of (await engine.listVolumes({ filters })).Volumes ?? []) await engine.getVolume(v.Name).remove().catch(() => {});
}
