/**
 * `runcell backup`: a real server with tasks streaming events (the mock Anthropic server, real
 * workspaces), `runcell backup` as a separate process in the middle of it, then `runcell restore`
 * into an empty data dir and a server on the restored copy. Plus: the archive is ordinary tar.gz
 * (system tar reads it), a directory destination (what `backup <dir>` of earlier versions took),
 * --keep, progress on a big database, usage errors.
 */
import { BINARY_SCHEMA } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type BackupManifest, rowCounts } from "../../src/cli/backup.ts";
import { createProfile, submit, waitTask } from "../helpers/agent.ts";
import { removeInstanceWorkspaces, startTestApp, tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";
import { startMockAnthropic } from "../helpers/mock-anthropic.ts";
import { waitFor } from "../helpers/net.ts";
import { api, createUser } from "../helpers/users.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dir(prefix = "runcell-backup-") {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** manifest.json read with the system's tar, not ours. */
function manifestOf(archive: string): BackupManifest {
  const r = Bun.spawnSync(["tar", "-xOzf", archive, "manifest.json"]);
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  return JSON.parse(r.stdout.toString());
}

function count(dbPath: string, table: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    return db.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${table}`).get()!.n;
  } finally {
    db.close();
  }
}

describe("runcell backup", () => {
  test("while tasks write events: a consistent archive; restored into an empty dir, integrity ok and row counts equal; the copy serves", async () => {
    const t = await startTestApp({ keepDataDir: true });
    const instance = t.app.services.workspaces.instanceId;
    const mock = startMockAnthropic();
    try {
      const user = await createUser(t);
      expect((await api(t, "PUT", "/v1/secrets/KEEP", user.bearer, { value: "survives-the-backup" })).status).toBe(204);
      const profile = await createProfile(t, user, { mock });
      mock.script(() => ({ text: "x".repeat(4000), chunks: 400, delayMs: 10 }));
      const tasks = await Promise.all(Array.from({ length: 6 }, (_, i) => submit(t, user, { profile_id: profile, prompt: `write a lot ${i}` })));
      const live = join(t.dataDir, "runcell.db");
      await waitFor(() => count(live, "events") > 200, { timeoutMs: 30_000, what: "events being written" });

      const before = count(live, "events");
      const archive = join(dir(), "during.tar.gz");
      const r = await runCli(["backup", "--data-dir", t.dataDir, archive]);
      const after = count(live, "events");
      expect(r.code, r.stderr).toBe(0);
      expect(after).toBeGreaterThan(before); // the tasks kept writing through the backup
      const running = await Promise.all(tasks.map((x) => api(t, "GET", `/v1/tasks/${x.task_id}`, user.bearer)));
      expect(running.some((x) => x.body.status === "running")).toBe(true);

      // Progress lines per phase, with sizes.
      expect(r.stdout).toMatch(/copying the database .*runcell\.db \([\d.]+ [KM]B, VACUUM INTO/);
      expect(r.stdout).toMatch(/database copied: [\d.]+ [KM]B in [\d.]+ s; schema \d{4}_\w+, \d+ tables, \d+ rows/);
      expect(r.stdout).toMatch(/backup written: .*during\.tar\.gz \([\d.]+ [KM]?B\)/);
      expect(statSync(archive).mode & 0o777).toBe(0o600);

      const m = manifestOf(archive);
      expect(m).toMatchObject({ format: "runcell-backup", format_version: 1, runcell_version: expect.any(String), schema_version: BINARY_SCHEMA });
      expect(m.migrations).toEqual(MIGRATIONS.map((x) => x.tag));
      expect(m.written_by).toMatchObject({ version: expect.any(String), schema: BINARY_SCHEMA });
      expect(Object.keys(m.files).sort()).toEqual(["runcell.db", "secret.key"]);
      expect(m.tables.events).toBeGreaterThanOrEqual(before);
      expect(m.tables.events).toBeLessThanOrEqual(after);
      expect(m.tables.users).toBe(1);

      for (const x of tasks) await waitTask(t, user, x.task_id, ["completed"], 60_000);

      // Restore into an empty (not yet existing) data dir.
      const restored = join(dir(), "restored");
      const rr = await runCli(["restore", archive, "--data-dir", restored]);
      expect(rr.code, rr.stderr + rr.stdout).toBe(0);
      expect(rr.stdout).toContain("checksums match the manifest: runcell.db, secret.key");
      expect(rr.stdout).toContain("integrity_check ok; row counts equal the manifest");
      const db = new Database(join(restored, "runcell.db"), { readonly: true });
      expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
      expect(rowCounts(db)).toEqual(m.tables);
      db.close();
      expect(statSync(restored).mode & 0o777).toBe(0o700);
      for (const f of ["runcell.db", "secret.key"]) expect(statSync(join(restored, f)).mode & 0o777).toBe(0o600);
      expect(count(live, "events")).toBeGreaterThan(m.tables.events!); // the live one went on after the snapshot

      // The restored data dir serves: the token still signs in, the secret still decrypts with the restored key.
      await t.stop();
      const again = await startTestApp({ dataDir: restored });
      try {
        expect(await again.app.services.secrets.valuesFor(user.id)).toEqual(["survives-the-backup"]);
        const list = await api(again, "GET", "/v1/tasks?limit=100", user.bearer);
        expect(list.status).toBe(200);
        expect(list.body.data.length).toBe(6);
      } finally {
        await again.stop();
      }
    } finally {
      await mock.stop();
      await t.stop().catch(() => {});
      // The data dir is kept for the restore, so stop() leaves the six tasks' workspaces running.
      removeInstanceWorkspaces(instance);
      rmSync(t.dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  test("the archive is ordinary tar.gz: system tar extracts it and each file's sha256 is the manifest's", async () => {
    const t = await startTestApp({ keepDataDir: true });
    await createUser(t);
    await t.stop();
    writeFileSync(join(t.dataDir, "runcell.toml"), "rate_limit_per_minute = 120\n", { mode: 0o600 });
    const archive = join(dir(), "plain.tar.gz");
    const r = await runCli(["backup", "--data-dir", t.dataDir, archive]);
    expect(r.code, r.stderr).toBe(0);
    const list = Bun.spawnSync(["tar", "-tzf", archive]).stdout.toString().trim().split("\n");
    expect(list).toEqual(["manifest.json", "runcell.db", "secret.key", "runcell.toml"]);
    const out = dir();
    expect(Bun.spawnSync(["tar", "-xzf", archive, "-C", out]).exitCode).toBe(0);
    const m = manifestOf(archive);
    for (const [name, want] of Object.entries(m.files)) {
      const bytes = await Bun.file(join(out, name)).bytes();
      expect(bytes.length, name).toBe(want.size);
      expect(new Bun.CryptoHasher("sha256").update(bytes).digest("hex"), name).toBe(want.sha256);
    }
    expect(await Bun.file(join(out, "runcell.toml")).text()).toBe("rate_limit_per_minute = 120\n");
    expect(await Bun.file(join(out, "secret.key")).text()).toBe(await Bun.file(join(t.dataDir, "secret.key")).text());
    const again = await runCli(["backup", "--data-dir", t.dataDir, archive]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already exists");
    rmSync(t.dataDir, { recursive: true, force: true });
  }, 60_000);

  test("a directory destination (what `backup <dir>` took before) gets a timestamped archive; --keep N prunes the older ones", async () => {
    const t = await startTestApp({ keepDataDir: true });
    await t.stop();
    const dest = join(dir(), "nightly"); // does not exist yet
    const names: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await runCli(["backup", "--data-dir", t.dataDir, "--keep", "3", dest]);
      expect(r.code, r.stderr).toBe(0);
      names.push(r.stdout.match(/backup written: (\S+)/)![1]!);
    }
    expect(statSync(dest).mode & 0o777).toBe(0o700);
    for (const n of names) expect(n).toMatch(/\/nightly\/runcell-backup-\d{8}T\d{9}Z\.tar\.gz$/);
    const left = readdirSync(dest).sort();
    expect(left).toEqual(names.slice(1).map((n) => n.split("/").pop()!).sort());
    // Other files in the directory are never pruned.
    writeFileSync(join(dest, "notes.txt"), "mine");
    expect((await runCli(["backup", "--data-dir", t.dataDir, "--keep", "1", dest])).code).toBe(0);
    expect(readdirSync(dest).sort()).toEqual(["notes.txt", expect.stringMatching(/^runcell-backup-/)]);
    rmSync(t.dataDir, { recursive: true, force: true });
  }, 60_000);

  test("a big database: progress every 10% while it is copied and archived, and while it is restored", async () => {
    const t = await startTestApp({ keepDataDir: true });
    await t.stop();
    const db = new Database(join(t.dataDir, "runcell.db"));
    const put = db.prepare("INSERT INTO settings (key, value, updated_at) VALUES (?, ?, 0)");
    const blob = () => JSON.stringify(Buffer.from(crypto.getRandomValues(new Uint8Array(1 << 16))).toString("base64"));
    db.transaction(() => {
      for (let i = 0; i < 600; i++) put.run(`filler.${i}`, blob());
    })();
    db.close();
    expect(statSync(join(t.dataDir, "runcell.db")).size).toBeGreaterThan(40e6);
    const archive = join(dir(), "big.tar.gz");
    const r = await runCli(["backup", "--data-dir", t.dataDir, archive]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/copying the database .*\(\d+\.\d MB, VACUUM INTO/);
    for (const p of [10, 50, 100]) expect(r.stdout).toContain(`  archiving the database: ${p}% (`);
    const restored = join(dir(), "big-restored");
    const rr = await runCli(["restore", archive, "--data-dir", restored]);
    expect(rr.code, rr.stderr).toBe(0);
    for (const p of [10, 50, 100]) expect(rr.stdout).toContain(`  extracting runcell.db: ${p}% (`);
    expect(rr.stdout).toMatch(/row counts equal the manifest \(\d+ tables, \d+ rows\)/);
    rmSync(t.dataDir, { recursive: true, force: true });
  }, 120_000);

  test("usage errors (2) and a missing database (1), leaving nothing behind", async () => {
    expect((await runCli(["backup"])).code).toBe(2);
    expect((await runCli(["backup", "a.tar.gz", "b.tar.gz"])).code).toBe(2);
    const d = dir();
    const keepOnFile = await runCli(["backup", "--data-dir", d, "--keep", "2", join(d, "x.tar.gz")]);
    expect(keepOnFile.code).toBe(2);
    expect(keepOnFile.stderr).toContain("--keep applies to a destination directory");
    expect((await runCli(["backup", "--data-dir", d, "--keep", "0", d])).code).toBe(2);
    const r = await runCli(["backup", "--data-dir", join(d, "nothing-here"), join(d, "dest")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no database");
    expect(existsSync(join(d, "dest"))).toBe(false);
  });
});
