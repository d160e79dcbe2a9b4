/**
 * One owner per data dir: `serve` (and `migrate`, `restore`) hold a flock on <data dir>/runcell.lock.
 * Real processes: a second serve on a locked data dir exits 1 naming the holder's pid, touching
 * nothing — the first keeps answering and delivering its webhook, with no duplicate delivery (the
 * second did not void the first's outbox leases); kill -9 of the holder releases the lock.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { acquireDataDirLock, DataDirLockedError, LOCK_FILE, lockHolder } from "../../src/db/lock.ts";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { freePort, waitFor } from "../helpers/net.ts";
import { type ServerProcess, spawnServer } from "../helpers/server-process.ts";
import { startReceiver } from "../notifications/receiver.ts";

const ROOT = join(import.meta.dir, "..", "..");
const servers: ServerProcess[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const s of servers) if (s.proc.exitCode === null) s.proc.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dir(prefix: string) {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** An admin account and an rc_ token on the data dir, through the CLI. */
async function seedUser(dataDir: string): Promise<string> {
  const email = "lock@example.com";
  const created = await runCli(["admin", "create-user", "--data-dir", dataDir, "--email", email, "--role", "admin", "--password-stdin"], { stdin: "a long passphrase\n" });
  expect(created.code, created.stderr).toBe(0);
  const token = await runCli(["token", "create", "--data-dir", dataDir, "--email", email, "--name", "lock-test"]);
  expect(token.code, token.stderr).toBe(0);
  return token.stdout.trim();
}

describe("acquireDataDirLock / lockHolder", () => {
  test("held: the holder's pid is in the file and lockHolder names it; a second acquire throws with that pid; release frees it", () => {
    const d = dir("runcell-lock-unit-");
    expect(lockHolder(d)).toBeNull();
    const lock = acquireDataDirLock(d);
    expect(readFileSync(join(d, LOCK_FILE), "utf8").trim()).toBe(String(process.pid));
    expect(lockHolder(d)).toBe(process.pid);
    // flock locks belong to open files: even this process cannot take it twice.
    let err: unknown;
    try {
      acquireDataDirLock(d);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DataDirLockedError);
    expect((err as DataDirLockedError).pid).toBe(process.pid);
    expect((err as Error).message).toContain(`pid ${process.pid}`);
    // Another process sees the same.
    const other = Bun.spawnSync(["bun", "-e", `import { lockHolder, acquireDataDirLock } from "${ROOT}/src/db/lock.ts"; console.log(lockHolder(${JSON.stringify(d)})); try { acquireDataDirLock(${JSON.stringify(d)}); console.log("acquired"); } catch (e) { console.log(e.name, e.pid); }`]);
    expect(other.stdout.toString().trim().split("\n")).toEqual([String(process.pid), `DataDirLockedError ${process.pid}`]);
    lock.release();
    lock.release(); // idempotent
    expect(lockHolder(d)).toBeNull();
    const again = acquireDataDirLock(d);
    expect(lockHolder(d)).toBe(process.pid);
    again.release();
  });

  test("a missing data dir is created 0700 with the lock file 0600", () => {
    const d = join(dir("runcell-lock-new-"), "nested", "data");
    const lock = acquireDataDirLock(d);
    expect(Bun.spawnSync(["stat", "-c", "%a", d]).stdout.toString().trim()).toBe("700");
    expect(Bun.spawnSync(["stat", "-c", "%a", join(d, LOCK_FILE)]).stdout.toString().trim()).toBe("600");
    lock.release();
  });
});

describe("runcell serve holds the data dir", () => {
  test("a second serve exits 1 naming the pid, touching nothing; the first keeps answering and delivering", async () => {
    const d = dir("runcell-lock-serve-");
    const token = await seedUser(d);
    // The first delivery is held for 2 s, so it is in flight (leased) while the second serve tries to start.
    const rcv = startReceiver({
      async respond(n) {
        if (n === 1) await Bun.sleep(2000);
        return new Response("ok");
      },
    });
    const first = await spawnServer({ dataDir: d, flags: ["--webhook-backoff", "100ms"] });
    servers.push(first);
    const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const post = (path: string, body: unknown) => fetch(first.url + path, { method: "POST", headers: auth, body: JSON.stringify(body) });
    expect((await post("/v1/integrations", { type: "webhook", config: { url: rcv.url + "/hook" } })).status).toBe(201);
    const n1 = (await (await post("/v1/notifications", { message: "in flight during the second start" })).json()) as { id: string };
    await waitFor(() => rcv.received.length === 1, { what: "the first delivery in flight" });
    expect(lockHolder(d)).toBe(first.proc.pid);

    const port2 = await freePort();
    const second = await runCli(["serve", "--data-dir", d, "--http", `127.0.0.1:${port2}`, "--allow-private-webhooks"]);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`in use by another runcell process (pid ${first.proc.pid}`);
    expect(second.stderr).toContain("Nothing was changed");
    expect(second.stdout).not.toContain("listening");
    expect(await fetch(`http://127.0.0.1:${port2}/healthz`).then(() => "up", () => "down")).toBe("down");
    // migrate and restore refuse too.
    for (const args of [["migrate", "--data-dir", d], ["restore", "--data-dir", d, join(d, "runcell.db")]]) {
      const r = await runCli(args);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toContain(`pid ${first.proc.pid}`);
    }
    expect(existsSync(join(d, "backups"))).toBe(false);

    // The first server is unaffected: healthy, the in-flight delivery completes once, a new one goes out.
    expect((await fetch(first.url + "/healthz")).status).toBe(200);
    const status = async (id: string) => ((await (await fetch(`${first.url}/v1/notifications/${id}`, { headers: auth })).json()) as { status: string }).status;
    await waitFor(async () => (await status(n1.id)) === "delivered", { timeoutMs: 10_000, what: "first notification delivered" });
    const n2 = (await (await post("/v1/notifications", { message: "after the refused start" })).json()) as { id: string };
    await waitFor(async () => (await status(n2.id)) === "delivered", { timeoutMs: 10_000, what: "second notification delivered" });
    await Bun.sleep(500);
    const deliveries = rcv.received.map((r) => r.headers["x-service-delivery"]);
    expect(deliveries).toEqual([n1.id, n2.id]); // no duplicate: nobody voided the first lease
    rcv.stop();

    expect(await first.kill("SIGTERM")).toBe(0);
    expect(lockHolder(d)).toBeNull();
  }, 60_000);

  test("kill -9 of the holder releases the lock: the next serve starts", async () => {
    const d = dir("runcell-lock-kill-");
    const first = await spawnServer({ dataDir: d });
    servers.push(first);
    expect(lockHolder(d)).toBe(first.proc.pid);
    first.proc.kill("SIGKILL");
    expect(await first.proc.exited).not.toBe(0);
    expect(lockHolder(d)).toBeNull();
    expect(readFileSync(join(d, LOCK_FILE), "utf8").trim()).toBe(String(first.proc.pid)); // stale content, no lock
    const next = await spawnServer({ dataDir: d });
    servers.push(next);
    expect(lockHolder(d)).toBe(next.proc.pid);
    expect((await fetch(next.url + "/healthz")).status).toBe(200);
    expect(await next.kill("SIGTERM")).toBe(0);
    expect(lockHolder(d)).toBeNull();
  }, 60_000);

  test("migrate holds the lock while it runs and releases it", async () => {
    const d = dir("runcell-lock-migrate-");
    const r = await runCli(["migrate", "--data-dir", d]);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(d, LOCK_FILE))).toBe(true);
    expect(lockHolder(d)).toBeNull();
    // --status is read-only and works next to a holder.
    const lock = acquireDataDirLock(d);
    const status = await runCli(["migrate", "--status", "--data-dir", d]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("pending: none");
    const refused = await runCli(["migrate", "--data-dir", d]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`pid ${process.pid}`);
    lock.release();
  });
});
