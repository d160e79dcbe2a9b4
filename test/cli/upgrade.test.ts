/**
 * Upgrades with two real builds of different schema versions: the "old" binary is this source
 * tree, the "new" one the same tree (copied to a temp dir) with one more migration and version
 * 0.1.1-upgrade. Both are compiled with scripts/build.ts, as a release would be.
 *
 * old → new: the new binary backs the database up into <data dir>/backups before migrating it;
 * new → old: the old binary refuses to start, naming the version that wrote the database;
 * `version --check-db` says current / older / newer with its exit status; the automatic backups
 * are pruned to the last 3; the lock works in the compiled binary (bun:ffi flock).
 */
import { BINARY_SCHEMA } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/migrations.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { lockHolder } from "../../src/db/lock.ts";
import { VERSION } from "../../src/version.ts";
import { tempDir } from "../helpers/app.ts";
import { freePort, waitFor } from "../helpers/net.ts";

const ROOT = join(import.meta.dir, "..", "..");
const NEW_VERSION = "0.1.1-upgrade";
const NEW_TAG = `${String(MIGRATIONS.length).padStart(4, "0")}_upgrade_probe`;
const work = tempDir("runcell-upgrade-");
const OLD = join(work, "old", "runcell");
const NEW = join(work, "new", "runcell");
const procs: ReturnType<typeof Bun.spawn>[] = [];

/** A copy of the source tree fit to build from (node_modules linked, not copied). */
function copySource(to: string) {
  const skip = new Set(["node_modules", "dist", ".git", "test", "test-artifacts", "bench", "runcell_data", ".tmp"]);
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(ROOT)) {
    if (skip.has(name)) continue;
    cpSync(join(ROOT, name), join(to, name), { recursive: true, filter: (src) => !src.includes("/web/dist") });
  }
  symlinkSync(join(ROOT, "node_modules"), join(to, "node_modules"));
}

async function build(src: string, out: string) {
  const p = Bun.spawn(["bun", "run", "scripts/build.ts", out], { cwd: src, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`build in ${src} failed (${code}):\n${stdout}\n${stderr}`);
}

beforeAll(async () => {
  const oldSrc = join(work, "src-old");
  const newSrc = join(work, "src-new");
  copySource(oldSrc);
  copySource(newSrc);
  // The new version: one more (trivial) migration, embedded the way db:generate does it.
  writeFileSync(join(newSrc, "migrations", `${NEW_TAG}.sql`), "CREATE TABLE `upgrade_probe` (`id` integer PRIMARY KEY NOT NULL);\n");
  const journalPath = join(newSrc, "migrations", "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8"));
  journal.entries.push({ idx: journal.entries.length, version: "6", when: Date.now(), tag: NEW_TAG, breakpoints: true });
  writeFileSync(journalPath, JSON.stringify(journal, null, 2));
  expect(Bun.spawnSync(["bun", "run", "scripts/migrations-index.ts"], { cwd: newSrc }).exitCode).toBe(0);
  const pkgPath = join(newSrc, "package.json");
  writeFileSync(pkgPath, JSON.stringify({ ...JSON.parse(readFileSync(pkgPath, "utf8")), version: NEW_VERSION }, null, 2));
  await Promise.all([build(oldSrc, OLD), build(newSrc, NEW)]);
}, 300_000);

afterAll(() => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(bin: string, args: string[]): Promise<Run> {
  const p = Bun.spawn([bin, ...args], { cwd: work, env: { PATH: "/usr/bin:/bin", HOME: work }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr };
}

/** `serve` from a binary; resolves once /healthz answers. */
async function serve(bin: string, dataDir: string) {
  const port = await freePort();
  const out: string[] = [];
  const proc = Bun.spawn(
    [bin, "serve", "--data-dir", dataDir, "--http", `127.0.0.1:${port}`, "--workspace-image", process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest"],
    { cwd: work, env: { PATH: "/usr/bin:/bin", HOME: work }, stdout: "pipe", stderr: "pipe" },
  );
  procs.push(proc);
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const reader = s.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(new TextDecoder().decode(r.value));
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(url + "/healthz")).ok, { timeoutMs: 30_000, what: `${bin} serve: ${out.join("")}` });
  return {
    url,
    proc,
    output: () => out.join(""),
    async stop() {
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
    },
  };
}

const sha = (p: string) => new Bun.CryptoHasher("sha256").update(readFileSync(p)).digest("hex");
const preMigrate = (dataDir: string) => (existsSync(join(dataDir, "backups")) ? readdirSync(join(dataDir, "backups")).filter((f) => f.startsWith("pre-migrate-")).sort() : []);

describe("two builds of different schema versions", () => {
  const data = join(work, "data");

  test("the builds say which schema they carry", async () => {
    expect((await run(OLD, ["version"])).stdout).toContain(`runcell ${VERSION} (commit unknown, bun ${Bun.version}, schema ${BINARY_SCHEMA})`);
    expect(JSON.parse((await run(NEW, ["version", "--json"])).stdout)).toMatchObject({ version: NEW_VERSION, schema: NEW_TAG });
  });

  test("the compiled old binary serves, holds the lock (a second serve exits 1 naming its pid), and writes the database", async () => {
    const created = await run(OLD, ["admin", "create-user", "--data-dir", data, "--email", "up@example.com", "--role", "admin"]);
    expect(created.code, created.stderr).toBe(0);
    const first = await serve(OLD, data);
    expect(lockHolder(data)).toBe(first.proc.pid);
    const second = await run(OLD, ["serve", "--data-dir", data, "--http", `127.0.0.1:${await freePort()}`]);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`in use by another runcell process (pid ${first.proc.pid}`);
    expect((await fetch(first.url + "/healthz")).status).toBe(200);
    await first.stop();
    expect(lockHolder(data)).toBeNull();
    const check = await run(OLD, ["version", "--check-db", "--data-dir", data]);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(`database current: ${join(data, "runcell.db")} has schema ${BINARY_SCHEMA} (written by runcell ${VERSION})`);
  }, 60_000);

  test("old → new: --check-db says older (3); serve backs the database up first, then migrates it", async () => {
    const check = await run(NEW, ["version", "--check-db", "--data-dir", data]);
    expect(check.code).toBe(3);
    expect(check.stdout).toContain(`database older: ${join(data, "runcell.db")} has schema ${BINARY_SCHEMA} (written by runcell ${VERSION}); this runcell ${NEW_VERSION} has ${NEW_TAG} and will apply ${NEW_TAG}`);
    expect(preMigrate(data)).toEqual([]);

    const s = await serve(NEW, data);
    const backups = preMigrate(data);
    expect(backups).toHaveLength(1);
    expect(backups[0]).toMatch(new RegExp(`^pre-migrate-${BINARY_SCHEMA}-\\d{8}T\\d{9}Z\\.tar\\.gz$`));
    expect(s.output()).toContain(`the database has schema ${BINARY_SCHEMA}, this runcell ${NEW_VERSION} applies ${NEW_TAG}: backing it up first`);
    expect(s.output()).toContain(`backup written: ${join(data, "backups", backups[0]!)}`);
    expect(s.output()).toContain('"msg":"database migrated"');
    await s.stop();

    // The automatic backup holds the database as the old binary left it.
    const manifest = JSON.parse(Bun.spawnSync(["tar", "-xOzf", join(data, "backups", backups[0]!), "manifest.json"]).stdout.toString());
    expect(manifest).toMatchObject({ runcell_version: NEW_VERSION, schema_version: BINARY_SCHEMA, written_by: { version: VERSION, schema: BINARY_SCHEMA } });
    expect(manifest.tables.users).toBe(1);

    const now = await run(NEW, ["version", "--check-db", "--json", "--data-dir", data]);
    expect(now.code).toBe(0);
    expect(JSON.parse(now.stdout).database).toMatchObject({ state: "current", schema: NEW_TAG, written_by: { version: NEW_VERSION, schema: NEW_TAG } });
    // A restart of the new binary makes no further backup.
    const again = await serve(NEW, data);
    await again.stop();
    expect(preMigrate(data)).toHaveLength(1);
  }, 90_000);

  test("new → old: the previous binary refuses the newer database, naming the version that wrote it, untouched", async () => {
    const before = sha(join(data, "runcell.db"));
    const check = await run(OLD, ["version", "--check-db", "--data-dir", data]);
    expect(check.code).toBe(4);
    expect(check.stdout).toContain(`database newer: ${join(data, "runcell.db")} has schema ${NEW_TAG} (written by runcell ${NEW_VERSION}), which this runcell ${VERSION} (schema ${BINARY_SCHEMA}) does not know`);

    for (const args of [["serve", "--http", `127.0.0.1:${await freePort()}`], ["migrate"]]) {
      const r = await run(OLD, [...args, "--data-dir", data]);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toContain(`this database was written by a newer runcell: runcell ${NEW_VERSION}, schema "${NEW_TAG}"`);
      expect(r.stderr).toContain(`this binary is runcell ${VERSION} and knows schema up to "${BINARY_SCHEMA}". Nothing was changed.`);
      expect(r.stderr).toContain(`Run runcell ${NEW_VERSION} or newer`);
    }
    expect(sha(join(data, "runcell.db"))).toBe(before);
    expect(lockHolder(data)).toBeNull();
    expect(preMigrate(data)).toHaveLength(1);

    // A backup made by the new binary cannot be restored by the old one either.
    const archive = join(work, "made-by-new.tar.gz");
    expect((await run(NEW, ["backup", "--data-dir", data, archive])).code).toBe(0);
    const r = await run(OLD, ["restore", archive, "--data-dir", join(work, "old-restore")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the backup's database has schema "${NEW_TAG}" (written by runcell ${NEW_VERSION}), newer than this runcell ${VERSION} knows (schema "${BINARY_SCHEMA}")`);
  }, 60_000);

  test("the way back: the old binary restores the pre-migration backup and serves it", async () => {
    const backup = join(data, "backups", preMigrate(data)[0]!);
    const back = join(work, "back");
    const r = await run(OLD, ["restore", backup, "--data-dir", back]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("integrity_check ok; row counts equal the manifest");
    const s = await serve(OLD, back);
    await s.stop();
  }, 60_000);

  test("pre-migration backups are pruned to the last 3; a fresh database gets none", async () => {
    const d = join(work, "prune");
    const old = join(data, "backups", preMigrate(data)[0]!);
    const made: string[] = [];
    for (let i = 0; i < 4; i++) {
      const restored = await run(OLD, ["restore", old, "--data-dir", d, ...(i ? ["--force"] : [])]);
      expect(restored.code, restored.stderr).toBe(0);
      const m = await run(NEW, ["migrate", "--data-dir", d]);
      expect(m.code, m.stderr).toBe(0);
      expect(m.stdout).toContain(`applied 1 migration(s): ${NEW_TAG}`);
      made.push(m.stdout.match(/pre-migration backup: (\S+)/)![1]!.split("/").pop()!);
    }
    expect(new Set(made).size).toBe(4);
    expect(preMigrate(d)).toEqual(made.slice(1).sort());
    const fresh = join(work, "fresh");
    const m = await run(NEW, ["migrate", "--data-dir", fresh]);
    expect(m.code).toBe(0);
    expect(m.stdout).not.toContain("pre-migration backup");
    expect(existsSync(join(fresh, "backups"))).toBe(false);
  }, 120_000);
});
