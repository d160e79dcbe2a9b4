/**
 * Making a workspace's box on a host's engine (box.ts): the labelled volume, the hardened box
 * (spec.ts) and its start. A missing image is pulled (image.ts) and the create retried; a name held by
 * the workspace's own box (an interrupted attempt, another replica's) is that box, any other holder is
 * cleared — but a box or volume another runcell instance labelled is never used or removed
 * (ForeignObject); an engine without an init binary gets containers without one.
 * On failure nothing half-made is left running (the volume stays: it holds the files).
 */
import type { Logger } from "../log.ts";
import { type Box, type BoxEngine, ForeignObject, ImageMissing, InitMissing, NameTaken } from "./box.ts";
import { LABEL_INSTANCE, LABEL_WORKSPACE, labelsFor } from "./spec.ts";
import type { WorkspaceRow } from "./store.ts";

/** What a container is made from: a workspace row, or a warm-pool member (no session yet). */
export type ProvisionInput = Pick<WorkspaceRow, "id" | "session_id" | "name" | "volume" | "image" | "spec">;

export class Provisioner {
  /** An init as PID 1; turned off after an engine says it has none. */
  private init = true;

  constructor(
    private engine: BoxEngine,
    private log: Logger,
    private instanceId: string,
  ) {}

  /** Whether this instance's volume of the workspace still exists (its files). */
  async volumeHeld(row: Pick<WorkspaceRow, "id" | "volume">): Promise<boolean> {
    const found = await this.engine.listVolumes({ [LABEL_WORKSPACE]: row.id, [LABEL_INSTANCE]: this.instanceId });
    return found.some((v) => v.name === row.volume);
  }

  /** Creates (or reuses) the volume, creates the box and starts it. `labels` go on both (a warm-pool member's). */
  async up(row: ProvisionInput, labels?: Record<string, string>): Promise<Box> {
    const held = await this.engine.createVolume(row.volume, { ...labelsFor({ ctrId: row.id, sessionId: row.session_id, instanceId: this.instanceId }), ...labels });
    this.refuseForeign(`the volume ${row.volume}`, held);
    let box = await this.create(row, labels);
    try {
      await box.start();
      return box;
    } catch (e) {
      await box.remove().catch(() => {});
      if (!this.init || !(e instanceof InitMissing)) throw e;
      this.log.warn("Docker engine has no init binary; workspaces run without one", { error: e.message });
      this.init = false;
      box = await this.create(row, labels);
      try {
        await box.start();
        return box;
      } catch (e2) {
        await box.remove().catch(() => {});
        throw e2;
      }
    }
  }

  private async create(row: ProvisionInput, labels?: Record<string, string>): Promise<Box> {
    const spec = {
      ctrId: row.id,
      sessionId: row.session_id,
      instanceId: this.instanceId,
      name: row.name,
      volume: row.volume,
      image: row.image,
      spec: row.spec,
      init: this.init,
      labels,
    };
    try {
      return await this.engine.create(spec);
    } catch (e) {
      if (e instanceof ImageMissing) {
        await this.engine.pullImage(row.image);
        return await this.engine.create(spec);
      }
      if (e instanceof NameTaken) {
        // The name is held by this workspace's own box — made by an interrupted earlier attempt,
        // or by another replica that started the same workspace (it stalled past the task's lease
        // while creating it, and this one took the task over): that box is the workspace's, and is
        // used (it may be running already). Any other holder is cleared.
        const holder = (await this.engine.list({ [LABEL_WORKSPACE]: row.id })).find((b) => b.name === row.name);
        if (holder) {
          this.refuseForeign(`the container ${row.name}`, holder.labels);
          return this.engine.box(holder.id);
        }
        await this.engine.box(row.name).remove().catch(() => {});
        return await this.engine.create(spec);
      }
      throw e;
    }
  }

  /**
   * Removes a workspace's box and volume — only this instance's: a box or volume of that name
   * another runcell labelled (a restored data dir's twin on the same engine) is left alone.
   * Either one already gone is fine.
   */
  discard(ctrId: string, volume: string): Promise<void> {
    return discardWorkspace(this.engine, this.instanceId, ctrId, volume);
  }

  /** Throws ForeignObject when `labels` are another runcell instance's. */
  private refuseForeign(what: string, labels: Record<string, string>) {
    const owner = labels[LABEL_INSTANCE];
    if (owner === undefined || owner === this.instanceId) return;
    throw new ForeignObject(
      `${what} belongs to another runcell server on this Docker engine (instance ${owner}), so it is neither used nor removed. ` +
        `This data dir was likely restored from that server's backup; its workspaces start anew in new sessions. ` +
        `To take the original server's workspaces over once it is stopped for good, restore with --keep-instance.`,
    );
  }
}

/** Removes the box and volume of workspace `ctrId` that instance `instanceId` labelled (see Provisioner.discard). */
export async function discardWorkspace(engine: BoxEngine, instanceId: string, ctrId: string, volume: string): Promise<void> {
  const ours = { [LABEL_WORKSPACE]: ctrId, [LABEL_INSTANCE]: instanceId };
  for (const b of await engine.list(ours)) await engine.box(b.id).remove();
  for (const v of await engine.listVolumes(ours)) if (v.name === volume) await engine.removeVolume(v.name);
}
