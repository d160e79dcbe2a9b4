/**
 * The other replicas on this instance's Docker hosts (issue 17). Replicas of one PostgreSQL
 * database share its instance id (`runcell.instance`, read from the database), so they see each
 * other's containers when they share Docker hosts, while each keeps its own warm pool in memory.
 * What keeps them apart:
 *
 * - Every warm-pool member is labelled with the replica that made it (`runcell.replica=<id>`).
 *   A replica adopts and takes only its own members, so no container is ever in two replicas'
 *   pools, and a take (a synchronous splice of the replica's own list) hands it to one session.
 * - Another replica's member is left alone while that replica has a row in `replicas` (live, or
 *   crashed but not yet forgotten: its id is kept in its data dir, so it adopts its members when
 *   it comes back; a clean stop keeps the row too). Once its row is gone (forgotten after ~20 leases) its members
 *   are removed, never adopted: their label would still name the gone replica, so every replica
 *   would think them its own to adopt.
 * - Placement counts the other replicas' members from Docker (PeerMembers below), since they are
 *   in no table.
 *
 * With one server (SQLite, `shared` false) there is no other replica: every member of the
 * instance is this server's, whatever replica id it carries (ids of earlier processes, or none
 * from before the label existed), exactly as before replicas existed.
 */
import type { Logger } from "../log.ts";
import { dockerMessage } from "./docker.ts";
import type { DockerHost } from "./hosts.ts";
import { LABEL_INSTANCE, LABEL_POOL, LABEL_REPLICA, LABEL_WORKSPACE } from "./spec.ts";

/** This server among the replicas sharing the database (wired by the app from src/replicas/). */
export interface ReplicaView {
  /** This replica's id (`rep_…`), stable per data dir: the `runcell.replica` label of the members it makes. */
  readonly id: string;
  /** Whether other replicas may share the database and the Docker hosts (PostgreSQL). */
  readonly shared: boolean;
  /** Ids of the replicas with a row in `replicas` (this one included). */
  registered(): Promise<ReadonlySet<string>>;
}

/** The only server (tests, and a Workspaces built without replicas). */
export const SOLE_REPLICA: ReplicaView = { id: "", shared: false, registered: async () => new Set() };

/**
 * Whose warm-pool member a container or volume is, by its labels: this replica's (`mine`), a
 * registered other replica's (`peer`: left alone), or a gone replica's — or, with several
 * replicas, an unlabelled one from before the label (`gone`: removed). Null: not a pool member.
 */
export function memberOwner(labels: Record<string, string>, replica: Pick<ReplicaView, "id" | "shared">, registered: ReadonlySet<string>): "mine" | "peer" | "gone" | null {
  if (labels[LABEL_POOL] === undefined) return null;
  if (!replica.shared) return "mine";
  const owner = labels[LABEL_REPLICA] ?? "";
  if (owner === replica.id) return "mine";
  return owner && registered.has(owner) ? "peer" : "gone";
}

/** How old a host's count of the other replicas' members may be when placement reads it. */
export const PEER_COUNT_TTL_MS = 2000;
/** How long a placement waits for a host's listing; past it, the last count stands (the listing goes on). */
const LIST_WAIT_MS = 2000;
/** Container states that hold a host's room. */
const OCCUPYING = new Set(["created", "running", "restarting", "paused"]);

export interface PeerMembersDeps {
  replica: ReplicaView;
  instanceId: string;
  hosts: () => readonly DockerHost[];
  /** The ids among `ids` that have a workspace row (a taken member: its row counts it). */
  withRows(ids: string[]): Promise<Set<string>>;
  log: Logger;
}

/**
 * The other replicas' warm-pool members per Docker host, for placement: the pool-labelled
 * containers of this instance not labelled with this replica's id, not taken (no workspace row)
 * and not exited, as Docker listed them at most PEER_COUNT_TTL_MS ago (a placement re-lists a
 * host whose count is older). Not exact: a member another replica created since the listing is
 * missed, and one it handed to a session since then is counted twice (as a member and as its
 * row); see `byHost`. Nothing at all with one server.
 */
export class PeerMembers {
  private counts = new Map<string, { n: number; at: number }>();
  private inflight = new Map<string, Promise<void>>();

  constructor(private d: PeerMembersDeps) {}

  /**
   * Each answering host's count, re-listed where older than PEER_COUNT_TTL_MS. The bound: a
   * host can be over its capacity by the members the other replicas created on it within the
   * last PEER_COUNT_TTL_MS plus their creation time (a member shows in Docker's list once its
   * container is created), and, as for workspaces, by one placement per other replica made at
   * the same moment (placement is serialised within a replica, not across replicas).
   */
  async byHost(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (!this.d.replica.shared) return out;
    const now = Date.now();
    const hosts = this.d.hosts().filter((h) => h.up);
    const stale = hosts.filter((h) => now - (this.counts.get(h.name)?.at ?? 0) >= PEER_COUNT_TTL_MS);
    if (stale.length) {
      // A host that does not answer must not hold up placement on the others.
      let timer: Timer | undefined;
      await Promise.race([Promise.all(stale.map((h) => this.refresh(h))), new Promise<void>((r) => (timer = setTimeout(r, LIST_WAIT_MS)))]);
      clearTimeout(timer);
    }
    for (const h of hosts) {
      const n = this.counts.get(h.name)?.n ?? 0;
      if (n) out.set(h.name, n);
    }
    return out;
  }

  /** Lists the host's members again (one listing at a time per host; a failure keeps the last count). */
  refresh(host: DockerHost): Promise<void> {
    const running = this.inflight.get(host.name);
    if (running) return running;
    const p = this.count(host)
      .then((n) => void this.counts.set(host.name, { n, at: Date.now() }))
      .catch((e) => this.d.log.warn("other replicas' pool members not counted; the last count stands", { docker_host: host.name, error: dockerMessage(e) }))
      .finally(() => this.inflight.delete(host.name));
    this.inflight.set(host.name, p);
    return p;
  }

  private async count(host: DockerHost): Promise<number> {
    const listed = await host.boxes.list({ [LABEL_INSTANCE]: this.d.instanceId, [LABEL_POOL]: "" });
    const others = listed.filter((c) => OCCUPYING.has(c.state) && (c.labels[LABEL_REPLICA] ?? "") !== this.d.replica.id && c.labels[LABEL_WORKSPACE]);
    if (others.length === 0) return 0;
    const taken = await this.d.withRows(others.map((c) => c.labels[LABEL_WORKSPACE]!));
    return others.filter((c) => !taken.has(c.labels[LABEL_WORKSPACE]!)).length;
  }
}
