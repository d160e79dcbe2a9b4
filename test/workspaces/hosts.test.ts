/**
 * Workspaces on two Docker hosts, both real engines on this machine: the usual dockerd ("a", unix
 * socket) and a second dockerd (scripts/second-dockerd.sh: own data root, exec root, pidfile and
 * socket, no bridge) reached over TCP with TLS and a client certificate ("b"). Placement by labels
 * and free capacity, each workspace's container on its own host, exec and files routed there,
 * reconciliation per host, the second engine stopped → its workspaces unavailable and new sessions
 * on the first, and back again. Plus the --docker-host parser and the placement rule without Docker.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Docker from "dockerode";
import { parseArgs, resolveConfig } from "../../src/config.ts";
import { defaultHostName, parseDockerHost, parseDockerHosts } from "../../src/lib/docker-hosts.ts";
import type { AppError } from "../../src/lib/errors.ts";
import { createLogger } from "../../src/log.ts";
import { DockerHosts } from "../../src/workspaces/hosts.ts";
import type { WorkspaceRow } from "../../src/workspaces/service.ts";
import { startTestApp, type TestApp, tempDir } from "../helpers/app.ts";
import { waitFor } from "../helpers/net.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { secondDockerd, secondDockerdEnv } from "../helpers/second-dockerd.ts";
import { docker as dockerA, insertProfile, insertSession, sweepInstance } from "./helpers.ts";

const env = secondDockerdEnv();
const dockerB = new Docker({ socketPath: env.SOCKET });
const parseConfigArgs = (argv: string[], environ: Record<string, string> = {}) => resolveConfig(parseArgs(["--data-dir", tempDir(), ...argv]).flags, environ);
const errOf = (p: Promise<unknown>) => p.then(() => null, (e) => e as AppError);
const onEngine = (engine: Docker, dockerId: string) => engine.getContainer(dockerId).inspect().then((i) => i.State.Status, (e) => (e.statusCode === 404 ? "absent" : `error ${e.message}`));

/** Stops the app and removes its containers and volumes from both engines (the second one started again for that). */
async function stopAndSweep(t: TestApp) {
  secondDockerd("start");
  const instance = t.app.services.workspaces.instanceId;
  await t.stop();
  await sweepInstance(instance);
  await sweepInstance(instance, dockerB);
}

describe("--docker-host values", () => {
  test("a bare URL is the host named default; later ones host2, host3", () => {
    expect(parseDockerHost("unix:///var/run/docker.sock", 0)).toEqual({ name: "default", url: "unix:///var/run/docker.sock", labels: [], capacity: null, tlsDir: null, sshKey: null, hostKey: null });
    expect(defaultHostName(2)).toBe("host3");
  });
  test("name, labels, capacity and tls_dir are read and removed from the engine URL", () => {
    expect(parseDockerHost("tcp://10.0.0.5:2376?name=gpu1&labels=gpu,region=eu&capacity=40&tls_dir=/etc/rc/gpu1", 1)).toEqual({
      name: "gpu1",
      url: "tcp://10.0.0.5:2376",
      labels: ["gpu", "region=eu"],
      capacity: 40,
      tlsDir: "/etc/rc/gpu1",
      sshKey: null,
      hostKey: null,
    });
  });
  test("ssh_key and host_key are read and removed from an ssh:// URL", () => {
    // Pasted as ssh-keygen prints it: "+" and "/" unescaped.
    const fp = "SHA256:ab+cd/" + "A".repeat(37);
    expect(parseDockerHost(`ssh://deploy@10.0.0.6:2222?name=edge&ssh_key=/etc/rc/id_ed25519&host_key=${fp}`, 1)).toMatchObject({
      name: "edge",
      url: "ssh://deploy@10.0.0.6:2222",
      sshKey: "/etc/rc/id_ed25519",
      hostKey: fp,
    });
  });
  test.each([
    ["docker.sock", /not a Docker host URL/],
    ["ftp://x", /unsupported Docker host/],
    // No socket or no host: refused at start, not a refused connection (or the local socket) later.
    ["unix://", /names no socket/],
    ["unix:///", /names no socket/],
    ["tcp://", /names no host \(use tcp:\/\/host:port\)/],
    ["ssh://", /names no host \(use ssh:\/\/user@host\)/],
    ["unix:///s?colour=red", /unknown parameter "colour"/],
    ["unix:///s?capacity=0", /capacity must be a whole number/],
    ["unix:///s?capacity=2.5", /capacity must be a whole number/],
    ["unix:///s?name=a%20b", /name must be/],
    ["unix:///s?labels=gpu,=x", /label "=x"/],
    ["unix:///s?tls_dir=/x", /tls_dir applies to tcp/],
    ["tcp://h:2376?tls_dir=certs", /tls_dir must be an absolute path/],
    ["tcp://h:2376?ssh_key=/k", /apply to ssh:\/\/ hosts only/],
    ["ssh://u@h?ssh_key=id_rsa", /ssh_key must be an absolute path/],
    ["ssh://u@h?host_key=MD5:aa:bb", /host_key must be a fingerprint/],
  ])("%s is refused", (raw, why) => {
    expect(() => parseDockerHost(raw, 0)).toThrow(why);
  });
  test("two hosts with one name are refused", () => {
    expect(() => parseDockerHosts(["unix:///a?name=x", "unix:///b?name=x"])).toThrow(/two Docker hosts are named "x"/);
  });
  test("the flag repeats; the environment takes a space-separated list; errors name where the value came from", () => {
    const c = parseConfigArgs(["--docker-host", "unix:///a.sock?name=a", "--docker-host", "unix:///b.sock?name=b&labels=ssd"]);
    expect(c.dockerHosts.map((h) => [h.name, h.url, h.labels])).toEqual([
      ["a", "unix:///a.sock", []],
      ["b", "unix:///b.sock", ["ssd"]],
    ]);
    expect(c.dockerHost).toBe("unix:///a.sock");
    const e = parseConfigArgs([], { RUNCELL_DOCKER_HOST: "unix:///a.sock  tcp://h:2375?name=far" });
    expect(e.dockerHosts.map((h) => h.name)).toEqual(["default", "far"]);
    expect(() => parseConfigArgs(["--docker-host", "unix:///s?capacity=-1"])).toThrow(/--docker-host: .*capacity/);
  });
});

describe("placement (no Docker)", () => {
  const hosts = new DockerHosts(parseDockerHosts(["unix:///a?name=a&capacity=4", "unix:///b?name=b&capacity=2&labels=ssd", "unix:///c?name=c&labels=ssd,gpu"]), {
    log: createLogger({ level: "error", sink: () => {} }),
    instanceId: "x",
    parallelism: () => 4,
  });
  const place = (labels: string[], usage: Record<string, number>) => {
    try {
      return hosts.place(labels, new Map(Object.entries(usage))).name;
    } catch (e) {
      return (e as Error).message;
    }
  };
  test("the most free capacity wins; a host without one counts as unlimited; ties go to the least used", () => {
    expect(place([], { a: 0, b: 0, c: 0 })).toBe("c");
    expect(place(["ssd"], { b: 0, c: 5 })).toBe("c");
    const limited = new DockerHosts(parseDockerHosts(["unix:///a?name=a&capacity=4", "unix:///b?name=b&capacity=4"]), { log: createLogger({ level: "error", sink: () => {} }), instanceId: "x", parallelism: () => 4 });
    const at = (usage: Record<string, number>) => limited.place([], new Map(Object.entries(usage))).name;
    expect(at({ a: 1, b: 0 })).toBe("b");
    expect(at({ a: 1, b: 2 })).toBe("a");
    expect(at({ a: 2, b: 2 })).toBe("a"); // a tie: the order given
  });
  test("labels must all be on the host", () => {
    expect(place(["gpu"], {})).toBe("c");
    expect(place(["ssd", "gpu"], {})).toBe("c");
    expect(place(["tpu"], {})).toMatch(/No Docker host has the labels "tpu"/);
  });
  test("full and down hosts are skipped, with a message saying which", () => {
    hosts.get("c")!.up = false;
    expect(place(["ssd"], { b: 1 })).toBe("b");
    expect(place(["ssd"], { b: 2 })).toBe("Every Docker host for this profile is at its capacity (b: 2) or unavailable (c); try again when a workspace stops");
    expect(place(["gpu"], {})).toMatch(/Every Docker host for this profile is unavailable \(c: /);
    hosts.get("c")!.up = true;
  });
});

describe("two Docker engines", () => {
  let t: TestApp;
  let user: TestUser;

  beforeAll(async () => {
    secondDockerd("start");
    t = await startTestApp({
      flags: [
        "--docker-host", "unix:///var/run/docker.sock?name=a&capacity=4",
        "--docker-host", `${env.TCP}?name=b&labels=ssd&capacity=2&tls_dir=${env.TLS_DIR}`,
      ],
    });
    user = await createUser(t);
  }, 120_000);
  afterAll(() => stopAndSweep(t), 120_000);

  const start = async (profile: Awaited<ReturnType<typeof insertProfile>>) => {
    const sessionId = await insertSession(t, user.id, profile.id);
    return { sessionId, ws: await t.app.services.workspaces.createForSession({ userId: user.id, sessionId, profile }) };
  };
  const engineOf = (row: WorkspaceRow) => (row.host === "a" ? dockerA : dockerB);

  let onB: { sessionId: string; ws: WorkspaceRow }[] = [];

  test("workspaces spread by free capacity; each container is on its row's host and no other; the next one is refused", async () => {
    const profile = await insertProfile(t, user.id, { limits: { max_concurrency: 20 } });
    const started: { sessionId: string; ws: WorkspaceRow }[] = [];
    for (let i = 0; i < 6; i++) started.push(await start(profile));
    const hosts = started.map((s) => s.ws.host);
    // a: 4 free, b: 2 free → a, a (3 vs 2), then a tie 2/2 goes to the less used b, …
    expect(hosts.filter((h) => h === "a")).toHaveLength(4);
    expect(hosts.filter((h) => h === "b")).toHaveLength(2);
    for (const s of started) {
      expect(await onEngine(engineOf(s.ws), s.ws.docker_id!)).toBe("running");
      expect(await onEngine(s.ws.host === "a" ? dockerB : dockerA, s.ws.docker_id!)).toBe("absent");
    }
    const full = await errOf(start(profile));
    expect(full?.code).toBe("CONTAINER_FAILED");
    expect(full?.message).toMatch(/at its capacity \(a: 4, b: 2\)/);
    // At its own limit too: the caller's limit is what the refusal names, not the hosts'.
    const capped = await errOf(start({ ...profile, limits: { ...profile.limits, max_concurrency: 6 } }));
    expect(capped?.code).toBe("CONCURRENCY_LIMIT");
    onB = started.filter((s) => s.ws.host === "b");
    for (const s of started.filter((x) => x.ws.host === "a")) await t.app.services.workspaces.removeForSession(s.sessionId);
  }, 120_000);

  test("exec and files reach the container on its host (over TLS for b)", async () => {
    const { sessionId } = onB[0]!;
    const w = t.app.services.workspaces;
    const r = await w.exec(sessionId, { cmd: ["sh", "-c", "echo on-b > /workspace/where.txt && cat /workspace/where.txt"] });
    expect(r.exitCode).toBe(0);
    expect(r.output.trim()).toBe("on-b");
    expect(new TextDecoder().decode(await w.readFile(sessionId, "where.txt")).trim()).toBe("on-b");
    await w.writeFile(sessionId, "written.txt", "via put");
    expect((await w.listDir(sessionId, "/workspace")).data.map((e) => e.name).sort()).toEqual(["where.txt", "written.txt"]);
  }, 60_000);

  test("a profile's host_labels choose the hosts; a label no host has is a clear error", async () => {
    const ssd = await insertProfile(t, user.id, { host_labels: ["ssd"], limits: { max_concurrency: 20 } });
    // b is at its capacity (2): nothing else has the label.
    const err = await errOf(start(ssd));
    expect(err?.message).toMatch(/at its capacity \(b: 2\)/);
    await t.app.services.workspaces.removeForSession(onB[1]!.sessionId);
    const placed = await start(ssd);
    expect(placed.ws.host).toBe("b");
    onB = [onB[0]!, placed];
    const tpu = await insertProfile(t, user.id, { host_labels: ["tpu"] });
    expect((await errOf(start(tpu)))?.message).toMatch(/No Docker host has the labels "tpu"/);
  }, 60_000);

  test("reconciliation runs per host: a container removed behind runcell's back on b marks its row stopped, and the next turn recreates it there", async () => {
    const { sessionId, ws } = onB[1]!;
    await dockerB.getContainer(ws.docker_id!).remove({ force: true });
    const report = await t.app.services.workspaces.reconcile();
    expect(report.marked_stopped).toContain(ws.id);
    const again = await t.app.services.workspaces.ensureRunning(sessionId);
    expect(again.host).toBe("b");
    expect(await onEngine(dockerB, again.docker_id!)).toBe("running");
  }, 60_000);

  test("the second engine stopped: its workspaces become unavailable, their turns fail clearly, new sessions go to a; back: stopped, then running again", async () => {
    const w = t.app.services.workspaces;
    secondDockerd("stop");
    for (let i = 0; i < 5 && w.hosts.get("b")!.up; i++) await w.checkHosts();
    expect(w.hosts.get("b")!.up).toBe(false);
    for (const s of onB) expect((await w.byId(s.ws.id))?.status).toBe("unavailable");
    const rec = await (await t.fetch(`/v1/workspaces/${onB[0]!.ws.id}`, { headers: user.bearer })).json();
    expect(rec.status).toBe("unavailable");
    expect(rec.error).toMatch(/Docker host "b" is not answering/);
    const err = await errOf(w.exec(onB[0]!.sessionId, { cmd: ["true"] }));
    expect(err?.code).toBe("CONTAINER_FAILED");
    expect(err?.message).toMatch(/on Docker host "b", which is not answering/);
    // /healthz: one host answers, so Docker is ok; the hosts are listed.
    const health = await (await t.fetch("/healthz")).json();
    expect(health.docker).toBe("ok");
    const profile = await insertProfile(t, user.id, { limits: { max_concurrency: 20 } });
    const next = await start(profile);
    expect(next.ws.host).toBe("a");
    expect(await onEngine(dockerA, next.ws.docker_id!)).toBe("running");
    const ssd = await insertProfile(t, user.id, { host_labels: ["ssd"] });
    expect((await errOf(start(ssd)))?.message).toMatch(/Every Docker host for this profile is unavailable \(b: /);
    // A task without a session: answered 502 CONTAINER_FAILED naming the session it made, which is
    // still announced (no workspace to name), then the task fails.
    const answer = await t.fetch("/v1/tasks", { method: "POST", headers: user.bearer, body: JSON.stringify({ profile_id: ssd.id, prompt: "hi" }) });
    const failedSubmit = await answer.json();
    expect([answer.status, failedSubmit.code]).toEqual([502, "CONTAINER_FAILED"]);
    const sub = failedSubmit.details as { task_id: string; session_id: string };
    const frames = await waitFor(async () => {
      const page = await (await t.fetch(`/v1/sessions/${sub.session_id}/events`, { headers: user.bearer })).json();
      return page.data.some((f: { type: string }) => f.type === "task:failed") ? page.data : null;
    });
    expect(frames.map((f: { type: string }) => f.type)).toEqual(["session.ready", "task:failed"]);
    expect(frames[0]).toMatchObject({ container_id: null, container_name: null, profile_id: ssd.id });
    expect(frames[1]).toMatchObject({ code: "CONTAINER_FAILED" });

    secondDockerd("start");
    const back = await w.checkHosts();
    expect(back.back).toEqual(["b"]);
    for (const s of onB) expect((await w.byId(s.ws.id))?.status).toBe("stopped");
    const r = await w.exec(onB[0]!.sessionId, { cmd: ["cat", "/workspace/where.txt"] });
    expect(r.output.trim()).toBe("on-b");
    expect((await w.byId(onB[0]!.ws.id))?.status).toBe("running");
    const healthAfter = await (await t.fetch("/healthz")).json();
    expect(healthAfter.docker_hosts).toEqual({ a: "ok", b: "ok" });
  }, 120_000);
});

describe("the warm pool on two Docker engines", () => {
  let t: TestApp;
  let user: TestUser;

  beforeAll(async () => {
    secondDockerd("start");
    t = await startTestApp({
      flags: ["--max-warm-pool", "2", "--docker-host", "unix:///var/run/docker.sock?name=a", "--docker-host", `unix://${env.SOCKET}?name=b&labels=ssd`],
    });
    user = await createUser(t);
  }, 120_000);
  afterAll(() => stopAndSweep(t), 120_000);

  const poolOf = async (id: string) => (await (await t.fetch(`/v1/profiles/${id}`, { headers: user.bearer })).json()).pool as { size: number; ready: number; starting: number };
  const until = (what: string, ok: () => Promise<boolean>, timeoutMs = 60_000) => waitFor(ok, { what, timeoutMs, intervalMs: 100 });

  test("members are placed by the profile's labels, a take gives a workspace on that host, and a host that goes down takes its members out of the pool until it is back", async () => {
    const res = await t.fetch("/v1/profiles", {
      method: "POST",
      headers: user.bearer,
      body: JSON.stringify({ image: t.config.workspaceImage, warm_pool: 2, host_labels: ["ssd"], limits: { max_concurrency: 5, memory_mb: 256, cpus: 0.5, pids: 128 } }),
    });
    expect(res.status).toBe(201);
    const profile = await res.json();
    await until("2 members", async () => (await poolOf(profile.id)).ready === 2);
    const filters = JSON.stringify({ label: [`runcell.instance=${t.app.services.workspaces.instanceId}`, `runcell.pool=${profile.id}`] });
    expect((await dockerB.listContainers({ filters })).length).toBe(2);
    expect((await dockerA.listContainers({ filters })).length).toBe(0);

    const w = t.app.services.workspaces;
    const row = (await t.app.services.profiles.byIdAny(profile.id))!;
    const sessionId = await insertSession(t, user.id, profile.id);
    const ws = await w.createForSession({ userId: user.id, sessionId, profile: row });
    expect(ws.host).toBe("b");
    expect(await onEngine(dockerB, ws.docker_id!)).toBe("running");
    await until("the pool refilled", async () => (await poolOf(profile.id)).ready === 2);

    secondDockerd("stop");
    for (let i = 0; i < 5 && w.hosts.get("b")!.up; i++) await w.checkHosts();
    expect((await poolOf(profile.id)).ready).toBe(0);
    expect((await w.byId(ws.id))?.status).toBe("unavailable");
    // No other host has the label: a new session of the profile fails clearly (no member, no host).
    const next = await insertSession(t, user.id, profile.id);
    expect((await errOf(w.createForSession({ userId: user.id, sessionId: next, profile: row })))?.message).toMatch(/Every Docker host for this profile is unavailable \(b: /);

    secondDockerd("start");
    expect((await w.checkHosts()).back).toEqual(["b"]);
    await until("the pool back on b", async () => (await poolOf(profile.id)).ready === 2, 90_000);
    expect((await dockerB.listContainers({ filters })).length).toBe(2);
  }, 240_000);
});
