/** Docker exec in a real workspace: output, exit codes, stdin, caps, timeout, cancel, env. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AppError } from "../../src/lib/errors.ts";
import type { Workspaces } from "../../src/workspaces/service.ts";
import { startTestApp, type TestApp } from "../helpers/app.ts";
import { sqlRun } from "../helpers/db.ts";
import { createUser } from "../helpers/users.ts";
import { waitFor } from "../helpers/net.ts";
import { insertProfile, newWorkspace, sweepInstance } from "./helpers.ts";

const SECRET = "s3cr3t-" + crypto.randomUUID();
let t: TestApp;
let ws: Workspaces;
let sessionId: string;
let ctrId: string;

const sh = (script: string, extra: Partial<Parameters<Workspaces["exec"]>[1]> = {}) => ws.exec(sessionId, { cmd: ["/bin/sh", "-c", script], ...extra });
/** The test's `sleep 60` / `sleep 61` processes still alive in the workspace. */
const strays = async () =>
  (await sh("ps -o pid,args")).output
    .split("\n")
    .filter((l) => /^\s*\d+\s+sleep 6[01]$/.test(l));

beforeAll(async () => {
  t = await startTestApp();
  ws = t.app.services.workspaces;
  const u = await createUser(t);
  const profile = await insertProfile(t, u.id);
  const made = await newWorkspace(t, u.id, profile, { API_TOKEN_FOR_TOOL: SECRET, PLAIN: "visible" });
  sessionId = made.sessionId;
  ctrId = made.ws.id;
});

afterAll(async () => {
  await sweepInstance(ws.instanceId);
  await t.stop();
});

describe("exec", () => {
  test("round trip: combined stdout and stderr, exit code 0", async () => {
    const r = await sh("echo out; echo err >&2");
    expect(r.exitCode).toBe(0);
    expect(r.output.split("\n").sort()).toEqual(["", "err", "out"]);
    expect(r).toMatchObject({ truncated: false, timedOut: false, cancelled: false });
  });

  test("a non-zero exit is returned, not thrown", async () => {
    expect((await sh("exit 3")).exitCode).toBe(3);
    const missing = await ws.exec(sessionId, { cmd: ["no-such-command"] });
    expect(missing.exitCode).toBe(127);
    expect(missing.output).toContain("no-such-command");
  });

  test("argv is passed as is, never through a shell", async () => {
    const r = await ws.exec(sessionId, { cmd: ["echo", "$HOME", "a b", "'q'"] });
    expect(r.output).toBe("$HOME a b 'q'\n");
  });

  test("cwd defaults to /workspace; cwd and env can be set", async () => {
    expect((await sh("pwd")).output).toBe("/workspace\n");
    expect((await sh('pwd; echo "$X"', { cwd: "/tmp", env: { X: "from-exec" } })).output).toBe("/tmp\nfrom-exec\n");
  });

  test("stdin: text and binary", async () => {
    expect((await sh("tr a-z A-Z", { stdin: "hello\n" })).output).toBe("HELLO\n");
    const bytes = new Uint8Array(256).map((_, i) => i);
    const r = await sh("wc -c; ", { stdin: bytes });
    expect(r.output.trim()).toBe("256");
    expect((await sh("cat", { stdin: "" })).output).toBe("");
  });

  test("output over the cap is truncated, keeping head and tail, and says so", async () => {
    const r = await sh("i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done", { maxOutputBytes: 400 });
    expect(r.truncated).toBe(true);
    expect(r.exitCode).toBe(0);
    expect(r.output.startsWith("line-0\nline-1\n")).toBe(true);
    expect(r.output.endsWith("line-1999\n")).toBe(true);
    expect(r.output).toMatch(/\[… \d+ bytes of output omitted …\]/);
    expect(r.output.length).toBeLessThan(400 + 60);
  });

  test("a timeout kills the process", async () => {
    const started = Date.now();
    const r = await sh("sleep 60; echo never", { timeoutMs: 500 });
    expect(r.timedOut).toBe(true);
    expect(r.cancelled).toBe(false);
    expect(r.output).not.toContain("never");
    expect(Date.now() - started).toBeLessThan(2500);
    expect(await strays()).toEqual([]);
  });

  test("a timeout on a paused container: the kill fails and the result says the command may still run", async () => {
    const name = (await ws.byId(ctrId))!.name;
    const run = sh("sleep 60; echo never", { timeoutMs: 800 });
    await Bun.sleep(300);
    expect(Bun.spawnSync(["docker", "pause", name]).exitCode).toBe(0);
    let r;
    try {
      r = await run;
    } finally {
      Bun.spawnSync(["docker", "unpause", name]);
    }
    expect(r.timedOut).toBe(true);
    expect(r.notKilled).toBeTruthy();
    const left = await strays();
    expect(left.length).toBeGreaterThanOrEqual(1);
    await sh(`kill -9 ${left.map((l) => l.trim().split(/\s+/)[0]).join(" ")}`);
    await waitFor(async () => (await strays()).length === 0, { what: "the leftover sleep killed" });
    // A kill that works says nothing of the sort.
    expect((await sh("sleep 60", { timeoutMs: 300 })).notKilled).toBeUndefined();
  });

  test("an abort kills the running process tree within 2 s", async () => {
    const ac = new AbortController();
    const run = sh("sleep 61 & sleep 60; echo never", { signal: ac.signal });
    await Bun.sleep(400);
    expect((await strays()).length).toBe(2);
    const aborted = Date.now();
    ac.abort();
    const r = await run;
    expect(Date.now() - aborted).toBeLessThan(2000);
    expect(r.cancelled).toBe(true);
    expect(r.output).not.toContain("never");
    expect(await strays()).toEqual([]);
  });

  test("killMarked: processes marked with another value die with their descendants; ours, unmarked ones and the rest live", async () => {
    // Detached (output to /dev/null, so the exec ends), like servers a killed server process left.
    // 301: another value; 304: an unmarked child of a process with another value (its own
    // environment emptied); 305: another value after a variable whose value holds a newline.
    await sh(
      [
        "RUNCELL_T=aaaa sleep 301 >/dev/null 2>&1 &",
        "RUNCELL_T=kkkk sleep 302 >/dev/null 2>&1 &",
        "sleep 303 >/dev/null 2>&1 &",
        "RUNCELL_T=aaaa sh -c 'env -i sleep 304 & wait' >/dev/null 2>&1 &",
        "NL='x\ny' RUNCELL_T=aaaa sleep 305 >/dev/null 2>&1 &",
        "RUNCELL_U=aaaa sleep 306 >/dev/null 2>&1 &",
      ].join("\n"),
    );
    const sleeps = async () =>
      (await sh("ps -o args")).output
        .split("\n")
        .filter((l) => /^sleep 30\d$/.test(l.trim()))
        .map((l) => l.trim())
        .sort();
    expect(await sleeps()).toEqual(["sleep 301", "sleep 302", "sleep 303", "sleep 304", "sleep 305", "sleep 306"]);
    // sleep 301, the sh of 304 and sleep 305 are marked.
    expect(await ws.killMarked(sessionId, "RUNCELL_T", "kkkk")).toBe(3);
    expect(await sleeps()).toEqual(["sleep 302", "sleep 303", "sleep 306"]);
    expect(await ws.killMarked(sessionId, "RUNCELL_T", "kkkk")).toBe(0);
    expect(await ws.killMarked(sessionId, "RUNCELL_T", "zzzz")).toBe(1);
    expect(await sleeps()).toEqual(["sleep 303", "sleep 306"]);
    await sh("pkill -f 'sleep 30[36]' || killall sleep || true");
  });

  test("an already aborted signal runs nothing", async () => {
    const ac = new AbortController();
    ac.abort();
    const r = await sh("touch /workspace/should-not-exist", { signal: ac.signal });
    expect(r.cancelled).toBe(true);
    expect((await sh("ls /workspace/should-not-exist")).exitCode).not.toBe(0);
  });

  test("an exec marks the workspace active", async () => {
    await sqlRun(t, "UPDATE workspaces SET last_active_at = 1 WHERE id = ?", [ctrId]);
    await sh("true");
    expect((await ws.byId(ctrId))!.last_active_at).toBeGreaterThan(Date.now() - 10_000);
  });

  test("cmd must be a non-empty array of strings", async () => {
    for (const cmd of [[], [1], "ls"] as unknown as string[][]) {
      const e = await ws.exec(sessionId, { cmd }).catch((x) => x);
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).code).toBe("VALIDATION_FAILED");
    }
  });

  test("profile env (secrets included) reaches every command, never the container's config or the logs", async () => {
    expect((await sh('echo "$PLAIN:$API_TOKEN_FOR_TOOL"')).output).toBe(`visible:${SECRET}\n`);
    expect(t.logs.join("\n")).not.toContain(SECRET);
    const inspect = Bun.spawnSync(["docker", "inspect", (await ws.byId(ctrId))!.docker_id!]).stdout.toString();
    expect(inspect).not.toContain(SECRET);
    expect(inspect).not.toContain("API_TOKEN_FOR_TOOL");
  });

  test("a session without a workspace is CONTAINER_FAILED", async () => {
    const e = await ws.exec("sess_missing", { cmd: ["true"] }).catch((x) => x);
    expect((e as AppError).code).toBe("CONTAINER_FAILED");
  });
});
