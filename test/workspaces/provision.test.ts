/**
 * Making a workspace's box (src/workspaces/provision.ts) on the real engine, when its name is
 * already taken: by the workspace's own box (an interrupted earlier attempt, or another replica
 * that started the same workspace and stalled past the task's lease while creating it — the one
 * that took the task over must not fail on the name, nor remove a box the other may be using),
 * and by a box that is not the workspace's (cleared, then the box is made).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { newId } from "../../src/db/ids.ts";
import { randomHex } from "../../src/lib/crypto.ts";
import { createLogger } from "../../src/log.ts";
import { Provisioner, type ProvisionInput } from "../../src/workspaces/provision.ts";
import { LABEL_INSTANCE, LABEL_WORKSPACE } from "../../src/workspaces/spec.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { docker, sweepInstance } from "./helpers.ts";

const log = createLogger({ level: "error", sink: () => {} });
/** This test's instance id: its objects are nobody else's. */
const instance = `provision-${randomHex(6)}`;
let t: TestApp;
let replicaA: Provisioner;
let replicaB: Provisioner;

beforeAll(async () => {
  t = await startTestApp();
  // Two provisioners on one engine, as two replicas have (one instance id: it lives in the shared database).
  replicaA = new Provisioner(t.app.services.workspaces.hosts.primary.boxes, log, instance);
  replicaB = new Provisioner(t.app.services.workspaces.hosts.primary.boxes, log, instance);
});
afterAll(async () => {
  await sweepInstance(instance);
  await t.stop();
});

function row(): ProvisionInput {
  const id = newId("container");
  return { id, session_id: "sess_provision", name: `runcell-${id}`, volume: `runcell-${id}`, image: t.config.workspaceImage, spec: { network: "none", memory_mb: 64, cpus: 0.2, pids: 64 } };
}
const inspect = (id: string) => docker.getContainer(id).inspect();

test("a name held by the workspace's own running box: that box is used, running on, not removed", async () => {
  const r = row();
  const made = await replicaA.up(r);
  const again = await replicaB.up(r);
  expect(again.id).toBe(made.id);
  expect((await inspect(made.id)).State.Running).toBe(true);
  const named = await docker.listContainers({ all: true, filters: JSON.stringify({ name: [r.name] }) });
  expect(named.map((c) => c.Id)).toEqual([made.id]);
});

test("a name held by the workspace's own box that never started (an interrupted attempt): that box, started", async () => {
  const r = row();
  const created = await docker.createContainer({ name: r.name, Image: r.image, Cmd: ["sleep", "3600"], Labels: { [LABEL_WORKSPACE]: r.id, [LABEL_INSTANCE]: instance }, HostConfig: { NetworkMode: "none" } });
  const box = await replicaB.up(r);
  expect(box.id).toBe(created.id);
  expect((await inspect(created.id)).State.Running).toBe(true);
});

test("a name held by a box that is not the workspace's: cleared, and the workspace's box made", async () => {
  const r = row();
  const stranger = await docker.createContainer({ name: r.name, Image: r.image, Cmd: ["sleep", "3600"], Labels: { [LABEL_INSTANCE]: instance }, HostConfig: { NetworkMode: "none" } });
  const box = await replicaA.up(r);
  expect(box.id).not.toBe(stranger.id);
  expect((await inspect(box.id)).Config.Labels[LABEL_WORKSPACE]).toBe(r.id);
  expect(await inspect(stranger.id).then(() => "exists", (e) => e.statusCode)).toBe(404);
});
