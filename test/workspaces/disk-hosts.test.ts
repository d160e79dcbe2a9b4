/**
 * The disk check over several Docker hosts (src/workspaces/disk.ts): each host is checked on its
 * own. Beside the real dockerd, a second "host" is a local server speaking the Engine API that
 * answers pings and listings at once but never finishes sizing its volumes (`GET /system/df`), as
 * an engine with very many files would. While its check hangs, the real host's workspaces are
 * still checked, at every tick (before, a tick was skipped while any check ran and the hosts were
 * checked one workspace after another); the slow host is asked once, not once per tick; and when
 * its answer is an error, its workspace is left unmeasured (its last figure kept) and running.
 * A check reads the running rows once for all its hosts, and a failed read fails the check quietly.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "../../src/db/ids.ts";
import { workspaces } from "../../src/db/tables.ts";
import type { WorkspaceRow, Workspaces } from "../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser } from "../helpers/users.ts";
import { insertProfile, insertSession, newWorkspace, sweepInstance } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "runcell-disk-hosts-"));
const socket = join(dir, "slow.sock");
let dfCalls = 0;
/** Ends the slow host's pending df answers (with a 500, as a failing engine would). */
let release: () => void = () => {};
const slowEngine = Bun.serve({
  unix: socket,
  fetch(req) {
    const path = new URL(req.url).pathname.replace(/^\/v[\d.]+/, "");
    if (path === "/_ping") return new Response("OK", { headers: { "Api-Version": "1.41" } });
    if (path === "/version") return Response.json({ Version: "20.10.24", ApiVersion: "1.41", MinAPIVersion: "1.12" });
    if (path === "/containers/json") return Response.json([]);
    if (path === "/volumes") return Response.json({ Volumes: [], Warnings: null });
    if (path === "/system/df") {
      dfCalls++;
      return new Promise<Response>((resolve) => {
        const prev = release;
        release = () => {
          prev();
          resolve(Response.json({ message: "the engine gave up" }, { status: 500 }));
        };
      });
    }
    return Response.json({ message: `not served here: ${req.method} ${path}` }, { status: 404 });
  },
});

const MB = 1024 * 1024;
let t: TestApp;
let ws: Workspaces;

beforeAll(async () => {
  t = await startTestApp({
    flags: ["--workspace-disk-mb", "1", "--docker-host", "unix:///var/run/docker.sock?name=local&labels=real", "--docker-host", `unix://${socket}?name=slow&labels=slow`],
  });
  ws = t.app.services.workspaces;
});

afterAll(async () => {
  release();
  await sweepInstance(ws.instanceId);
  await t.stop();
  slowEngine.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

test("a host slow to size its volumes delays no other host's check", async () => {
  const user = await createUser(t);
  const { sessionId, ws: real } = await newWorkspace(t, user.id, await insertProfile(t, user.id, { host_labels: ["real"] }));
  expect(real.host).toBe("local");
  const sh = (script: string) => ws.exec(sessionId, { cmd: ["/bin/sh", "-c", script] });
  expect((await sh("dd if=/dev/urandom of=/workspace/blob bs=1024 count=3072 2>/dev/null && sync && echo ok")).output.trim()).toBe("ok");
  // A running workspace of the same user on the slow host (its row only: that host has no containers).
  const slowProfile = await insertProfile(t, user.id, { host_labels: ["slow"] });
  const slowId = newId("container");
  const now = Date.now();
  await t.app.services.db.insert(workspaces).values({
    id: slowId, user_id: user.id, session_id: await insertSession(t, user.id, slowProfile.id), profile_id: slowProfile.id, name: `runcell-${slowId}`, image: t.config.workspaceImage,
    host: "slow", docker_id: "0123456789ab", volume: `runcell-${slowId}`, spec: { network: "none", memory_mb: 64, cpus: 0.2, pids: 64 },
    disk_bytes: null, disk_checked_at: null, status: "running", error: null, last_active_at: now, created_at: now, updated_at: now,
  });
  const rowOf = async (id: string) => (await ws.byId(id)) as WorkspaceRow;

  // How often a check reads the running rows (the store's own read, counted).
  let reads = 0;
  const running = ws.store.running;
  ws.store.running = () => (reads++, running.call(ws.store));

  // The first tick: the real host's check ends (and stops its workspace); the slow host's hangs.
  // Both hosts' checks share one read of the running rows.
  let firstDone = false;
  const first = ws.checkDisk({ skipBusy: true }).then((r) => ((firstDone = true), r));
  for (let i = 0; i < 100 && (await rowOf(real.id)).status !== "failed"; i++) await Bun.sleep(100);
  expect(await rowOf(real.id)).toMatchObject({ status: "failed" });
  expect((await rowOf(real.id)).disk_bytes!).toBeGreaterThanOrEqual(3 * MB);
  expect(dfCalls).toBe(1);
  expect(firstDone).toBe(false);
  expect(reads).toBe(1);

  // The next turn starts it again; the next tick checks the real host again at once and leaves the slow one to its check.
  expect((await sh("echo up")).output.trim()).toBe("up");
  const started = Date.now();
  const second = await ws.checkDisk({ skipBusy: true });
  expect(Date.now() - started).toBeLessThan(10_000);
  expect(second.stopped).toEqual([real.id]);
  expect(dfCalls).toBe(1);
  expect(firstDone).toBe(false);
  expect(reads).toBe(2);

  // The slow host fails: its workspace is not measured (no figure is better than the box's own) and keeps running.
  release();
  const report = await first;
  expect(report.stopped).toEqual([real.id]);
  expect(report.checked).toBe(1);
  expect(await rowOf(slowId)).toMatchObject({ status: "running", disk_bytes: null, disk_checked_at: null });
  await t.app.services.db.delete(workspaces).where(eq(workspaces.id, slowId));
  ws.store.running = running;
});

test("a failed read of the running rows fails every host's check quietly: an empty report, nothing thrown", async () => {
  const running = ws.store.running;
  let reads = 0;
  ws.store.running = async () => {
    reads++;
    throw new Error("the database went away");
  };
  try {
    expect(await ws.checkDisk()).toEqual({ checked: 0, stopped: [] });
    expect(reads).toBe(1);
  } finally {
    ws.store.running = running;
  }
});
