/**
 * Making a workspace's Docker objects: the labelled volume, the hardened container (spec.ts) and
 * its start. A missing image is pulled (image.ts) and the create retried; a name left behind by
 * an interrupted attempt is cleared; an engine without an init binary gets containers without one.
 * On failure nothing half-made is left running (the volume stays: it holds the files).
 */
import type Docker from "dockerode";
import type { Logger } from "../log.ts";
import { dockerMessage, dockerStatus } from "./docker.ts";
import type { ImagePuller } from "./image.ts";
import { containerOptions, labelsFor } from "./spec.ts";
import type { WorkspaceRow } from "./store.ts";

/** What a container is made from: a workspace row, or a warm-pool member (no session yet). */
export type ProvisionInput = Pick<WorkspaceRow, "id" | "session_id" | "name" | "volume" | "image" | "spec">;

export class Provisioner {
  /** docker-init as PID 1; turned off after an engine says it has none. */
  private init = true;

  constructor(
    private engine: { readonly client: Docker },
    private puller: ImagePuller,
    private log: Logger,
    private instanceId: string,
  ) {}

  private get client(): Docker {
    return this.engine.client;
  }

  /** Creates (or reuses) the volume, creates the container and starts it. `labels` go on both (a warm-pool member's). */
  async up(row: ProvisionInput, labels?: Record<string, string>): Promise<Docker.Container> {
    await this.client.createVolume({ Name: row.volume, Labels: { ...labelsFor({ ctrId: row.id, sessionId: row.session_id, instanceId: this.instanceId }), ...labels } });
    let c = await this.create(row, labels);
    try {
      await c.start();
      return c;
    } catch (e) {
      await c.remove({ force: true }).catch(() => {});
      if (!this.init || !/docker-init|init binary|init-path/i.test(dockerMessage(e))) throw e;
      this.log.warn("Docker engine has no init binary; workspaces run without one", { error: dockerMessage(e) });
      this.init = false;
      c = await this.create(row, labels);
      try {
        await c.start();
        return c;
      } catch (e2) {
        await c.remove({ force: true }).catch(() => {});
        throw e2;
      }
    }
  }

  private async create(row: ProvisionInput, labels?: Record<string, string>): Promise<Docker.Container> {
    const opts = containerOptions({
      ctrId: row.id,
      sessionId: row.session_id,
      instanceId: this.instanceId,
      name: row.name,
      volume: row.volume,
      image: row.image,
      spec: row.spec,
      init: this.init,
      labels,
    });
    try {
      return await this.client.createContainer(opts);
    } catch (e) {
      if (dockerStatus(e) === 404 && /no such image/i.test(dockerMessage(e))) {
        await this.puller.pull(row.image);
        return await this.client.createContainer(opts);
      }
      if (dockerStatus(e) === 409) {
        // A container of an interrupted earlier attempt holds the name.
        await this.client.getContainer(row.name).remove({ force: true }).catch(() => {});
        return await this.client.createContainer(opts);
      }
      throw e;
    }
  }
}
