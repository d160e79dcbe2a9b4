/**
 * The Docker hosts workspaces run on (`--docker-host`, repeatable; lib/docker-hosts.ts parses
 * them). Each host has its own engine connection, provisioner (image pulls, the init fallback)
 * and start gate (so starts on two hosts do not queue behind each other). A workspace row records
 * its host: exec, files, stops and reconciliation go there.
 *
 * - Placement: a new workspace (or warm-pool member) goes to the answering host, among those
 *   whose labels hold all of the profile's `host_labels`, with the most free capacity (capacity
 *   minus its running and starting workspaces and pool members; a host without a capacity counts
 *   as unlimited), ties to the least used, then to the order given. A stopped workspace restarts
 *   where its volume is.
 * - Health: every host is pinged every HEALTH_EVERY_MS; after DOWN_AFTER failed pings in a row it
 *   is down — its workspaces are marked `unavailable` (their files are on it) and placement skips
 *   it; the first answer after that brings it back: its workspaces become `stopped` (the next turn
 *   starts them, or finds them running) and the host is reconciled.
 */
import type { DockerHostSpec } from "../lib/docker-hosts.ts";
import { labelsMatch } from "../lib/docker-hosts.ts";
import { AppError } from "../lib/errors.ts";
import type { Logger } from "../log.ts";
import { DockerEngine } from "./docker.ts";
import type { BoxEngine } from "./box.ts";
import { DockerBoxEngine } from "./docker-box.ts";
import { type GateObserver, StartGate } from "./gate.ts";
import { ImagePuller } from "./image.ts";
import { KeyedMutex } from "./mutex.ts";
import { Provisioner } from "./provision.ts";

export const HEALTH_EVERY_MS = 5000;
/** Failed pings in a row before a host counts as down (a busy engine can be slow to answer one). */
export const DOWN_AFTER = 3;
const PING_TIMEOUT_MS = 5000;

export type HostStatus = "ok" | "unavailable";

export class DockerHost {
  /** The connection and its reachability probe. */
  readonly engine: DockerEngine;
  /** The runner interface's engine on this host (box.ts). */
  readonly boxes: BoxEngine;
  readonly provisioner: Provisioner;
  readonly gate: StartGate;
  /** False once DOWN_AFTER pings in a row failed, true again at the next answer. */
  up = true;
  failures = 0;
  lastError: string | null = null;

  constructor(
    readonly spec: DockerHostSpec,
    deps: { log: Logger; instanceId: string; parallelism: () => number; poolParallelism?: () => number; observer?: GateObserver; callTimeoutMs?: number },
  ) {
    this.engine = new DockerEngine(spec.url, spec);
    const log = deps.log.child({ docker_host: spec.name });
    this.boxes = new DockerBoxEngine(this.engine, new ImagePuller(this.engine, log), deps.callTimeoutMs);
    this.provisioner = new Provisioner(this.boxes, log, deps.instanceId);
    this.gate = new StartGate(deps.parallelism, deps.observer, deps.poolParallelism);
  }

  get name(): string {
    return this.spec.name;
  }

  get status(): HostStatus {
    return this.up ? "ok" : "unavailable";
  }
}

/** What placement needs to know of a host's load: workspaces running or starting, pool members. */
export type HostUsage = Map<string, number>;

export class DockerHosts {
  readonly list: DockerHost[];
  private byName: Map<string, DockerHost>;
  /** One placement at a time (placeAndRecord). */
  private placing = new KeyedMutex();

  constructor(specs: readonly DockerHostSpec[], deps: ConstructorParameters<typeof DockerHost>[1]) {
    if (specs.length === 0) throw new Error("at least one Docker host is needed");
    this.list = specs.map((s) => new DockerHost(s, deps));
    this.byName = new Map(this.list.map((h) => [h.name, h]));
  }

  /** The first host: the one `runcell image build` and doctor talk to, and /healthz's engine. */
  get primary(): DockerHost {
    return this.list[0]!;
  }

  get(name: string): DockerHost | undefined {
    return this.byName.get(name);
  }

  /** A workspace's host, or CONTAINER_FAILED when it is not configured any more or is down. */
  of(row: { id: string; host: string }): DockerHost {
    const h = this.byName.get(row.host);
    if (!h) throw new AppError("CONTAINER_FAILED", `Workspace ${row.id} is on Docker host "${row.host}", which this server is not configured with (--docker-host …?name=${row.host})`);
    if (!h.up) throw unavailableError(row.id, h);
    return h;
  }

  /** Sums of the hosts' start gates (/metrics). */
  queue(): { waiting: number; running: number } {
    let waiting = 0;
    let running = 0;
    for (const h of this.list) {
      waiting += h.gate.waiting;
      running += h.gate.running;
    }
    return { waiting, running };
  }

  /**
   * Places a new workspace or warm-pool member and records it there (`record`: its row, or the
   * pool's pending member) before the next placement reads the hosts' usage: that read awaits the
   * database, so without this a burst of starts could all see the same free capacity.
   */
  placeAndRecord<T>(labels: readonly string[], usage: () => Promise<HostUsage>, record: (host: DockerHost) => T | Promise<T>): Promise<T> {
    return this.placing.run("", async () => record(this.place(labels, await usage())));
  }

  /**
   * The host a new workspace of a profile asking for `labels` goes to, given each host's usage;
   * CONTAINER_FAILED saying why when none can take it.
   */
  place(labels: readonly string[], usage: HostUsage): DockerHost {
    let best: DockerHost | null = null;
    let bestFree = -1;
    let bestUsed = 0;
    const matching = this.list.filter((h) => labelsMatch(h.spec.labels, labels));
    for (const h of matching) {
      if (!h.up) continue;
      const used = usage.get(h.name) ?? 0;
      const free = h.spec.capacity === null ? Number.POSITIVE_INFINITY : h.spec.capacity - used;
      if (free <= 0) continue;
      if (best === null || free > bestFree || (free === bestFree && used < bestUsed)) {
        best = h;
        bestFree = free;
        bestUsed = used;
      }
    }
    if (best) return best;
    if (matching.length === 0) {
      throw new AppError("CONTAINER_FAILED", `No Docker host has the labels ${labels.map((l) => `"${l}"`).join(", ")} that the profile's host_labels ask for`);
    }
    if (matching.every((h) => !h.up)) {
      throw new AppError("CONTAINER_FAILED", `Every Docker host for this profile is unavailable (${matching.map((h) => `${h.name}: ${h.lastError ?? "not answering"}`).join("; ")})`);
    }
    const full = matching.filter((h) => h.up).map((h) => `${h.name}: ${h.spec.capacity}`);
    const down = matching.filter((h) => !h.up).map((h) => h.name);
    throw new AppError(
      "CONTAINER_FAILED",
      `Every Docker host for this profile is at its capacity (${full.join(", ")})${down.length ? ` or unavailable (${down.join(", ")})` : ""}; try again when a workspace stops`,
    );
  }

  /**
   * Pings every host once; returns the hosts that went down and came back with this round.
   * A host counts as down after DOWN_AFTER failures in a row.
   */
  async check(): Promise<{ down: DockerHost[]; back: DockerHost[] }> {
    const down: DockerHost[] = [];
    const back: DockerHost[] = [];
    await Promise.all(
      this.list.map(async (h) => {
        const ok = await h.engine.available(0, PING_TIMEOUT_MS);
        if (ok) {
          h.failures = 0;
          h.lastError = null;
          if (!h.up) {
            h.up = true;
            back.push(h);
          }
          return;
        }
        h.failures++;
        h.lastError = h.engine.status.error ?? "not answering";
        if (h.up && h.failures >= DOWN_AFTER) {
          h.up = false;
          down.push(h);
        }
      }),
    );
    return { down, back };
  }
}

export function unavailableError(ctrId: string, h: DockerHost): AppError {
  return new AppError(
    "CONTAINER_FAILED",
    `Workspace ${ctrId} is on Docker host "${h.name}", which is not answering (${h.lastError ?? "unreachable"}); its files are there, so the session continues once the host is back`,
  );
}
