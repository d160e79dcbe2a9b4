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
import { ForeignObject } from "../../src/workspaces/box.ts";
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

// Another runcell on the same engine (a restored copy of this data dir's database beside the live
// server): the same workspace ids, another instance id. Its objects are never used or removed.
const twin = `provision-twin-${randomHex(6)}`;
afterAll(() => sweepInstance(twin));

test("a volume of the name that another instance labelled: refused (ForeignObject), left as it is, no box made", async () => {
  const r = row();
  await docker.createVolume({ Name: r.volume, Labels: { [LABEL_WORKSPACE]: r.id, [LABEL_INSTANCE]: twin } });
  const err = await replicaA.up(r).catch((e) => e);
  expect(err).toBeInstanceOf(ForeignObject);
  expect(err.message).toContain(`instance ${twin}`);
  expect(err.message).toContain("--keep-instance");
  expect((await docker.getVolume(r.volume).inspect()).Labels[LABEL_INSTANCE]).toBe(twin);
  expect(await docker.listContainers({ all: true, filters: JSON.stringify({ name: [r.name] }) })).toEqual([]);
});

test("a box of the name that another instance labelled: refused, neither started nor removed", async () => {
  const r = row();
  const theirs = await docker.createContainer({ name: r.name, Image: r.image, Cmd: ["sleep", "3600"], Labels: { [LABEL_WORKSPACE]: r.id, [LABEL_INSTANCE]: twin }, HostConfig: { NetworkMode: "none" } });
  const err = await replicaA.up(r).catch((e) => e);
  expect(err).toBeInstanceOf(ForeignObject);
  const state = await inspect(theirs.id);
  expect(state.State.Running).toBe(false);
  expect(state.Config.Labels[LABEL_INSTANCE]).toBe(twin);
});

test("discard removes this instance's box and volume, and leaves another instance's of the same workspace", async () => {
  const r = row();
  const mine = await replicaA.up(r);
  await replicaA.discard(r.id, r.volume);
  expect(await inspect(mine.id).then(() => "exists", (e) => e.statusCode)).toBe(404);
  expect(await docker.getVolume(r.volume).inspect().then(() => "exists", (e) => e.statusCode)).toBe(404);

  const theirs = new Provisioner(t.app.services.workspaces.hosts.primary.boxes, log, twin);
  const box = await theirs.up(r);
  await replicaA.discard(r.id, r.volume);
  expect((await inspect(box.id)).State.Running).toBe(true);
  expect((await docker.getVolume(r.volume).inspect()).Labels[LABEL_INSTANCE]).toBe(twin);
});
