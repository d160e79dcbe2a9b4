/**
 * What a workspace container is made of. Hardened by default:
 * - not privileged; every capability dropped except the ones a package manager running as root
 *   needs: CHOWN/FOWNER (dpkg sets owners and modes of the files it unpacks), DAC_OVERRIDE (root
 *   writing into directories it does not own, as in any image), SETUID/SETGID (apt drops to its
 *   `_apt` user to download; su/runuser) and KILL (stopping processes that changed user, which
 *   cancellation relies on). NET_RAW, MKNOD, SYS_CHROOT, SETFCAP, NET_BIND_SERVICE, AUDIT_WRITE… stay dropped;
 * - `no-new-privileges` (setuid binaries cannot raise privileges);
 * - pids, memory (swap included) and CPU limits from the profile; the profile's network;
 * - one named volume at /workspace, never a host path and never the Docker socket;
 * - docker-init as PID 1 to reap zombies, and an idle command any /bin/sh can run (the image's
 *   entrypoint is replaced: the container only waits for execs).
 */
import type Docker from "dockerode";
import type { WorkspaceSpec } from "../db/schema.ts";
import { WORKSPACE_ROOT } from "./paths.ts";

export const LABEL_WORKSPACE = "runcell.workspace";
export const LABEL_SESSION = "runcell.session";
export const LABEL_INSTANCE = "runcell.instance";
/** The `settings` key of this data dir's instance id (the LABEL_INSTANCE value; a restore gives a copy its own). */
export const INSTANCE_SETTING = "workspaces.instance_id";
/** A warm-pool member: the profile it was made for (pool.ts); it stays on the container after a session takes it. */
export const LABEL_POOL = "runcell.pool";
/** A warm-pool member: the hash of the image and container spec it was made with (a changed profile drains members with another). */
export const LABEL_POOL_KEY = "runcell.pool.key";
/**
 * A warm-pool member: the replica that made it (`rep_…`, peers.ts). Only that replica adopts or
 * takes it; the others leave it alone while that replica is registered and remove it once it is
 * gone. It stays on the container after a session takes it.
 */
export const LABEL_REPLICA = "runcell.replica";

export const CAP_ADD = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"];

/** Waits forever; exits at once on SIGTERM so `docker stop` is quick. */
export const IDLE_COMMAND = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"];

export interface ContainerInput {
  ctrId: string;
  sessionId: string;
  instanceId: string;
  name: string;
  volume: string;
  image: string;
  spec: WorkspaceSpec;
  /** docker-init as PID 1 (turned off only for an engine without an init binary). */
  init: boolean;
  /** More labels (a warm-pool member's). */
  labels?: Record<string, string>;
}

export function labelsFor(i: { ctrId: string; sessionId: string; instanceId: string }): Record<string, string> {
  return { [LABEL_WORKSPACE]: i.ctrId, [LABEL_SESSION]: i.sessionId, [LABEL_INSTANCE]: i.instanceId };
}

export function containerOptions(i: ContainerInput): Docker.ContainerCreateOptions {
  const memory = Math.round(i.spec.memory_mb * 1024 * 1024);
  return {
    name: i.name,
    Image: i.image,
    Entrypoint: IDLE_COMMAND,
    Cmd: [],
    WorkingDir: WORKSPACE_ROOT,
    // No environment of the profile here: it is resolved at every exec (secrets included), so a
    // changed or deleted secret applies at the next tool call and values never show in `docker inspect`.
    Env: [],
    Labels: { ...labelsFor(i), ...i.labels },
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: false,
    StopTimeout: 2,
    HostConfig: {
      Privileged: false,
      Init: i.init,
      CapDrop: ["ALL"],
      CapAdd: CAP_ADD,
      SecurityOpt: ["no-new-privileges:true"],
      NetworkMode: i.spec.network,
      PidsLimit: i.spec.pids,
      Memory: memory,
      MemorySwap: memory,
      NanoCpus: Math.round(i.spec.cpus * 1e9),
      Mounts: [{ Type: "volume", Source: i.volume, Target: WORKSPACE_ROOT, ReadOnly: false }],
      Binds: [],
      RestartPolicy: { Name: "no" },
      AutoRemove: false,
      LogConfig: { Type: "json-file", Config: { "max-size": "1m", "max-file": "1" } },
    },
  };
}
