/**
 * A stuck Docker engine (src/workspaces/docker-box.ts `bounded`, `--docker-timeout`): the second
 * real dockerd of scripts/second-dockerd.sh, frozen with SIGSTOP — its socket still accepts
 * connections, and nothing answers, as when an engine wedges. Every call that should take moments
 * fails with EngineTimeout after the call timeout instead of waiting for ever; through the app, a
 * session start answers CONTAINER_FAILED naming the engine and the wait, and a task fails with it
 * (before, both waited as long as the engine did, holding the workspace's lock and the task). Once
 * the engine is thawed, the same calls work again.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import Docker from "dockerode";
import { silentLogger } from "../../src/log.ts";
import { EngineTimeout } from "../../src/workspaces/box.ts";
import { DockerBoxEngine } from "../../src/workspaces/docker-box.ts";
import { DockerEngine } from "../../src/workspaces/docker.ts";
import { ImagePuller } from "../../src/workspaces/image.ts";
import { LABEL_INSTANCE } from "../../src/workspaces/spec.ts";
import { createProfile, waitTask } from "../helpers/agent.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { startMockAnthropic, type MockProviderServer } from "../helpers/mock-anthropic.ts";
import { api, createUser, type TestUser } from "../helpers/users.ts";
import { type SecondDockerd, secondDockerd, secondDockerdEnv } from "../helpers/second-dockerd.ts";
import { testSpec } from "./box-contract.ts";
import { sweepInstance } from "./helpers.ts";

const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
const CALL_MS = 1500;

let env: SecondDockerd;
let engineB: Docker;
const instance = `engine-timeout-${process.pid}`;
/** Volumes the box-level test may leave on the second engine (`sweep` finds only labelled ones). */
const volumes: string[] = ["rc-timeout-v"];

/** The second dockerd's process: frozen, then thawed (always, even when a test fails). */
const dockerd = () => Number(readFileSync(env.PIDFILE, "utf8").trim());
let frozen = false;
function freeze() {
  process.kill(dockerd(), "SIGSTOP");
  frozen = true;
}
function thaw() {
  if (frozen) process.kill(dockerd(), "SIGCONT");
  frozen = false;
}

/** Runs `fn`, expecting it to fail with EngineTimeout within a few seconds of the call timeout; answers the error. */
async function timesOut(fn: () => Promise<unknown>, ms = CALL_MS): Promise<EngineTimeout> {
  const started = performance.now();
  const e = await fn().then(
    () => null,
    (err: unknown) => err,
  );
  const took = performance.now() - started;
  expect(e).toBeInstanceOf(EngineTimeout);
  expect(took).toBeGreaterThanOrEqual(ms - 50);
  expect(took).toBeLessThan(ms + 3000);
  return e as EngineTimeout;
}

beforeAll(() => {
  secondDockerd("start");
  env = secondDockerdEnv();
  engineB = new Docker({ socketPath: env.SOCKET });
}, 120_000);

afterAll(async () => {
  thaw();
  await sweepInstance(instance, engineB);
  for (const v of volumes) await engineB.getVolume(v).remove().catch(() => {});
});

describe("the runner interface on a stuck engine", () => {
  test("create, start, inspect, exec, stop, remove, listings and volumes fail with EngineTimeout after the call timeout; all work again once it answers", async () => {
    const connection = new DockerEngine(`unix://${env.SOCKET}`);
    const engine = new DockerBoxEngine(connection, new ImagePuller(connection, silentLogger), CALL_MS);
    const specs = testSpec(instance, IMAGE, "t");
    // Each spec's volume, removed at the end whoever made it: a create the engine only carries out
    // after the thaw makes the volume itself, without runcell's labels.
    const specOf = () => {
      const spec = specs();
      volumes.push(spec.volume);
      return spec;
    };
    const spec = specOf();
    // A box made while the engine answers, for the calls on an existing box.
    await engine.createVolume(spec.volume, { [LABEL_INSTANCE]: instance });
    const made = await engine.create(spec);
    await made.start();
    freeze();
    try {
      const e = await timesOut(() => engine.create(specOf()));
      expect(e.call).toBe("create the container");
      expect(e.message).toBe(`the Docker engine did not answer (create the container) within ${CALL_MS / 1000} s`);
      const box = engine.box(made.id);
      expect((await timesOut(() => box.start())).call).toBe("start the container");
      expect((await timesOut(() => box.state())).call).toBe("inspect the container");
      expect((await timesOut(() => box.exec({ cmd: ["true"], cwd: "/", stdin: false }))).call).toBe("create a command");
      expect((await timesOut(() => box.stat("/"))).call).toBe("look at a path");
      // A stop waits out the grace period on top.
      expect((await timesOut(() => box.stop(1), CALL_MS + 1000)).call).toBe("stop the container");
      expect((await timesOut(() => box.remove())).call).toBe("remove the container");
      expect((await timesOut(() => engine.list({ [LABEL_INSTANCE]: instance }))).call).toBe("list containers");
      expect((await timesOut(() => engine.createVolume("rc-timeout-v", {}))).call).toBe("create the volume");
      expect((await timesOut(() => engine.listVolumes({ [LABEL_INSTANCE]: instance }))).call).toBe("list volumes");
      expect((await timesOut(() => engine.removeVolume("rc-timeout-v"))).call).toBe("remove the volume");
    } finally {
      thaw();
    }
    // The engine answers again. (Calls it had already read may still take effect as it catches up
    // — the abandoned remove among them — so a new box is used.)
    const again = await engine.create(specOf());
    await again.start();
    expect((await again.state()).running).toBe(true);
    const exec = await again.exec({ cmd: ["echo", "back"], cwd: "/", stdin: false });
    let out = "";
    exec.onOutput((_s, c) => (out += new TextDecoder().decode(c)));
    await exec.ended;
    expect(out).toBe("back\n");
    expect((await engine.list({ [LABEL_INSTANCE]: instance })).map((b) => b.id)).toContain(again.id);
    await again.remove();
    expect((await again.state()).exists).toBe(false);
  }, 90_000);
});

describe("the app on a stuck engine (--docker-timeout 2s)", () => {
  let t: TestApp;
  let mock: MockProviderServer;
  let user: TestUser;
  let profileId: string;
  beforeAll(async () => {
    t = await startTestApp({ flags: ["--docker-host", `unix://${env.SOCKET}`, "--docker-timeout", "2s"] });
    mock = startMockAnthropic().script(() => ({ text: "done" }));
    user = await createUser(t);
    profileId = await createProfile(t, user, { mock });
  }, 60_000);
  afterAll(async () => {
    thaw();
    const instanceId = t?.app.services.workspaces.instanceId;
    await t?.stop();
    await mock?.stop();
    if (instanceId) await sweepInstance(instanceId, engineB);
  });

  test("a session start answers CONTAINER_FAILED naming the engine and the wait, a task fails with it; both work once the engine answers", async () => {
    freeze();
    try {
      const started = performance.now();
      const s = await api(t, "POST", "/v1/sessions", user.bearer, { profile_id: profileId });
      expect(performance.now() - started).toBeLessThan(15_000);
      expect(s.body.code, JSON.stringify(s.body)).toBe("CONTAINER_FAILED");
      expect(s.body.error).toContain('Docker host "default" did not answer (create the volume) within 2 s');
      expect(s.body.error).toContain("--docker-timeout");
      // Nothing half-made stays behind: the session was rolled back.
      expect((await api(t, "GET", "/v1/sessions", user.bearer)).body.data).toEqual([]);

      // A task whose new session's workspace cannot start is answered as that error (not 202
      // "queued"), naming the task and session it left, failed.
      const submitted = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: profileId, prompt: "hello" });
      expect(submitted.status, JSON.stringify(submitted.body)).toBe(502);
      const { task_id: taskId, session_id: sessionId } = submitted.body.details;
      expect([submitted.body.code, taskId, sessionId]).toEqual(["CONTAINER_FAILED", expect.stringMatching(/^task_/), expect.stringMatching(/^sess_/)]);
      expect(submitted.body.error).toContain('Docker host "default" did not answer');
      const failed = await waitTask(t, user, taskId, undefined, 20_000);
      expect(failed).toMatchObject({ status: "failed", error: { code: "CONTAINER_FAILED" } });
      expect(failed.error.message).toContain('Docker host "default" did not answer');
    } finally {
      thaw();
    }
    const s = await api(t, "POST", "/v1/sessions", user.bearer, { profile_id: profileId });
    expect(s.status, JSON.stringify(s.body)).toBe(201);
    const submitted = await api(t, "POST", "/v1/tasks", user.bearer, { profile_id: profileId, prompt: "hello" });
    expect((await waitTask(t, user, submitted.body.task_id)).status).toBe("completed");
  }, 90_000);
});
