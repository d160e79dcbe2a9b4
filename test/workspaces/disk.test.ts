/**
 * The disk cap (workspace_disk_mb, src/workspaces/disk.ts) against the real dockerd: with a 1 MB
 * cap, files written inside running workspaces (docker exec dd), then one disk check
 * (services.workspaces.checkDisk, what the minute worker runs):
 *
 * - a workspace over the cap is stopped (its container really is) and marked failed with a message
 *   naming the cap, and a command running in it fails with that message; admins are bound too;
 * - a workspace under the cap, or whose owner's override lifts it (0: none), is untouched;
 * - the measured figure is recorded (disk_bytes, disk_checked_at);
 * - the next turn starts it again with its files; still over, the next check stops it again;
 *   once files are deleted it stays up;
 * - what runs in the box cannot change the figure: with a `du` planted there that reports 4 KB,
 *   or one that never ends, the check still measures the volume (the engine counts it), stops the
 *   box, and does not wait on them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AppError } from "../../src/lib/errors.ts";
import type { WorkspaceRow, Workspaces } from "../../src/workspaces/service.ts";
import { overCapMessage } from "../../src/workspaces/disk.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { createUser } from "../helpers/users.ts";
import { docker, insertProfile, newWorkspace, sweepInstance } from "./helpers.ts";

const MB = 1024 * 1024;
let t: TestApp;
let ws: Workspaces;

interface Box {
  sessionId: string;
  row: WorkspaceRow;
}
let over: Box; // a user's workspace over the cap
let under: Box; // a user's workspace under it
let adminOver: Box; // an admin-role user's workspace over it
let raised: Box; // over 1 MB, but its owner's override is 10 MB
let uncapped: Box; // over 1 MB, but its owner's override is 0 (no cap)
let running: Promise<unknown>; // a command running in `over` when it is stopped

const sh = (b: Box, script: string) => ws.exec(b.sessionId, { cmd: ["/bin/sh", "-c", script] });
/** Random bytes (incompressible, not sparse) into /workspace. */
const fill = async (b: Box, kb: number, name = "blob") => {
  const r = await sh(b, `dd if=/dev/urandom of=/workspace/${name} bs=1024 count=${kb} 2>/dev/null && sync`);
  expect(r.exitCode, r.output).toBe(0);
};
const rowOf = async (b: Box) => (await ws.byId(b.row.id))!;
const containerRunning = async (b: Box) => (await docker.getContainer((await rowOf(b)).docker_id!).inspect()).State.Running;

async function box(role: "user" | "admin", policy?: Record<string, unknown>): Promise<Box> {
  const u = await createUser(t, { role });
  if (policy) await t.app.services.users.adminPatch(u.id, { policy });
  const { sessionId, ws: row } = await newWorkspace(t, u.id, await insertProfile(t, u.id));
  return { sessionId, row };
}

beforeAll(async () => {
  t = await startTestApp({ flags: ["--workspace-disk-mb", "1"] });
  ws = t.app.services.workspaces;
  [over, under, adminOver, raised, uncapped] = await Promise.all([box("user"), box("user"), box("admin"), box("user", { workspace_disk_mb: 10 }), box("user", { workspace_disk_mb: 0 })]);
  await Promise.all([fill(over, 3072), fill(under, 100), fill(adminOver, 3072), fill(raised, 3072), fill(uncapped, 3072)]);
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

describe("one disk check", () => {
  let before: number;
  let report: Awaited<ReturnType<Workspaces["checkDisk"]>>;

  test("stops exactly the workspaces over their owner's cap, admins' included", async () => {
    for (const b of [over, under, adminOver, raised, uncapped]) expect(await rowOf(b)).toMatchObject({ status: "running", disk_bytes: null, disk_checked_at: null });
    running = sh(over, "sleep 30").then(
      (r) => r,
      (e) => e,
    );
    await Bun.sleep(300);
    before = Date.now();
    report = await ws.checkDisk();
    expect([...report.stopped].sort()).toEqual([over.row.id, adminOver.row.id].sort());
    // Measured: every capped running workspace of this app (not the uncapped one).
    expect(report.checked).toBe(4);
  });

  test("a workspace over the cap: stopped, failed, with a message naming the cap", async () => {
    for (const b of [over, adminOver]) {
      const row = (await rowOf(b));
      expect(row.status).toBe("failed");
      expect(row.error).toBe(overCapMessage(row.disk_bytes!, MB));
      expect(row.error).toContain("over this server's disk cap of 1 MB per workspace (workspace_disk_mb)");
      expect(row.error).toContain(`take ${Math.ceil(row.disk_bytes! / MB)} MB`);
      expect(await containerRunning(b)).toBe(false);
    }
  });

  test("the command running in it fails with that message", async () => {
    const e = await running;
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).code).toBe("CONTAINER_FAILED");
    expect((e as AppError).message).toBe((await rowOf(over)).error!);
  });

  test("the measured figure is recorded, for those stopped and those left running", async () => {
    for (const b of [over, adminOver, raised]) {
      const row = (await rowOf(b));
      expect(row.disk_bytes!).toBeGreaterThanOrEqual(3 * MB);
      expect(row.disk_bytes!).toBeLessThan(4 * MB);
      expect(row.disk_checked_at!).toBeGreaterThanOrEqual(before);
    }
    const small = (await rowOf(under));
    expect(small.disk_bytes!).toBeGreaterThanOrEqual(100 * 1024);
    expect(small.disk_bytes!).toBeLessThan(MB);
    expect(small.disk_checked_at!).toBeGreaterThanOrEqual(before);
    expect(await rowOf(uncapped)).toMatchObject({ disk_bytes: null, disk_checked_at: null });
  });

  test("under the cap, or with the cap lifted for its owner: untouched and still working", async () => {
    for (const b of [under, raised, uncapped]) {
      expect(await rowOf(b)).toMatchObject({ status: "running", error: null });
      expect(await containerRunning(b)).toBe(true);
      expect((await sh(b, "echo alive")).output.trim()).toBe("alive");
    }
  });
});

describe("after the stop", () => {
  test("the next turn starts it again with its files; the next check stops it again while it is still over", async () => {
    const r = await sh(over, "ls /workspace");
    expect(r.output.trim()).toBe("blob");
    expect(await rowOf(over)).toMatchObject({ status: "running", error: null });
    const report = await ws.checkDisk();
    expect(report.stopped).toEqual([over.row.id]);
    expect((await rowOf(over)).status).toBe("failed");
    expect(await containerRunning(over)).toBe(false);
  });

  test("once the files are deleted it stays up", async () => {
    expect((await sh(over, "rm /workspace/blob && echo gone")).output.trim()).toBe("gone");
    const report = await ws.checkDisk();
    expect(report.stopped).toEqual([]);
    expect(await rowOf(over)).toMatchObject({ status: "running", error: null });
    expect((await rowOf(over)).disk_bytes!).toBeLessThan(MB);
    expect(await containerRunning(over)).toBe(true);
  });

  test("a live change of the cap applies at the next check", async () => {
    await t.app.services.runtimeConfig.patch({ policy: { workspace_disk_mb: 0 } });
    try {
      await fill(under, 2048, "more");
      expect((await ws.checkDisk()).stopped).toEqual([]);
      expect((await rowOf(under)).status).toBe("running");
    } finally {
      await t.app.services.runtimeConfig.patch({ policy: { workspace_disk_mb: 1 } });
    }
    expect((await ws.checkDisk()).stopped).toEqual([under.row.id]);
    expect((await rowOf(under)).error).toContain("workspace_disk_mb");
  });
});

/**
 * Plants a /bin/sh that answers the disk check's `du -sk /workspace` with `answer` (shell lines)
 * and runs everything else as before. In this image that is how: every command runs under a
 * /bin/sh wrapper (exec.ts), and busybox's sh runs its own du whatever the PATH holds; in a
 * Debian image a du first on the PATH (/usr/local/bin) does the same. The agent is root in its box.
 */
const plantDu = (b: Box, answer: string) =>
  sh(
    b,
    [
      "printf '%s\\n' '#!/bin/busybox sh'",
      `'case "$*" in *"du -sk /workspace") echo "$$"; ${answer}; exit 0;; esac'`,
      `'exec /bin/busybox sh "$@"' > /bin/sh.new && chmod +x /bin/sh.new && mv /bin/sh.new /bin/sh && echo planted`,
    ].join(" "),
  );

describe("a du planted in the box", () => {
  test("neither a du that lies nor one that never ends changes the figure or delays the check", async () => {
    const [liar, stuck] = await Promise.all([box("user"), box("user")]);
    await Promise.all([fill(liar, 3072), fill(stuck, 3072)]);
    expect((await plantDu(liar, 'echo "4 /workspace"')).output.trim()).toBe("planted");
    expect((await plantDu(stuck, "exec sleep 1000")).output.trim()).toBe("planted");
    // What the box now answers to the measurement runcell used to make there.
    expect((await ws.exec(liar.sessionId, { cmd: ["du", "-sk", "/workspace"] })).output.trim()).toBe("4 /workspace");
    expect((await ws.exec(stuck.sessionId, { cmd: ["du", "-sk", "/workspace"], timeoutMs: 1000 })).timedOut).toBe(true);
    expect((await sh(liar, "echo alive")).output.trim()).toBe("alive");
    const started = Date.now();
    const report = await ws.checkDisk();
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(report.stopped).toEqual(expect.arrayContaining([liar.row.id, stuck.row.id]));
    for (const b of [liar, stuck]) {
      const row = await rowOf(b);
      expect(row.status).toBe("failed");
      expect(row.disk_bytes!).toBeGreaterThanOrEqual(3 * MB);
      expect(row.error).toBe(overCapMessage(row.disk_bytes!, MB));
      expect(await containerRunning(b)).toBe(false);
    }
  });
});
