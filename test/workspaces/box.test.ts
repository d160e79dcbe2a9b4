/** The runner interface's contract (box-contract.ts) on Docker: DockerBox over a real container. */
import { afterAll } from "bun:test";
import type Docker from "dockerode";
import { DockerBox } from "../../src/workspaces/docker-box.ts";
import { boxContract } from "./box-contract.ts";
import { docker } from "./helpers.ts";

const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
const LABEL = "runcell.test.box-contract";
const made = new Map<string, Docker.Container>();

afterAll(async () => {
  for (const c of made.values()) await c.remove({ force: true }).catch(() => {});
});

boxContract("Docker", () => ({
  async make() {
    const c = await docker.createContainer({
      Image: IMAGE,
      Cmd: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
      Labels: { [LABEL]: "1" },
      HostConfig: { NetworkMode: "none" },
    });
    await c.start();
    made.set(c.id, c);
    return new DockerBox(c);
  },
  async remove(box) {
    await made.get(box.id)?.remove({ force: true });
    made.delete(box.id);
  },
}));
