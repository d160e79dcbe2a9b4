/**
 * `runcell service`: installs into a temporary root (real useradd/groupadd --root, real
 * `systemctl --root enable`), and systemd's own `systemd-analyze verify` and `security --offline`
 * judge the units. No running systemd is needed (nor present in CI): a --root install is never
 * started, which is how the "could not start" rule is exercised.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BACKUP_SERVICE_UNIT, BACKUP_TIMER_UNIT, renderBackupService, renderUnit, SERVICE_UNIT, unitServeArgs } from "../../src/admin/systemd-unit.ts";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";

/**
 * What ExecStart runs (--exec): an executable at a path the service can see. From source the CLI
 * would name bun and src/main.ts, which may sit under /tmp or /home in a checkout and be refused.
 */
const SELF = "/opt/runcell-service-test/runcell";
beforeAll(() => {
  mkdirSync("/opt/runcell-service-test", { recursive: true });
  writeFileSync(SELF, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
});
afterAll(() => rmSync("/opt/runcell-service-test", { recursive: true, force: true }));

const HARDENING = [
  "NoNewPrivileges=yes",
  "ProtectSystem=strict",
  "PrivateTmp=yes",
  "ProtectHome=yes",
  "PrivateDevices=yes",
  "PrivateMounts=yes",
  "ProtectKernelTunables=yes",
  "ProtectKernelModules=yes",
  "ProtectKernelLogs=yes",
  "ProtectControlGroups=yes",
  "ProtectClock=yes",
  "ProtectHostname=yes",
  "RestrictNamespaces=yes",
  "RestrictRealtime=yes",
  "RestrictSUIDSGID=yes",
  "LockPersonality=yes",
  "RemoveIPC=yes",
  // AF_UNIX: the Docker socket.
  "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
  "SystemCallArchitectures=native",
  "SystemCallFilter=@system-service",
  "SystemCallErrorNumber=EPERM",
  "CapabilityBoundingSet=",
  "UMask=0077",
];

/** A minimal root filesystem: empty user and group databases, as useradd --root needs them. */
function newRoot(): string {
  const root = tempDir("runcell-root-");
  mkdirSync(join(root, "etc"));
  for (const f of ["passwd", "group", "shadow", "gshadow"]) writeFileSync(join(root, "etc", f), "", { mode: f.includes("shadow") ? 0o600 : 0o644 });
  return root;
}

const lines = (file: string) => readFileSync(file, "utf8").split("\n");
const entry = (root: string, db: string, name: string) => lines(join(root, "etc", db)).find((l) => l.startsWith(name + ":"))?.split(":");

function analyze(args: string[]): { code: number; out: string } {
  const r = Bun.spawnSync(["systemd-analyze", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: (r.stdout.toString() + r.stderr.toString()).trim() };
}

beforeAll(() => {
  expect(Bun.which("systemd-analyze"), "systemd-analyze is missing: apt-get install systemd (./install.sh test does)").toBeTruthy();
  expect(process.getuid?.(), "useradd --root and chown need root: run these tests as root").toBe(0);
});

describe("the units", () => {
  test("runcell.service: every hardening line, docker wanted (not required), serve flags quoted for systemd", () => {
    const unit = renderUnit({
      command: ["/usr/local/bin/runcell"],
      user: "agents",
      dataDir: "/var/lib/runcell",
      serveArgs: ["--public-url", "https://a.example.com", "--admin-password-file", '/etc/runcell/my "pass" $HOME 100%\\x', "--trust-proxy"],
    });
    expect(unit).toContain(
      'ExecStart=/usr/local/bin/runcell serve --data-dir /var/lib/runcell --public-url https://a.example.com --admin-password-file "/etc/runcell/my \\"pass\\" $$HOME 100%%\\\\x" --trust-proxy\n',
    );
    for (const line of [
      ...HARDENING,
      "ReadWritePaths=/var/lib/runcell",
      "StateDirectory=runcell",
      "User=agents",
      "SupplementaryGroups=docker",
      "After=docker.service network-online.target",
      "Wants=docker.service network-online.target",
      "Restart=on-failure",
      "RestartPreventExitStatus=2",
      "KillSignal=SIGTERM",
      "TimeoutStopSec=30",
      "EnvironmentFile=-/etc/runcell/runcell.env",
      "WantedBy=multi-user.target",
    ]) {
      expect(unit.split("\n"), line).toContain(line);
    }
    expect(unit).not.toMatch(/^Requires=/m);
    expect(unit).toMatch(/# Wants=, not Requires=: runcell serves without Docker/);
    expect(unit).not.toMatch(/^(MemoryDenyWriteExecute|PrivateUsers|AmbientCapabilities)=/m);
    // A port below 1024 gets exactly the capability to bind it; a long shutdown a longer stop timeout.
    const low = renderUnit({ command: ["/usr/local/bin/runcell"], user: "runcell", dataDir: "/srv/rc", serveArgs: [], bindPrivilegedPort: true, stopTimeoutSec: 80 });
    expect(low).toContain("CapabilityBoundingSet=CAP_NET_BIND_SERVICE\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n");
    expect(low).toContain("TimeoutStopSec=80\n");
    expect(low).not.toContain("StateDirectory=");
  });

  test("the serve flags of a unit are read back through its quoting (what a reinstall without `--` keeps)", () => {
    const serveArgs = ["--http", "127.0.0.1:7420", "--admin-password-file", '/etc/runcell/a "b" 100% $HOME\\x', "--allowed-images=ghcr.io/acme/*"];
    const unit = renderUnit({ command: [SELF], user: "runcell", dataDir: "/var/lib/runcell", serveArgs, bindPrivilegedPort: false });
    expect(unitServeArgs(unit)).toEqual(serveArgs);
    expect(unitServeArgs(renderUnit({ command: ["/usr/bin/bun", "/opt/my runcell/src/main.ts"], user: "runcell", dataDir: "/srv/serve data", serveArgs: [], bindPrivilegedPort: false }))).toEqual([]);
    expect(unitServeArgs("[Service]\nExecStart=/usr/bin/true\n")).toBeNull();
  });

  test("systemd reads the program path back through its quoting: a path with a space and % verifies, a wrong one does not", () => {
    const dir = join(tempDir(), "opt dir 100%");
    mkdirSync(dir);
    copyFileSync(process.execPath, join(dir, "run cell"));
    chmodSync(join(dir, "run cell"), 0o755);
    const ok = join(tempDir(), "runcell.service");
    writeFileSync(ok, renderUnit({ command: [join(dir, "run cell")], user: "runcell", dataDir: "/var/lib/runcell", serveArgs: ["--public-url", "https://x.example/a b"] }));
    const good = analyze(["verify", ok]);
    expect(good.out).toBe("");
    expect(good.code).toBe(0);
    const bad = join(tempDir(), "runcell.service");
    writeFileSync(bad, renderUnit({ command: [join(dir, "run cells")], user: "runcell", dataDir: "/var/lib/runcell", serveArgs: [] }));
    const missing = analyze(["verify", bad]);
    expect(missing.code).not.toBe(0);
    expect(missing.out).toContain(`${dir}/run cells is not executable`);
    // And verify does catch broken quoting, so the passes above mean something.
    writeFileSync(bad, readFileSync(ok, "utf8").replace(/^ExecStart=.*$/m, `ExecStart=${process.execPath} "unbalanced`));
    expect(analyze(["verify", bad]).out).toContain("Unbalanced quoting");
  });

  test("runcell-backup.service: `runcell backup --keep` into the dir (a timestamped name: two runs the same day both succeed), with the service's --vault-key-file", async () => {
    const work = tempDir("runcell-nightly-");
    try {
      const dataDir = join(work, "data");
      const backupDir = join(work, "backups");
      expect((await runCli(["migrate", "--data-dir", dataDir])).code).toBe(0);
      const key = join(work, "vault.key");
      writeFileSync(key, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64") + "\n", { mode: 0o600 });
      const unit = renderBackupService({ command: [process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts")], user: "runcell", dataDir, backupDir, vaultKeyFile: key });
      expect(unit).toContain(`ExecStart=${process.execPath} ${join(import.meta.dir, "..", "..", "src", "main.ts")} backup --data-dir ${dataDir} --vault-key-file ${key} --keep 14 ${backupDir}\n`);
      expect(unit).toContain(`Environment=RUNCELL_BACKUP_DIR=${backupDir}\n`);
      expect(unit).toContain(`ReadWritePaths=${dataDir} ${backupDir}\n`);
      // The timer's catch-up run, then a manual one, the same day: both write their own file.
      const words = execWords(unit, "ExecStart");
      for (let i = 0; i < 2; i++) {
        const r = Bun.spawnSync(words, { stdout: "pipe", stderr: "pipe" });
        expect(r.exitCode, r.stderr.toString()).toBe(0);
        expect(r.stdout.toString()).toContain(`the vault key is not in this backup: it is ${key}`);
        expect(r.stdout.toString() + r.stderr.toString()).not.toContain("warning: no secret.key");
      }
      expect(readdirSync(backupDir).filter((f) => /^runcell-backup-\d{8}T\d{9}Z\.tar\.gz$/.test(f))).toHaveLength(2);
      // Retention: the newest 14 stay; nothing else in the dir is deleted — an operator's own
      // backups (named as `runcell backup --help` shows) and an older version's nightly files, however old.
      for (let d = 1; d <= 20; d++) writeFileSync(join(backupDir, `runcell-backup-200001${String(d).padStart(2, "0")}T000000000Z.tar.gz`), "");
      const others = ["runcell-2000-01-01.tar.gz", "runcell-20000101.tar.gz", "notes.txt"];
      for (const f of others) {
        writeFileSync(join(backupDir, f), "");
        utimesSync(join(backupDir, f), new Date("2000-01-01"), new Date("2000-01-01"));
      }
      expect(unit).not.toMatch(/^ExecStart(Pre|Post)=/m);
      expect(Bun.spawnSync(words).exitCode).toBe(0);
      const kept = readdirSync(backupDir).filter((f) => f.startsWith("runcell-backup-")).sort();
      expect(kept).toHaveLength(14);
      expect(kept[0]).toBe("runcell-backup-20000110T000000000Z.tar.gz");
      for (const f of others) expect(existsSync(join(backupDir, f)), f).toBe(true);
      // Without --vault-key-file the unit names none.
      expect(renderBackupService({ command: ["/usr/local/bin/runcell"], user: "runcell", dataDir: "/var/lib/runcell", backupDir: "/var/backups/runcell", vaultKeyFile: null })).toContain(
        "ExecStart=/usr/local/bin/runcell backup --data-dir /var/lib/runcell --keep 14 /var/backups/runcell\n",
      );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

/** The words of a unit's `Key=` command line as systemd reads them back ("…" with \\ and \", %% and $$). */
function execWords(unit: string, key: string): string[] {
  const line = new RegExp(`^${key}=(.*)$`, "m").exec(unit)![1]!;
  return [...line.matchAll(/"((?:\\.|[^"\\])*)"|(\S+)/g)].map((m) => (m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2]!).replace(/%%/g, "%").replace(/\$\$/g, "$"));
}

describe("runcell service install --root", () => {
  let root: string;
  let install: Awaited<ReturnType<typeof runCli>>;
  const unitDir = () => join(root, "etc/systemd/system");
  const serveFlags = ["--http", "0.0.0.0:7420", "--public-url", "https://agents.example.com", "--admin-password-file", "/etc/runcell/admin password", "--trust-proxy"];

  beforeAll(async () => {
    root = newRoot();
    install = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--backup-daily", "/var/backups/runcell", "--", ...serveFlags]);
  });

  test("creates the docker group, the system user in it, and says it could not start runcell (exit 0: starting was not asked)", () => {
    expect(install.code, install.stderr).toBe(0);
    expect(install.stdout).toContain("==> creating group docker");
    expect(install.stdout).toContain("==> creating system user rcsvc");
    expect(install.stderr).toContain(`could not start runcell: systemd is not running in ${root}`);
    const user = entry(root, "passwd", "rcsvc")!;
    expect(user).toBeDefined();
    const [, , uid, gid, , home, shell] = user;
    expect(Number(uid)).toBeLessThan(1000); // --system
    expect(home).toBe("/var/lib/runcell");
    expect(shell).toBe("/usr/sbin/nologin");
    expect(entry(root, "group", "rcsvc")![2]).toBe(gid!);
    const docker = entry(root, "group", "docker")!;
    expect(docker[3]!.split(",")).toContain("rcsvc");
    expect(Number(docker[2])).toBeLessThan(1000);
    // The user lives in the temporary root only.
    expect(Bun.spawnSync(["getent", "passwd", "rcsvc"]).exitCode).not.toBe(0);
  });

  test("the data dir and the backup dir are 0700 and the user's; parents are 0755; /etc/runcell is 0750 root:<the user's group>, the env file in it 0600 root", () => {
    const user = entry(root, "passwd", "rcsvc")!;
    for (const dir of ["var/lib/runcell", "var/backups/runcell"]) {
      const st = statSync(join(root, dir));
      expect(st.mode & 0o777, dir).toBe(0o700);
      expect([st.uid, st.gid], dir).toEqual([Number(user[2]), Number(user[3])]);
    }
    expect(statSync(join(root, "var/lib")).mode & 0o777).toBe(0o755);
    // The service reads the key and password files put in /etc/runcell (as the docs advise): it may enter it.
    const etc = statSync(join(root, "etc/runcell"));
    expect([etc.mode & 0o777, etc.uid, etc.gid]).toEqual([0o750, 0, Number(user[3])]);
    expect(install.stdout).toContain(`==> ${join(root, "etc/runcell")} (0750, root:rcsvc's group`);
    const env = statSync(join(root, "etc/runcell/runcell.env"));
    expect([env.mode & 0o777, env.uid, env.gid]).toEqual([0o600, 0, 0]);
    expect(readFileSync(join(root, "etc/runcell/runcell.env"), "utf8")).toContain("# RUNCELL_ADMIN_PASSWORD=");
  });

  test("writes the hardened unit with the serve flags (quoted) and enables it and the timer", () => {
    const unit = readFileSync(join(unitDir(), SERVICE_UNIT), "utf8");
    expect(unit).toContain(
      `\nExecStart=${SELF} serve --data-dir /var/lib/runcell --http 0.0.0.0:7420 --public-url https://agents.example.com --admin-password-file "/etc/runcell/admin password" --trust-proxy\n`,
    );
    for (const line of [...HARDENING, "ReadWritePaths=/var/lib/runcell", "User=rcsvc", "SupplementaryGroups=docker", "Restart=on-failure", "After=docker.service network-online.target", "Wants=docker.service network-online.target"]) {
      expect(unit.split("\n"), line).toContain(line);
    }
    expect(statSync(join(unitDir(), SERVICE_UNIT)).mode & 0o777).toBe(0o644);
    expect(readlinkSync(join(unitDir(), "multi-user.target.wants", SERVICE_UNIT))).toBe(`/etc/systemd/system/${SERVICE_UNIT}`);
    expect(readlinkSync(join(unitDir(), "timers.target.wants", BACKUP_TIMER_UNIT))).toBe(`/etc/systemd/system/${BACKUP_TIMER_UNIT}`);
    const timer = readFileSync(join(unitDir(), BACKUP_TIMER_UNIT), "utf8");
    for (const line of ["OnCalendar=*-*-* 03:00:00", "RandomizedDelaySec=30min", "Persistent=true", "WantedBy=timers.target"]) expect(timer.split("\n")).toContain(line);
    const backup = readFileSync(join(unitDir(), BACKUP_SERVICE_UNIT), "utf8");
    expect(backup).toContain(`ExecStart=${SELF} backup --data-dir /var/lib/runcell --keep 14 /var/backups/runcell\n`);
    expect(backup).toContain("User=rcsvc\n");
    expect(backup).toContain("ReadWritePaths=/var/lib/runcell /var/backups/runcell\n");
  });

  test("systemd-analyze verify passes on the three units, and security --offline rates them OK", () => {
    for (const name of [SERVICE_UNIT, BACKUP_SERVICE_UNIT, BACKUP_TIMER_UNIT]) {
      const r = analyze(["verify", join(unitDir(), name)]);
      expect(r.out, name).toBe("");
      expect(r.code, name).toBe(0);
    }
    for (const name of [SERVICE_UNIT, BACKUP_SERVICE_UNIT]) {
      const r = analyze(["security", "--offline=yes", "--no-pager", join(unitDir(), name)]);
      const score = Number(/Overall exposure level for \S+: ([\d.]+) (\w+)/.exec(r.out)?.[1]);
      expect(score, r.out.split("\n").slice(-1)[0]).toBeLessThanOrEqual(2.5);
    }
  });

  test("status where systemd cannot run shows what is installed (exit 3)", async () => {
    const r = await runCli(["service", "status", "--root", root]);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(`systemd is not running in ${root}`);
    expect(r.stdout).toContain(`${join(unitDir(), SERVICE_UNIT)}: installed, enabled`);
    expect(r.stdout).toContain(`user: rcsvc, data dir: ${join(root, "var/lib/runcell")}`);
    expect(r.stdout).toContain(`nightly backup: into ${join(root, "var/backups/runcell")} (runcell-backup.timer enabled)`);
  });

  test("install again without `--`: the serve flags installed earlier are kept; `--` alone empties them", async () => {
    const before = readFileSync(join(unitDir(), SERVICE_UNIT), "utf8");
    const flags = `--http 0.0.0.0:7420 --public-url https://agents.example.com --admin-password-file "/etc/runcell/admin password" --trust-proxy`;
    const again = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`==> keeping the serve flags installed earlier: ${flags} (\`-- <flags>\` replaces them, \`--\` alone removes them)`);
    expect(readFileSync(join(unitDir(), SERVICE_UNIT), "utf8")).toBe(before);
    const dry = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--dry-run"]);
    expect(dry.stdout).toContain(`# would keep the serve flags installed earlier: ${flags}`);
    expect(dry.stdout).toContain(`ExecStart=${SELF} serve --data-dir /var/lib/runcell ${flags}\n`);
    const emptied = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--dry-run", "--"]);
    expect(emptied.stdout).toContain(`ExecStart=${SELF} serve --data-dir /var/lib/runcell\n`);
    expect(emptied.stdout).not.toContain("keep the serve flags");
  });

  test("install again: the user is kept; without --backup-daily the nightly backup is kept (--no-backup-daily removes it); with --start it exits 1; a loosened env file is 0600 again", async () => {
    writeFileSync(join(root, "var/lib/runcell/runcell.db"), "data");
    chmodSync(join(root, "etc/runcell/runcell.env"), 0o644);
    const again = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--start", "--", "--http", "127.0.0.1:80"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("could not start runcell");
    expect(again.stdout).toContain("==> user rcsvc exists and is in group docker");
    // New serve flags (the README's reverse-proxy advice) do not silently drop the backups.
    expect(again.stdout).toContain(`==> keeping the nightly backup into ${join(root, "var/backups/runcell")} (installed earlier; --no-backup-daily removes it)`);
    expect(again.stdout).not.toContain("removed");
    expect(readFileSync(join(unitDir(), BACKUP_SERVICE_UNIT), "utf8")).toContain(`ExecStart=${SELF} backup --data-dir /var/lib/runcell --keep 14 /var/backups/runcell\n`);
    expect(readlinkSync(join(unitDir(), "timers.target.wants", BACKUP_TIMER_UNIT))).toBe(`/etc/systemd/system/${BACKUP_TIMER_UNIT}`);
    const dry = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--dry-run"]);
    expect(dry.stdout).toContain(`# would keep the nightly backup into ${join(root, "var/backups/runcell")}`);
    expect((await runCli(["service", "install", "--exec", SELF, "--root", root, "--dry-run", "--backup-daily", "/var/backups/x", "--no-backup-daily"])).code).toBe(2);
    writeFileSync(join(root, "var/backups/runcell/runcell-backup-20000101T000000000Z.tar.gz"), "");
    const dropped = await runCli(["service", "install", "--exec", SELF, "--root", root, "--user", "rcsvc", "--no-backup-daily", "--", "--http", "127.0.0.1:80"]);
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toContain(`==> removed ${join(unitDir(), BACKUP_TIMER_UNIT)}`);
    expect(existsSync(join(unitDir(), BACKUP_SERVICE_UNIT))).toBe(false);
    expect(existsSync(join(unitDir(), "timers.target.wants", BACKUP_TIMER_UNIT))).toBe(false);
    expect(readdirSync(join(root, "var/backups/runcell"))).toEqual(["runcell-backup-20000101T000000000Z.tar.gz"]);
    expect(lines(join(root, "etc/passwd")).filter((l) => l.startsWith("rcsvc:"))).toHaveLength(1);
    const unit = readFileSync(join(unitDir(), SERVICE_UNIT), "utf8");
    expect(unit).toContain(`ExecStart=${SELF} serve --data-dir /var/lib/runcell --http 127.0.0.1:80\n`);
    expect(unit).toContain("AmbientCapabilities=CAP_NET_BIND_SERVICE\n");
    // The data written so far is untouched, and still the user's.
    expect(readFileSync(join(root, "var/lib/runcell/runcell.db"), "utf8")).toBe("data");
    expect(statSync(join(root, "var/lib/runcell/runcell.db")).uid).toBe(Number(entry(root, "passwd", "rcsvc")![2]));
    // The env file holds secrets: an install puts its mode back (the contents are kept).
    expect(statSync(join(root, "etc/runcell/runcell.env")).mode & 0o777).toBe(0o600);
    expect(again.stdout).toContain(`==> ${join(root, "etc/runcell/runcell.env")} had mode 0644: set to 0600 (it holds secrets)`);
    expect(readFileSync(join(root, "etc/runcell/runcell.env"), "utf8")).toContain("# RUNCELL_ADMIN_PASSWORD=");
  });

  test("uninstall removes the units and their links, keeps the data and says where", async () => {
    const r = await runCli(["service", "uninstall", "--root", root]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`==> removed ${join(unitDir(), SERVICE_UNIT)}`);
    expect(r.stdout).toContain(`The data is kept in ${join(root, "var/lib/runcell")}`);
    expect(r.stdout).toContain(`userdel --root ${root} rcsvc`);
    expect(existsSync(join(unitDir(), SERVICE_UNIT))).toBe(false);
    expect(() => lstatSync(join(unitDir(), "multi-user.target.wants", SERVICE_UNIT))).toThrow();
    expect(readFileSync(join(root, "var/lib/runcell/runcell.db"), "utf8")).toBe("data");
    expect(readFileSync(join(root, "etc/runcell/runcell.env"), "utf8")).toContain("RUNCELL_ADMIN_PASSWORD");
    expect(entry(root, "passwd", "rcsvc")).toBeDefined();

    const twice = await runCli(["service", "uninstall", "--root", root]);
    expect(twice.code).toBe(0);
    expect(twice.stdout).toContain("not installed as a service");
    const status = await runCli(["service", "status", "--root", root]);
    expect(status.code).toBe(4);
    expect(status.stdout).toContain("not installed");
  });
});

describe("runcell service without a running systemd (this machine)", () => {
  test("an existing docker group is joined, not recreated; --no-start only enables", async () => {
    const root = newRoot();
    writeFileSync(join(root, "etc/group"), "docker:x:4242:\n");
    writeFileSync(join(root, "etc/gshadow"), "docker:!::\n");
    const r = await runCli(["service", "install", "--exec", SELF, "--root", root, "--no-start", "--data-dir", "/srv/runcell"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain("creating group docker");
    expect(r.stdout).toContain("not started (--no-start)");
    expect(r.stderr).toBe("");
    expect(entry(root, "group", "docker")).toEqual(["docker", "x", "4242", "runcell"]);
    expect(statSync(join(root, "srv/runcell")).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(root, "etc/systemd/system", SERVICE_UNIT), "utf8")).toContain("ReadWritePaths=/srv/runcell\n");
  });

  test("status says systemd is not running; --dry-run says it would not start, and changes nothing", async () => {
    // A container or CI job; on a machine booted with systemd, status is systemctl's and install starts.
    const booted = existsSync("/run/systemd/system");
    const status = await runCli(["service", "status"]);
    expect([3, 4]).toContain(status.code);
    if (!booted) expect(status.stdout).toContain("systemd is not running on this machine (no /run/systemd/system");
    const dry = await runCli(["service", "install", "--exec", SELF, "--dry-run", "--user", "rcdry", "--", "--trust-proxy"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(`# would write /etc/systemd/system/${SERVICE_UNIT}:`);
    expect(dry.stdout).toContain(`ExecStart=${SELF} serve --data-dir /var/lib/runcell --trust-proxy\n`);
    expect(dry.stdout).toContain(booted ? "and start it" : "not start it: systemd is not running on this machine");
    expect(Bun.spawnSync(["getent", "passwd", "rcdry"]).exitCode).not.toBe(0);
    // File flags are written as absolute paths (systemd would resolve a relative one against /).
    const rel = await runCli(["service", "install", "--exec", SELF, "--dry-run", "--user", "rcdry", "--", "--admin-password-file", "etc/admin.pw", "--vault-key-file=/etc/runcell/vault.key"], { cwd: "/srv" });
    expect(rel.code, rel.stderr).toBe(0);
    expect(rel.stdout).toContain(`ExecStart=${SELF} serve --data-dir /var/lib/runcell --admin-password-file /srv/etc/admin.pw --vault-key-file=/etc/runcell/vault.key\n`);
    // The nightly backup is told where the key is (else it warns each night that the archive has no key).
    const nightly = await runCli(["service", "install", "--exec", SELF, "--dry-run", "--backup-daily", "/var/backups/runcell", "--", "--vault-key-file", "/etc/runcell/vault.key"]);
    expect(nightly.code, nightly.stderr).toBe(0);
    expect(nightly.stdout).toContain(`ExecStart=${SELF} backup --data-dir /var/lib/runcell --vault-key-file /etc/runcell/vault.key --keep 14 /var/backups/runcell\n`);
  });

  test("--backup-daily is refused when the service's env file points it at PostgreSQL (runcell backup would fail every night)", async () => {
    const root = newRoot();
    mkdirSync(join(root, "etc/runcell"), { recursive: true });
    const env = join(root, "etc/runcell/runcell.env");
    writeFileSync(env, "# RUNCELL_DATABASE_URL=postgres://u@h/db\nRUNCELL_DATABASE_URL=\n", { mode: 0o600 });
    const args = ["service", "install", "--exec", SELF, "--dry-run", "--root", root, "--backup-daily", "/var/backups/runcell"];
    // Commented out or empty: SQLite, so the nightly backup is fine.
    expect((await runCli(args)).code).toBe(0);
    writeFileSync(env, "ANTHROPIC_API_KEY=x\n  RUNCELL_DATABASE_URL = postgres://runcell@127.0.0.1/runcell\n");
    const refused = await runCli(args);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`--backup-daily: ${env} sets RUNCELL_DATABASE_URL, and runcell backup copies the embedded SQLite database only; schedule pg_dump`);
    expect(refused.stderr).not.toContain("postgres://runcell");
    // Without the nightly backup the same install is fine.
    expect((await runCli(args.slice(0, -2))).code).toBe(0);
  });

  test.each([
    [["service"], /expected "runcell service install", "uninstall" or "status"/],
    [["service", "restart"], /expected "runcell service install"/],
    [["service", "install", "--user", "Bad User"], /not a valid user name/],
    [["service", "install", "--user", "root"], /not root/],
    [["service", "install", "--data-dir", "/home/me/rc"], /under \/home, which the service cannot see/],
    [["service", "install", "--data-dir", "/var/lib/run cell"], /must be a path of letters/],
    [["service", "install", "--backup-daily", "/var/lib/runcell/b"], /outside the data dir/],
    [["service", "install", "--start", "--no-start"], /--start and --no-start do not go together/],
    [["service", "install", "--no-start", "--start"], /--start and --no-start do not go together/],
    [["service", "install", "--backup-daily", "/tmp/bk"], /--backup-daily: \/tmp\/bk is under \/tmp, .*; use a directory such as \/var\/backups\/runcell$/m],
    [["service", "install", "--data-dir", "/tmp/rc"], /--data-dir: \/tmp\/rc is under \/tmp, .*; use a directory such as \/var\/lib\/runcell$/m],
    [["service", "install", "--", "--bogus"], /unknown flag --bogus/],
    [["service", "install", "--", "--admin-password-file", "/root/pw"], /--admin-password-file: \/root\/pw is under \/root, which the service cannot see.*\/etc\/runcell/],
    [["service", "install", "--", "--vault-key-file=/home/me/key"], /--vault-key-file: \/home\/me\/key is under \/home/],
    [["service", "install", "--", "--docker-host", "tcp://10.0.0.5:2376?tls_dir=/root/.docker/certs"], /--docker-host: tls_dir=\/root\/.docker\/certs is under \/root/],
    [["service", "install", "--", "--docker-host", "unix:///var/run/docker.sock", "--docker-host", "ssh://u@h?ssh_key=/home/u/.ssh/id_ed25519"], /--docker-host: ssh_key=\/home\/u\/.ssh\/id_ed25519 is under \/home/],
    [["service", "install", "--", "--data-dir", "/x"], /pass --data-dir before --/],
    [["service", "install", "--", "--github-client-secret", "s3cret"], /RUNCELL_GITHUB_CLIENT_SECRET=… in \/etc\/runcell\/runcell.env/],
    [["service", "install", "--", "--database", "postgres://u:pw@h/db"], /put RUNCELL_DATABASE_URL=… in \/etc\/runcell\/runcell.env/],
    [["service", "uninstall", "--user", "x"], /uninstall takes only --root/],
    [["service", "status", "--", "--http", "1.2.3.4:5"], /status takes only --root/],
  ])("bad usage %p exits 2", async (args, message) => {
    // --dry-run: should a case pass validation by mistake, it still touches nothing on this machine.
    const r = await runCli(args[1] === "install" ? [...(args as string[]).slice(0, 2), "--dry-run", "--exec", SELF, ...(args as string[]).slice(2)] : (args as string[]));
    expect(r.stderr).toMatch(message);
    expect(r.code).toBe(2);
  });
});
