/**
 * Several replicas on one Docker engine (src/workspaces/peers.ts), one replica at a time against
 * the real dockerd: members are made under an instance id of this test's own (so the test app's
 * own workers never touch them) and labelled as made by this replica, by another registered one,
 * by a gone one, or by none (from before the label). The warm pool's and the workspaces'
 * reconciliations, placement's count of the other replicas' members, the idle stop of a
 * workspace busy on another replica, and a start in progress on another replica.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { newId } from "../../src/db/ids.ts";
import type { WorkspaceRow } from "../../src/db/schema.ts";
import { workspaces } from "../../src/db/tables.ts";
import { randomHex } from "../../src/lib/crypto.ts";
import { createLogger } from "../../src/log.ts";
import { parseDockerHosts } from "../../src/lib/docker-hosts.ts";
import { DockerHosts } from "../../src/workspaces/hosts.ts";
import { stopIdle } from "../../src/workspaces/idle.ts";
import { KeyedMutex } from "../../src/workspaces/mutex.ts";
import { memberOwner, PEER_COUNT_TTL_MS, PeerMembers, type ReplicaView } from "../../src/workspaces/peers.ts";
import { WarmPool } from "../../src/workspaces/pool.ts";
import { Provisioner } from "../../src/workspaces/provision.ts";
import { reconcile, STARTING_GRACE_MS } from "../../src/workspaces/reconcile.ts";
import type { ProfileRow, Workspaces } from "../../src/workspaces/service.ts";
import { LABEL_POOL, LABEL_POOL_KEY, LABEL_REPLICA } from "../../src/workspaces/spec.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { docker, insertProfile, insertSession, newWorkspace, sweepInstance } from "./helpers.ts";

const ME = "rep_me";
const PEER = "rep_peer";
const GONE = "rep_gone";
const log = createLogger({ level: "error", sink: () => {} });

let t: TestApp;
let ws: Workspaces;
let user: TestUser;
let profile: ProfileRow;
/** This test's instance id: its objects are nobody else's. */
const instance = `peers-${randomHex(6)}`;
let provisioner: Provisioner;

const shared = (registered: string[] = [ME, PEER]): ReplicaView => ({ id: ME, shared: true, registered: async () => new Set(registered) });
const exists = async (dockerId: string) => docker.getContainer(dockerId).inspect().then((i) => i.State.Running, (e) => (e.statusCode === 404 ? null : Promise.reject(e)));
const volumeExists = async (name: string) => docker.getVolume(name).inspect().then(() => true, (e) => (e.statusCode === 404 ? false : Promise.reject(e)));

function poolOf(replica: ReplicaView): WarmPool {
  return new WarmPool({
    hosts: ws.hosts,
    usage: async () => new Map(),
    log,
    instanceId: instance,
    replica,
    config: { workspaceImage: t.config.workspaceImage, maxWarmPool: 5, maxWarmPoolTotal: 10 },
    profile: (id) => ws.store.profile(id),
    pooledProfiles: () => ws.store.pooledProfiles(),
    hasRow: async (id) => (await ws.store.byId(id)) !== null,
    availableMb: () => Infinity,
  });
}

/** A running pool member of `profile` as a replica labelled `owner` (none: from before the label) would make it. */
async function member(owner: string | null, key?: string): Promise<{ ctrId: string; dockerId: string; volume: string }> {
  const ctrId = newId("container");
  const labels: Record<string, string> = { [LABEL_POOL]: profile.id, [LABEL_POOL_KEY]: key ?? (await poolOf(shared()).shapeOf(profile)).key };
  if (owner !== null) labels[LABEL_REPLICA] = owner;
  const volume = `runcell-${ctrId}`;
  const box = await provisioner.up({ id: ctrId, session_id: "", name: `runcell-pool-${ctrId}`, volume, image: t.config.workspaceImage, spec: { network: "none", memory_mb: 64, cpus: 0.2, pids: 64 } }, labels);
  return { ctrId, dockerId: box.id, volume };
}

/** A workspace row for a container of this test's instance (a member a session took, a start in progress). */
async function insertRow(ctrId: string, dockerId: string | null, status: WorkspaceRow["status"], updatedAt = Date.now()) {
  const sessionId = await insertSession(t, user.id, profile.id);
  await t.app.services.db.insert(workspaces).values({
    id: ctrId, user_id: user.id, session_id: sessionId, profile_id: profile.id, name: `runcell-${ctrId}`, image: t.config.workspaceImage,
    host: ws.hosts.primary.name, docker_id: dockerId, volume: `runcell-${ctrId}`, spec: { network: "none", memory_mb: 64, cpus: 0.2, pids: 64 },
    disk_bytes: null, disk_checked_at: null, status, error: null, last_active_at: updatedAt, created_at: updatedAt, updated_at: updatedAt,
  });
}

const reconcileAs = (replica: ReplicaView) =>
  reconcile({ boxes: ws.hosts.primary.boxes, host: ws.hosts.primary.name, store: ws.store, locks: new KeyedMutex(), instanceId: instance, log, replica, now: Date.now });

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  user = await createUser(t);
  profile = await insertProfile(t, user.id, { warm_pool: 2, limits: { memory_mb: 64, cpus: 0.2, pids: 64, max_concurrency: 10 } });
  provisioner = new Provisioner(ws.hosts.primary.boxes, log, instance);
});
afterAll(async () => {
  await sweepInstance(instance);
  await sweepInstance(ws.instanceId);
  await t.stop();
});

describe("whose member", () => {
  test("by the replica label; with one server every member is its own", () => {
    const reg = new Set([ME, PEER]);
    const s = { id: ME, shared: true };
    expect(memberOwner({}, s, reg)).toBe(null);
    expect(memberOwner({ [LABEL_POOL]: "p", [LABEL_REPLICA]: ME }, s, reg)).toBe("mine");
    expect(memberOwner({ [LABEL_POOL]: "p", [LABEL_REPLICA]: PEER }, s, reg)).toBe("peer");
    expect(memberOwner({ [LABEL_POOL]: "p", [LABEL_REPLICA]: GONE }, s, reg)).toBe("gone");
    expect(memberOwner({ [LABEL_POOL]: "p" }, s, reg)).toBe("gone");
    const any: Record<string, string>[] = [{ [LABEL_POOL]: "p" }, { [LABEL_POOL]: "p", [LABEL_REPLICA]: GONE }, { [LABEL_POOL]: "p", [LABEL_REPLICA]: PEER }];
    for (const labels of any) {
      expect(memberOwner(labels, { id: ME, shared: false }, new Set())).toBe("mine");
    }
  });
});

describe("the warm pool's reconciliation with other replicas", () => {
  test("adopts its own, leaves a registered replica's alone, removes a gone replica's and unlabelled ones unless taken", async () => {
    const mine = await member(ME);
    const peer = await member(PEER);
    const gone = await member(GONE);
    const legacy = await member(null);
    const goneTaken = await member(GONE);
    await insertRow(goneTaken.ctrId, goneTaken.dockerId, "running");

    const pool = poolOf(shared());
    const report = await pool.reconcile(ws.hosts.primary);
    pool.stop();
    expect(report.adopted).toEqual([mine.ctrId]);
    expect(report.peers).toEqual([peer.ctrId]);
    expect(report.removed.sort()).toEqual([gone.ctrId, legacy.ctrId].sort());
    expect(pool.holds(mine.ctrId)).toBe(true);
    expect(pool.holds(peer.ctrId)).toBe(false);
    expect(await exists(mine.dockerId)).toBe(true);
    expect(await exists(peer.dockerId)).toBe(true);
    expect(await exists(goneTaken.dockerId)).toBe(true);
    expect(await exists(gone.dockerId)).toBe(null);
    expect(await exists(legacy.dockerId)).toBe(null);
    expect(await volumeExists(gone.volume)).toBe(false);
    expect(await volumeExists(peer.volume)).toBe(true);

    // The peer's row goes (a clean stop): its member is removed at the next reconciliation, never adopted.
    const later = poolOf(shared([ME]));
    const next = await later.reconcile(ws.hosts.primary);
    later.stop();
    expect(next.adopted).toContain(mine.ctrId);
    expect(next.removed).toEqual([peer.ctrId]);
    expect(await exists(peer.dockerId)).toBe(null);
    expect(await exists(mine.dockerId)).toBe(true);
    await sweepInstance(instance);
    await t.app.services.db.delete(workspaces).where(eq(workspaces.id, goneTaken.ctrId));
  });

  test("a take hands out only this replica's members", async () => {
    const peer = await member(PEER);
    const mine = await member(ME);
    const pool = poolOf(shared());
    await pool.reconcile(ws.hosts.primary);
    const first = await pool.take(profile);
    const second = await pool.take(profile);
    pool.stop();
    expect(first?.dockerId).toBe(mine.dockerId);
    expect(second).toBe(null);
    expect(await exists(peer.dockerId)).toBe(true);
    await sweepInstance(instance);
  });

  test("with one server, unlabelled members and those of an earlier process are adopted (as before replicas)", async () => {
    const legacy = await member(null);
    const earlier = await member(GONE);
    const pool = poolOf({ id: ME, shared: false, registered: async () => new Set() });
    const report = await pool.reconcile(ws.hosts.primary);
    pool.stop();
    expect(report.adopted.sort()).toEqual([legacy.ctrId, earlier.ctrId].sort());
    expect(report.removed).toEqual([]);
    await sweepInstance(instance);
  });
});

describe("the workspaces' reconciliation with other replicas", () => {
  test("never removes a registered replica's member (container or volume); removes a gone replica's", async () => {
    const peer = await member(PEER);
    const gone = await member(GONE);
    const mine = await member(ME); // not in this replica's pool (no pool here): an orphan of its own
    const report = await reconcileAs(shared());
    expect(await exists(peer.dockerId)).toBe(true);
    expect(await volumeExists(peer.volume)).toBe(true);
    expect(await exists(gone.dockerId)).toBe(null);
    expect(await volumeExists(gone.volume)).toBe(false);
    expect(await exists(mine.dockerId)).toBe(null);
    expect(report.removed_containers.sort()).toEqual([`runcell-pool-${gone.ctrId}`, `runcell-pool-${mine.ctrId}`].sort());
    expect(report.removed_volumes.sort()).toEqual([gone.volume, mine.volume].sort());
    // With one server the same container is an orphan like any other.
    const one = await reconcileAs({ id: ME, shared: false, registered: async () => new Set() });
    expect(one.removed_containers).toEqual([`runcell-pool-${peer.ctrId}`]);
    expect(await exists(peer.dockerId)).toBe(null);
  });

  test("a start in progress on another replica is left alone; an old one is an interrupted start", async () => {
    const fresh = newId("container");
    const old = newId("container");
    await insertRow(fresh, null, "starting");
    await insertRow(old, null, "starting", Date.now() - STARTING_GRACE_MS - 1000);
    const report = await reconcileAs(shared());
    expect(report.marked_stopped).toEqual([old]);
    expect((await ws.store.byId(fresh))!.status).toBe("starting");
    // With one server a start in progress holds the workspace's lock, so a row without one was interrupted.
    expect((await reconcileAs({ id: ME, shared: false, registered: async () => new Set() })).marked_stopped).toEqual([fresh]);
    await t.app.services.db.delete(workspaces).where(eq(workspaces.id, fresh));
    await t.app.services.db.delete(workspaces).where(eq(workspaces.id, old));
  });
});

describe("placement with other replicas' members", () => {
  test("counts the other replicas' untaken running members on each host, re-listed after PEER_COUNT_TTL_MS", async () => {
    const peers = new PeerMembers({ replica: shared(), instanceId: instance, hosts: () => ws.hosts.list, withRows: (ids) => ws.store.withRows(ids), log });
    const host = ws.hosts.primary.name;
    await member(ME); // counted by its own pool, not here
    await member(PEER);
    await member(GONE); // holds room until removed
    const taken = await member(PEER);
    await insertRow(taken.ctrId, taken.dockerId, "running"); // its row counts it
    const stopped = await member(PEER);
    await docker.getContainer(stopped.dockerId).stop({ t: 0 });
    expect((await peers.byHost()).get(host)).toBe(2);
    // A member made since the listing is not seen until the count is older than the TTL: the documented bound.
    await member(PEER);
    expect((await peers.byHost()).get(host)).toBe(2);
    await Bun.sleep(PEER_COUNT_TTL_MS + 100);
    expect((await peers.byHost()).get(host)).toBe(3);

    // Placement: an engine with room for 3 holding 3 members of other replicas takes nothing more; with room for 4, one.
    const spec = (capacity: number) => parseDockerHosts([`unix:///var/run/docker.sock?name=${host}&capacity=${capacity}`]);
    for (const [capacity, placed] of [[3, false], [4, true]] as const) {
      const hosts = new DockerHosts(spec(capacity), { log, instanceId: instance, parallelism: () => 1 });
      const counted = new PeerMembers({ replica: shared(), instanceId: instance, hosts: () => hosts.list, withRows: (ids) => ws.store.withRows(ids), log });
      const outcome = await hosts.placeAndRecord([], () => counted.byHost(), (h) => h.name).catch((e: Error) => e.message);
      if (placed) expect(outcome).toBe(host);
      else expect(outcome).toContain("at its capacity");
    }

    // One server: nothing is listed.
    const one = new PeerMembers({ replica: { id: ME, shared: false, registered: async () => new Set() }, instanceId: instance, hosts: () => ws.hosts.list, withRows: (ids) => ws.store.withRows(ids), log });
    expect((await one.byHost()).size).toBe(0);
    await t.app.services.db.delete(workspaces).where(eq(workspaces.id, taken.ctrId));
    await sweepInstance(instance);
  });
});

describe("the idle stop with other replicas", () => {
  test("a workspace busy on one replica is not stopped by another's idle check", async () => {
    const { ws: row } = await newWorkspace(t, user.id, profile);
    const idleMs = 60_000;
    const base = { box: (r: WorkspaceRow) => ws.box(r), store: ws.store, locks: new KeyedMutex(), log, idleMs };
    // Idle for longer than the timeout as far as the row says, but running a command on replica B.
    await t.app.services.db.update(workspaces).set({ last_active_at: Date.now() - 2 * idleMs }).where(eq(workspaces.id, row.id));
    const onB = new Map([[row.id, 1]]);
    expect(await stopIdle({ ...base, inflight: onB, shared: true, now: Date.now })).toEqual([]);
    // A does not know B's execs: the row B touched keeps the workspace running.
    expect(await stopIdle({ ...base, inflight: new Map(), shared: true, now: Date.now })).toEqual([]);
    expect(await exists(row.docker_id!)).toBe(true);
    // Without B's touch (one server's behaviour), A would have stopped it.
    await t.app.services.db.update(workspaces).set({ last_active_at: Date.now() - 2 * idleMs }).where(eq(workspaces.id, row.id));
    expect(await stopIdle({ ...base, inflight: onB, shared: false, now: Date.now })).toEqual([]);
    expect(await stopIdle({ ...base, inflight: new Map(), shared: true, now: Date.now })).toEqual([row.id]);
    expect(await exists(row.docker_id!)).toBe(false);
    await ws.removeById(row.id);
  });
});
