/** The runner interface's contract (box-contract.ts) on Docker: DockerBoxEngine and DockerBox on the real engine. */
import { afterAll, expect, test } from "bun:test";
import { silentLogger } from "../../src/log.ts";
import { DockerBoxEngine } from "../../src/workspaces/docker-box.ts";
import { DockerEngine } from "../../src/workspaces/docker.ts";
import { ImagePuller } from "../../src/workspaces/image.ts";
import { LABEL_INSTANCE } from "../../src/workspaces/spec.ts";
import { boxContract, testSpec } from "./box-contract.ts";
import { docker } from "./helpers.ts";

const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
/** Every box and volume the contract makes carries this instance label (or its own, under the same prefix). */
const INSTANCE = `box-contract-${process.pid}`;
/** This file's instance label, or one a contract test made under it. */
const ours = (label: string | undefined) => label === INSTANCE || !!label?.startsWith(`${INSTANCE}-`);

const connection = new DockerEngine("unix:///var/run/docker.sock");
const engine = new DockerBoxEngine(connection, new ImagePuller(connection, silentLogger));

afterAll(async () => {
  // Anything a failed test left behind — this file's only (its instance label, or one under it):
  // another file's contract (ssh-host.test.ts) may be running beside it.
  for (const c of await docker.listContainers({ all: true })) if (ours(c.Labels?.[LABEL_INSTANCE])) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (const v of (await docker.listVolumes()).Volumes ?? []) if (ours(v.Labels?.[LABEL_INSTANCE])) await docker.getVolume(v.Name).remove().catch(() => {});
});

boxContract("Docker", () => ({ engine, spec: testSpec(INSTANCE, IMAGE, "contract") }));

test("the engine is the one --docker-host names: DOCKER_HOST and the other DOCKER_* variables of the environment are not read", async () => {
  const saved = { ...process.env };
  Object.assign(process.env, { DOCKER_HOST: "tcp://127.0.0.1:1", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: "/nonexistent", DOCKER_PATH_PREFIX: "/nope" });
  try {
    const local = new DockerEngine("unix:///var/run/docker.sock");
    expect(await local.available(0, 5000)).toBe(true);
    expect(process.env.DOCKER_HOST).toBe("tcp://127.0.0.1:1"); // the environment itself is left as it was
  } finally {
    for (const k of ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_PATH_PREFIX"]) if (saved[k] === undefined) delete process.env[k];
    Object.assign(process.env, saved);
  }
});
