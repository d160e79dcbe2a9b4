/** Workspace lifecycle against the real dockerd: hardening, concurrency, idle stop, failures, reconciliation. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { workspaces } from "../../src/db/tables.ts";
import { AppError } from "../../src/lib/errors.ts";
import { statusOf } from "../../src/http/errors.ts";
import type { ProfileRow, Workspaces } from "../../src/workspaces/service.ts";
import { CAP_ADD, LABEL_INSTANCE, LABEL_SESSION, LABEL_WORKSPACE } from "../../src/workspaces/spec.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlRun } from "../helpers/db.ts";
import { waitFor } from "../helpers/net.ts";
import { createUser, type TestUser } from "../helpers/users.ts";
import { docker, insertProfile, insertSession, newWorkspace, sweepInstance } from "./helpers.ts";

let t: TestApp;
let ws: Workspaces;
let user: TestUser;
let profile: ProfileRow;

const errOf = (p: Promise<unknown>) => p.then(() => null, (e) => e as AppError);
const sh = (sessionId: string, script: string) => ws.exec(sessionId, { cmd: ["/bin/sh", "-c", script] });
const inspect = (dockerId: string) => docker.getContainer(dockerId).inspect();

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  user = await createUser(t);
  profile = await insertProfile(t, user.id);
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

describe("a new workspace", () => {
  test("is hardened, limited, labelled and has only its volume", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    expect(row).toMatchObject({ status: "running", session_id: sessionId, profile_id: profile.id, image: t.config.workspaceImage, name: `runcell-${row.id}` });
    expect(row.id).toMatch(/^ctr_/);
    const info = await inspect(row.docker_id!);
    const hc = info.HostConfig;
    expect(info.Name).toBe(`/runcell-${row.id}`);
    expect(hc.Privileged).toBe(false);
    expect(hc.CapDrop).toEqual(["ALL"]);
    expect([...(hc.CapAdd ?? [])].sort()).toEqual([...CAP_ADD].sort());
    expect(hc.SecurityOpt).toContain("no-new-privileges:true");
    expect(hc.PidsLimit).toBe(128);
    expect(hc.Memory).toBe(256 * 1024 * 1024);
    expect(hc.MemorySwap).toBe(256 * 1024 * 1024);
    expect(hc.NanoCpus).toBe(0.5e9);
    expect(hc.NetworkMode).toBe("none");
    expect(hc.Init).toBe(true);
    expect(hc.Binds ?? []).toEqual([]);
    expect(info.Mounts.map((m) => [m.Type, m.Name, m.Destination, m.RW])).toEqual([["volume", row.volume, "/workspace", true]]);
    expect(JSON.stringify(info)).not.toContain("docker.sock");
    expect(info.Config.Labels).toMatchObject({ [LABEL_WORKSPACE]: row.id, [LABEL_SESSION]: sessionId, [LABEL_INSTANCE]: ws.instanceId });
    const vol = await docker.getVolume(row.volume).inspect();
    expect(vol.Labels).toMatchObject({ [LABEL_WORKSPACE]: row.id, [LABEL_SESSION]: sessionId, [LABEL_INSTANCE]: ws.instanceId });

    // …and it holds from the inside: the effective capability set, no_new_privs, no network.
    const status = (await sh(sessionId, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /sys/class/net")).output;
    const capBits = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, KILL: 5, SETGID: 6, SETUID: 7 } as Record<string, number>;
    const mask = CAP_ADD.reduce((m, c) => m | (1 << capBits[c]!), 0);
    expect(status).toMatch(new RegExp(`CapEff:\\s+0*${mask.toString(16)}\\n`));
    expect(status).toMatch(/NoNewPrivs:\s+1/);
    expect(status.trim().split("\n").slice(2)).toEqual(["lo"]);
    await ws.removeForSession(sessionId);
  });

  test("createForSession is idempotent per session", async () => {
    const sessionId = await insertSession(t, user.id, profile.id);
    const input = { userId: user.id, sessionId, profile, env: {} };
    const [a, b] = await Promise.all([ws.createForSession(input), ws.createForSession(input)]);
    expect(a.id).toBe(b.id);
    expect((await ws.createForSession(input)).id).toBe(a.id);
    await ws.removeForSession(sessionId);
  });

  test("removeForSession removes container, volume and record", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.removeForSession(sessionId);
    expect(await ws.byId(row.id)).toBeNull();
    expect(await docker.getContainer(row.docker_id!).inspect().then(() => "exists", (e) => e.statusCode)).toBe(404);
    expect(await docker.getVolume(row.volume).inspect().then(() => "exists", (e) => e.statusCode)).toBe(404);
    await ws.removeForSession(sessionId);
  });
});

describe("per-profile concurrency", () => {
  test("20 parallel starts → exactly 5 run, the rest 429 before anything is created", async () => {
    const limited = await insertProfile(t, user.id, { limits: { max_concurrency: 5 } });
    const sessions = await Promise.all(Array.from({ length: 20 }, () => insertSession(t, user.id, limited.id)));
    const results = await Promise.allSettled(sessions.map((sessionId) => ws.createForSession({ userId: user.id, sessionId, profile: limited })));
    const ok = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason as AppError);
    expect(ok.length).toBe(5);
    expect(refused.length).toBe(15);
    for (const e of refused) {
      expect(e.code).toBe("CONCURRENCY_LIMIT");
      expect(statusOf(e)).toBe(429);
    }
    const mine = new Set(sessions);
    const containers = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABEL_INSTANCE}=${ws.instanceId}`] }) });
    expect(containers.filter((c) => mine.has(c.Labels[LABEL_SESSION]!)).length).toBe(5);
    const volumes = (await docker.listVolumes({ filters: JSON.stringify({ label: [`${LABEL_INSTANCE}=${ws.instanceId}`] }) })).Volumes ?? [];
    expect(volumes.filter((v) => mine.has(v.Labels?.[LABEL_SESSION] ?? "")).length).toBe(5);
    await Promise.all(sessions.map((s) => ws.removeForSession(s)));
  });

  test("restarting a stopped workspace counts against the limit too", async () => {
    const one = await insertProfile(t, user.id, { limits: { max_concurrency: 1 } });
    const a = await newWorkspace(t, user.id, one);
    await ws.stop(a.ws.id);
    const b = await newWorkspace(t, user.id, one);
    const e = await errOf(ws.ensureRunning(a.sessionId));
    expect(e?.code).toBe("CONCURRENCY_LIMIT");
    expect((await ws.byId(a.ws.id))!.status).toBe("stopped");
    await ws.removeForSession(b.sessionId);
    expect((await ws.ensureRunning(a.sessionId)).status).toBe("running");
    await ws.removeForSession(a.sessionId);
  });
});

describe("idle stop", () => {
  test("an idle workspace is stopped, then started again by ensureRunning with its files", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.writeFile(sessionId, "keep.txt", "survives\n");
    expect(await ws.stopIdle()).not.toContain(row.id);
    await sqlRun(t, "UPDATE workspaces SET last_active_at = ? WHERE id = ?", [Date.now() - t.config.workspaceIdleTimeoutMs - 1000, row.id]);
    expect(await ws.stopIdle()).toContain(row.id);
    expect((await ws.byId(row.id))!.status).toBe("stopped");
    expect((await inspect(row.docker_id!)).State.Running).toBe(false);
    const up = await ws.ensureRunning(sessionId);
    expect(up.status).toBe("running");
    expect(up.docker_id).toBe(row.docker_id);
    expect((await sh(sessionId, "cat keep.txt")).output).toBe("survives\n");
    await ws.removeForSession(sessionId);
  });

  test("a workspace with an exec in flight is not stopped", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    const running = sh(sessionId, "sleep 1; echo done");
    await Bun.sleep(300);
    await sqlRun(t, "UPDATE workspaces SET last_active_at = 1 WHERE id = ?", [row.id]);
    expect(await ws.stopIdle()).toEqual([]);
    expect((await running).output).toBe("done\n");
    await ws.removeForSession(sessionId);
  });

  test("the worker stops idle workspaces on its own (--workspace-idle-timeout)", async () => {
    const quick = await startTestApp({ flags: ["--workspace-idle-timeout", "1s"] });
    try {
      const u = await createUser(quick);
      const { sessionId, ws: row } = await newWorkspace(quick, u.id, await insertProfile(quick, u.id));
      await quick.app.services.workspaces.writeFile(sessionId, "f.txt", "kept");
      await waitFor(async () => (await quick.app.services.workspaces.byId(row.id))!.status === "stopped", { timeoutMs: 5000, what: "idle stop" });
      expect(quick.logs.some((l) => l.includes("workspace stopped after being idle"))).toBe(true);
      expect(new TextDecoder().decode(await quick.app.services.workspaces.readFile(sessionId, "f.txt"))).toBe("kept");
      expect((await quick.app.services.workspaces.ensureRunning(sessionId)).status).toBe("running");
    } finally {
      await sweepInstance(quick.app.services.workspaces.instanceId);
      await quick.stop();
    }
  });
});

describe("failures", () => {
  test("a killed container fails the exec with CONTAINER_FAILED; the next turn restarts it with its files", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.writeFile(sessionId, "keep.txt", "still here");
    const inFlight = errOf(sh(sessionId, "sleep 30"));
    await Bun.sleep(300);
    const killedAt = Date.now();
    await docker.getContainer(row.docker_id!).kill();
    const e = await inFlight;
    expect(Date.now() - killedAt).toBeLessThan(3000);
    expect(e?.code).toBe("CONTAINER_FAILED");
    expect(await ws.byId(row.id)).toMatchObject({ status: "failed" });
    expect((await errOf(sh(sessionId, "true"))) ?? "restarted").toBe("restarted");
    expect((await ws.byId(row.id))!.status).toBe("running");
    expect((await sh(sessionId, "cat keep.txt")).output).toBe("still here");
    await ws.removeForSession(sessionId);
  });

  test("a container paused by hand is unpaused by the next turn, with its files", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.writeFile(sessionId, "keep.txt", "paused, not lost");
    await docker.getContainer(row.docker_id!).pause();
    const up = await ws.ensureRunning(sessionId);
    expect(up).toMatchObject({ status: "running", docker_id: row.docker_id });
    expect((await inspect(row.docker_id!)).State.Paused).toBe(false);
    expect((await sh(sessionId, "cat keep.txt")).output).toBe("paused, not lost");
    await ws.removeForSession(sessionId);
  });

  test("a vanished container is recreated on the same volume", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.writeFile(sessionId, "keep.txt", "on the volume");
    await docker.getContainer(row.docker_id!).remove({ force: true });
    const e = await errOf(sh(sessionId, "true"));
    expect(e?.code).toBe("CONTAINER_FAILED");
    const up = await ws.ensureRunning(sessionId);
    expect(up.status).toBe("running");
    expect(up.docker_id).not.toBe(row.docker_id);
    expect(up.volume).toBe(row.volume);
    expect((await sh(sessionId, "cat keep.txt")).output).toBe("on the volume");
    await ws.removeForSession(sessionId);
  });

  test("a container whose volume was removed too: recreated empty, and the record says the files were lost", async () => {
    const { sessionId, ws: row } = await newWorkspace(t, user.id, profile);
    await ws.writeFile(sessionId, "keep.txt", "on the volume");
    await docker.getContainer(row.docker_id!).remove({ force: true });
    await docker.getVolume(row.volume).remove();
    expect((await errOf(sh(sessionId, "true")))?.code).toBe("CONTAINER_FAILED");
    const up = await ws.ensureRunning(sessionId);
    expect(up.status).toBe("running");
    expect(up.error).toContain("the workspace's files were lost and it started empty");
    expect((await sh(sessionId, "ls -A /workspace")).output.trim()).toBe("");
    // The next start of it is an ordinary one again.
    await ws.stop(row.id);
    expect((await ws.ensureRunning(sessionId)).error).toBeNull();
    await ws.removeForSession(sessionId);
  });

  test("an image that cannot be had → CONTAINER_FAILED naming the image and the fix", async () => {
    const image = `runcell-test/absent-${crypto.randomUUID().slice(0, 8)}:latest`;
    const bad = await insertProfile(t, user.id, { image });
    const sessionId = await insertSession(t, user.id, bad.id);
    const e = await errOf(ws.createForSession({ userId: user.id, sessionId, profile: bad }));
    expect(e?.code).toBe("CONTAINER_FAILED");
    expect(statusOf(e!)).toBe(502);
    expect(e?.message).toContain(image);
    expect(e?.message).toContain("runcell image build");
    expect(e?.message).toContain("--workspace-image");
    // The engine's own words (the host's resolver, its registry) are for the server log only.
    expect(e?.message).toMatch(/\((the registry could not be reached from the Docker host|the registry has no such image, or it needs a login)\)/);
    expect(e?.message).not.toMatch(/dial tcp|lookup|registry-1\.docker\.io/);
    expect(t.logs.some((l) => l.includes("workspace image pull failed") && l.includes(image))).toBe(true);
    expect(await ws.forSession(sessionId)).toMatchObject({ status: "failed" });
    const leftovers = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`${LABEL_SESSION}=${sessionId}`] }) });
    expect(leftovers).toEqual([]);
    expect(t.logs.some((l) => l.includes("workspace image missing; pulling it") && l.includes(image))).toBe(true);
    await ws.removeForSession(sessionId);
  });

  test("a start that fails after another replica brought the workspace up leaves its running row alone", async () => {
    // A replica that stalled past the task's lease while it made the workspace: the replica that
    // took the task over brought it up (row running) before this one's attempt failed.
    const prov = ws.hosts.primary.provisioner;
    const up = prov.up;
    prov.up = async (row, labels) => {
      const box = await up.call(prov, row, labels);
      await t.app.services.db.update(workspaces).set({ status: "running", docker_id: box.id }).where(eq(workspaces.id, row.id));
      throw new Error("this replica's attempt failed late");
    };
    try {
      const sessionId = await insertSession(t, user.id, profile.id);
      const e = await errOf(ws.createForSession({ userId: user.id, sessionId, profile }));
      expect(e?.code).toBe("CONTAINER_FAILED");
      const row = (await ws.forSession(sessionId))!;
      expect(row).toMatchObject({ status: "running", error: null });
      expect((await inspect(row.docker_id!)).State.Running).toBe(true);
      // The workspace works: the next turn uses it as it is.
      expect((await sh(sessionId, "echo ok")).output).toBe("ok\n");
      await ws.removeForSession(sessionId);
    } finally {
      prov.up = up;
    }
  });

  test("a deleted workspace is recreated from the session's profile on the next turn", async () => {
    const withEnv = await insertProfile(t, user.id, { env: { GREETING: "hello from the profile" } });
    const { sessionId, ws: row } = await newWorkspace(t, user.id, withEnv);
    await ws.remove(user.id, row.id);
    expect(await errOf(ws.remove(user.id, row.id))).toMatchObject({ code: "NOT_FOUND" });
    const fresh = await ws.ensureRunning(sessionId);
    expect(fresh.id).not.toBe(row.id);
    expect((await sh(sessionId, 'echo "$GREETING"')).output).toBe("hello from the profile\n");
    await ws.removeForSession(sessionId);
  });
});

describe("reconciliation", () => {
  test("removes this instance's orphans, marks vanished and exited records, leaves other instances alone", async () => {
    const orphanLabels = { [LABEL_WORKSPACE]: "ctr_01orphan0000000000000000000", [LABEL_SESSION]: "sess_gone", [LABEL_INSTANCE]: ws.instanceId };
    const foreignLabels = { ...orphanLabels, [LABEL_INSTANCE]: "some-other-instance" };
    const mk = (labels: Record<string, string>) =>
      docker.createContainer({ Image: t.config.workspaceImage, Cmd: ["sleep", "600"], Labels: labels, HostConfig: { NetworkMode: "none" } });
    const orphan = await mk(orphanLabels);
    const foreign = await mk(foreignLabels);
    const orphanName = (await orphan.inspect()).Name.replace(/^\//, "");
    const orphanVolume = `runcell-test-orphan-${crypto.randomUUID().slice(0, 8)}`;
    await docker.createVolume({ Name: orphanVolume, Labels: orphanLabels });
    try {
      const vanished = await newWorkspace(t, user.id, profile);
      await docker.getContainer(vanished.ws.docker_id!).remove({ force: true });
      const exited = await newWorkspace(t, user.id, profile);
      await docker.getContainer(exited.ws.docker_id!).stop({ t: 0 });
      const healthy = await newWorkspace(t, user.id, profile);

      const report = await ws.reconcile();
      expect(report.removed_containers).toEqual([orphanName]);
      expect(await orphan.inspect().then(() => "exists", (e) => e.statusCode)).toBe(404);
      expect((await foreign.inspect()).Id).toBe(foreign.id);
      expect(report.removed_volumes).toContain(orphanVolume);
      expect(report.marked_stopped).toEqual(expect.arrayContaining([vanished.ws.id, exited.ws.id]));
      expect(await ws.byId(vanished.ws.id)).toMatchObject({ status: "stopped", docker_id: null });
      expect(await ws.byId(exited.ws.id)).toMatchObject({ status: "stopped" });
      expect(await ws.byId(healthy.ws.id)).toMatchObject({ status: "running" });
      expect((await inspect(healthy.ws.docker_id!)).State.Running).toBe(true);
      expect(t.logs.some((l) => l.includes("workspaces reconciled with Docker") && l.includes(orphanVolume))).toBe(true);

      // A second pass has nothing left to do, and the marked workspaces come back on demand.
      expect(await ws.reconcile()).toEqual({ removed_containers: [], removed_volumes: [], marked_stopped: [], marked_failed: [] });
      expect((await ws.ensureRunning(vanished.sessionId)).status).toBe("running");
      expect((await ws.ensureRunning(exited.sessionId)).status).toBe("running");
      for (const w of [vanished, exited, healthy]) await ws.removeForSession(w.sessionId);
    } finally {
      await foreign.remove({ force: true }).catch(() => {});
      await orphan.remove({ force: true }).catch(() => {});
      await docker.getVolume(orphanVolume).remove().catch(() => {});
    }
  });
});
