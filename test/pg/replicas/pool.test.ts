/**
 * Warm pools of two replicas sharing one PostgreSQL database and one Docker engine (so one
 * `runcell.instance` label): a profile with warm_pool 2 gives each replica two members of its own,
 * labelled with its id (the replica that did not see the profile made fills its pool at its next
 * sync). kill -9 of both, one after the other, and their restarts: each adopts its own members and
 * neither removes nor adopts the other's (Docker ids unchanged, still running), also while the
 * other is down. Sessions started through A and B get distinct containers, each from its own
 * replica's pool; no container belongs to two workspace rows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Docker from "dockerode";
import { waitFor } from "../../helpers/net.ts";
import { PG_SERVER } from "../../helpers/pg.ts";
import { type ReplicaSet, startReplicas } from "../../helpers/replicas.ts";
import type { ServerProcess } from "../../helpers/server-process.ts";
import { LABEL_POOL, LABEL_REPLICA, LABEL_WORKSPACE } from "../../../src/workspaces/spec.ts";

const docker = new Docker({ socketPath: "/var/run/docker.sock" });
const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";

describe.skipIf(!PG_SERVER)("warm pools of two replicas on one Docker engine", () => {
  let set: ReplicaSet;
  let profileId = "";
  let instance = "";

  beforeAll(async () => {
    set = await startReplicas(2);
    const r = await fetch(set.servers[0]!.url + "/v1/profiles", {
      method: "POST",
      headers: set.headers,
      body: JSON.stringify({ name: "pooled", model: { provider: "demo", name: "demo" }, image: IMAGE, network: "none", warm_pool: 2, limits: { max_concurrency: 10, memory_mb: 256, cpus: 0.5, pids: 128 } }),
    });
    expect(r.status).toBe(201);
    profileId = (await r.json()).id;
  }, 60_000);
  afterAll(async () => {
    await set?.stop();
    // Every object of this run's instance (the replicas leave their members running at a stop).
    if (instance) {
      const filters = JSON.stringify({ label: [`runcell.instance=${instance}`] });
      for (const c of await docker.listContainers({ all: true, filters })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
      for (const v of (await docker.listVolumes({ filters })).Volumes ?? []) await docker.getVolume(v.Name).remove().catch(() => {});
    }
  });

  const replicaId = async (s: ServerProcess) => (await (await fetch(s.url + "/healthz")).json()).replica as string;
  /** The profile's pool containers (taken ones too: the label stays), by Docker id. */
  const poolContainers = async () => {
    const list = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABEL_POOL}=${profileId}`] }) });
    return list.map((c) => ({ id: c.Id, state: c.State, replica: c.Labels[LABEL_REPLICA] ?? "", ctr: c.Labels[LABEL_WORKSPACE] ?? "", instance: c.Labels["runcell.instance"] ?? "" }));
  };
  /** The untaken members (no workspace row), per replica id: sorted Docker ids. */
  const membersByReplica = async () => {
    const rows = new Set([...(await set.sql`SELECT id FROM workspaces`)].map((r: { id: string }) => r.id));
    const out = new Map<string, string[]>();
    for (const c of await poolContainers()) if (!rows.has(c.ctr)) out.set(c.replica, [...(out.get(c.replica) ?? []), c.id].sort());
    return out;
  };
  /** The replica's first "warm pool reconciled" log line (written when it adopted or removed a member). */
  const poolReport = async (s: ServerProcess) => {
    const line = await waitFor(() => s.output().split("\n").find((l) => l.includes("warm pool reconciled with Docker")), { timeoutMs: 20_000, what: "a pool reconciliation" });
    return JSON.parse(line) as { adopted: string[]; removed: string[]; peers: string[] };
  };
  const ctrOf = async (ids: string[]) => (await poolContainers()).filter((c) => ids.includes(c.id)).map((c) => c.ctr).sort();
  const running = async (ids: string[]) => (await Promise.all(ids.map(async (id) => (await docker.getContainer(id).inspect()).State.Running))).every(Boolean);

  test("each replica fills its own pool, adopts only its own members after kill -9, and hands out distinct containers", async () => {
    const [a, b] = [await replicaId(set.servers[0]!), await replicaId(set.servers[1]!)];
    expect(a).toMatch(/^rep_/);
    expect(b).toMatch(/^rep_/);
    expect(a).not.toBe(b);

    // A saw the profile made; B fills its pool at its next sync (every 10 s). Two members each, labelled with their maker.
    const filled = await waitFor(async () => {
      const m = await membersByReplica();
      return m.get(a)?.length === 2 && m.get(b)?.length === 2 && m.size === 2 ? m : undefined;
    }, { timeoutMs: 45_000, intervalMs: 250, what: "two members per replica" });
    const ofA = filled.get(a)!;
    const ofB = filled.get(b)!;
    instance = (await poolContainers())[0]!.instance;
    expect(instance).not.toBe("");
    expect(await running([...ofA, ...ofB])).toBe(true);

    // B dies, then A dies and comes back while B is still down: A adopts its two and leaves B's alone (B is registered).
    await set.servers[1]!.kill("SIGKILL");
    await set.servers[0]!.kill("SIGKILL");
    const a2 = await set.restart(0);
    expect(await replicaId(a2)).toBe(a); // the replica id is kept in the data dir
    const byA = await poolReport(a2);
    expect(byA.adopted.sort()).toEqual(await ctrOf(ofA));
    expect(byA.removed).toEqual([]);
    expect(byA.peers.sort()).toEqual(await ctrOf(ofB));
    // Past A's first sync too (nothing it does later may touch B's members).
    await Bun.sleep(11_000);
    let now = await membersByReplica();
    expect(now.get(a)).toEqual(ofA);
    expect(now.get(b)).toEqual(ofB);
    expect(await running([...ofA, ...ofB])).toBe(true);

    // B comes back: it adopts its own two and neither removes nor adopts A's.
    const b2 = await set.restart(1);
    expect(await replicaId(b2)).toBe(b);
    const report = await poolReport(b2);
    expect(report.adopted.sort()).toEqual(await ctrOf(ofB));
    expect(report.removed).toEqual([]);
    expect(report.peers.sort()).toEqual(await ctrOf(ofA));
    await Bun.sleep(11_000); // past B's first sync
    now = await membersByReplica();
    expect(now.get(a)).toEqual(ofA);
    expect(now.get(b)).toEqual(ofB);
    expect(now.size).toBe(2);
    expect(await running([...ofA, ...ofB])).toBe(true);

    // A session through each replica: distinct containers, each from that replica's own pool.
    const start = async (s: ServerProcess) => {
      const r = await fetch(s.url + "/v1/sessions", { method: "POST", headers: set.headers, body: JSON.stringify({ profile_id: profileId }) });
      expect(r.status).toBe(201);
      const id = (await r.json()).id as string;
      return (await set.sql`SELECT docker_id FROM workspaces WHERE session_id = ${id}`)[0].docker_id as string;
    };
    const [viaA, viaB] = await Promise.all([start(a2), start(b2)]);
    expect(viaA).not.toBe(viaB);
    expect(ofA).toContain(viaA);
    expect(ofB).toContain(viaB);
    // More sessions at once through both: every one gets its own container.
    const more = await Promise.all([start(a2), start(b2), start(a2), start(b2)]);
    expect(new Set([viaA, viaB, ...more]).size).toBe(6);
    const shared = await set.sql`SELECT docker_id, count(*)::int AS n FROM workspaces WHERE docker_id IS NOT NULL GROUP BY docker_id HAVING count(*) > 1`;
    expect([...shared]).toEqual([]);
    expect(Number((await set.sql`SELECT count(*)::int AS n FROM workspaces`)[0].n)).toBe(6);

    // Each pool refills with members of its own replica.
    await waitFor(async () => {
      const m = await membersByReplica();
      return m.get(a)?.length === 2 && m.get(b)?.length === 2 && m.size === 2 || undefined;
    }, { timeoutMs: 45_000, intervalMs: 250, what: "both pools refilled" });
  }, 180_000);
});
