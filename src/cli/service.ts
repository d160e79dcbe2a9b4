/**
 * `runcell service install | uninstall | status`: runcell as a systemd service.
 *
 * install: the docker group (created if missing), a system user in it, the data dir (0700, owned
 * by that user), /etc/runcell (0750 root:<the user's group>: the key files put there are the
 * service's to read) with runcell.env in it (0600 root, for secrets), the hardened units of
 * src/admin/systemd-unit.ts, `systemctl enable`, and a start when systemd is running. Everything
 * happens under --root DIR when given (useradd/groupadd/usermod --root, `systemctl --root` enable),
 * which is how the tests install into a temporary directory; a --root install is never started.
 *
 * The start rule: systemd is running when /run/systemd/system exists (sd_booted(3)). Without it
 * (a container, CI) install writes and enables the units, says it could not start runcell, and
 * exits 0 — or 1 with --start, which asks for a running service.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { BACKUP_KEEP, BACKUP_SERVICE_UNIT, BACKUP_TIMER_UNIT, ENV_FILE, SERVICE_UNIT, UnitError, quoteArg, quoteProgram, renderBackupService, renderBackupTimer, renderUnit, unitBackupDir, unitDataDir, unitServeArgs, unitSetting } from "../admin/systemd-unit.ts";
import { envName, parseArgs, SECRET_FLAGS } from "../config.ts";
import { parseDockerHost } from "../lib/docker-hosts.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

const UNIT_DIR = "/etc/systemd/system";
/** Exists while systemd is the running init (sd_booted(3)). */
const SYSTEMD_RUNTIME = "/run/systemd/system";
const USAGE = `runcell service install [--user runcell] [--data-dir /var/lib/runcell] [--backup-daily DIR | --no-backup-daily] [--start | --no-start] [--root DIR] [--dry-run] [-- <serve flags>]
  runcell service uninstall [--root DIR]
  runcell service status [--root DIR]`;

/** Where an absolute path of the installed system lives on this machine. */
const at = (root: string, path: string) => (root === "/" ? path : join(root, path));

const systemdRunning = (root: string) => root === "/" && existsSync(SYSTEMD_RUNTIME);

function notRunningReason(root: string): string {
  return root === "/"
    ? `systemd is not running on this machine (no ${SYSTEMD_RUNTIME}: a container, a CI job or another init)`
    : `systemd is not running in ${root} (an install under --root is never started)`;
}

interface RunResult {
  ok: boolean;
  stdout: string;
  /** stdout and stderr, for messages. */
  out: string;
  /** The program is not installed. */
  missing: boolean;
}

function run(cmd: string[]): RunResult {
  try {
    // useradd and friends live in sbin, which a sudo-less PATH may lack.
    const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin:/usr/bin:/bin` } });
    const stdout = r.stdout.toString();
    return { ok: r.exitCode === 0, stdout, out: (stdout + r.stderr.toString()).trim(), missing: false };
  } catch (e) {
    return { ok: false, stdout: "", out: `${cmd[0]}: ${(e as Error).message}`, missing: true };
  }
}

const systemctl = (root: string, args: string[]) => run(["systemctl", ...(root === "/" ? [] : ["--root", root]), ...args]);

class Failure extends Error {}

/** One entry of the root's passwd or group database, split on ":"; null when absent. */
function entry(root: string, db: "passwd" | "group", name: string): string[] | null {
  if (root === "/") {
    const r = run(["getent", db, name]);
    return r.ok ? r.stdout.split("\n")[0]!.split(":") : null;
  }
  const file = join(root, "etc", db);
  if (!existsSync(file)) return null;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const fields = line.split(":");
    if (fields[0] === name) return fields;
  }
  return null;
}

function must(r: RunResult, what: string): void {
  if (!r.ok) throw new Failure(`${what} failed: ${r.out}`);
}

type Step = (msg: string) => void;

/** The docker group, the user (a member of it); returns the user's uid and primary gid. */
function ensureUser(root: string, user: string, home: string, step: Step): { uid: number; gid: number } {
  const rootArgs = root === "/" ? [] : ["--root", root];
  if (!entry(root, "group", "docker")) {
    step("creating group docker (the Docker engine's socket group)");
    must(run(["groupadd", ...rootArgs, "--system", "docker"]), "groupadd docker");
  }
  let pw = entry(root, "passwd", user);
  if (!pw) {
    step(`creating system user ${user} (member of docker, home ${home}, no login shell)`);
    const group = entry(root, "group", user) ? ["--gid", user] : ["--user-group"];
    must(run(["useradd", ...rootArgs, "--system", ...group, "--groups", "docker", "--home-dir", home, "--no-create-home", "--shell", "/usr/sbin/nologin", user]), `useradd ${user}`);
  } else {
    const docker = entry(root, "group", "docker")!;
    const members = (docker[3] ?? "").split(",").filter(Boolean);
    if (!members.includes(user) && pw[3] !== docker[2]) {
      step(`adding ${user} to group docker`);
      must(run(["usermod", ...rootArgs, "--append", "--groups", "docker", user]), `usermod ${user}`);
    } else step(`user ${user} exists and is in group docker`);
  }
  pw = entry(root, "passwd", user);
  if (!pw) throw new Failure(`user ${user} was not created`);
  return { uid: Number(pw[2]), gid: Number(pw[3]) };
}

/** A directory owned by the user, mode 0700 (existing contents are handed over too). */
function ensureOwnedDir(path: string, owner: { uid: number; gid: number }): void {
  // Missing parents the usual 0755; only the directory itself is private.
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  if (!existsSync(path)) mkdirSync(path, { mode: 0o700 });
  must(run(["chown", "-R", `${owner.uid}:${owner.gid}`, path]), `chown ${path}`);
  chmodSync(path, 0o700);
}

function writeUnit(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o644);
}

const ENV_TEMPLATE = `# Environment of runcell.service, read by systemd (as root) at each start: one KEY=value a line.
# Secrets belong here rather than in ExecStart= (the unit file is world-readable, flags show in ps).
# RUNCELL_ADMIN_PASSWORD=
# ANTHROPIC_API_KEY=
# OPENAI_API_KEY=
# RUNCELL_GITHUB_CLIENT_SECRET=
`;

/** Whether the service's env file (as it stands) points it at PostgreSQL; unreadable counts as no. */
function setsDatabaseUrl(root: string): boolean {
  try {
    return /^[ \t]*RUNCELL_DATABASE_URL[ \t]*=[ \t]*[^\s#]/m.test(readFileSync(at(root, ENV_FILE), "utf8"));
  } catch {
    return false;
  }
}

/** Paths a hardened unit cannot use: ProtectHome= hides these, PrivateTmp= replaces those. */
const HIDDEN = ["/home", "/root", "/run/user", "/tmp", "/var/tmp"];
const hiddenBy = (path: string) => HIDDEN.find((h) => path === h || path.startsWith(h + "/"));

/** `example`: a directory the hint offers instead (the data dir's and the backups' differ: backups stay outside the data dir). */
function checkDir(flag: string, value: string, example: string): string {
  const dir = resolve(value);
  if (!/^\/[A-Za-z0-9._@+,/-]*$/.test(dir)) throw new UsageError(`${flag}: "${dir}" must be a path of letters, digits and ._-+@, (it is written into the unit file)`);
  if (dir === "/") throw new UsageError(`${flag}: not /`);
  const hidden = hiddenBy(dir);
  if (hidden) throw new UsageError(`${flag}: ${dir} is under ${hidden}, which the service cannot see (ProtectHome=/PrivateTmp=); use a directory such as ${example}`);
  return dir;
}

/** The serve flags that name a file: written into the unit as absolute paths the service can see. */
const FILE_FLAGS = ["admin-password-file", "vault-key-file"];

/**
 * `serveArgs` with each file flag's path made absolute (systemd would resolve a relative one
 * against /) and checked like --data-dir: a path under /home, /root or /tmp is refused.
 */
function absoluteFileFlags(serveArgs: string[]): string[] {
  const out = [...serveArgs];
  for (let i = 0; i < out.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(out[i]!);
    if (!m || !FILE_FLAGS.includes(m[1]!)) continue;
    const inline = m[2] !== undefined;
    const value = inline ? m[2]! : out[i + 1];
    if (value === undefined) continue; // parseArgs reports the missing value
    // (Quoted into the unit file like every serve flag: any character but control ones.)
    const path = resolve(value);
    const hidden = hiddenBy(path);
    if (hidden) throw new UsageError(`--${m[1]}: ${path} is under ${hidden}, which the service cannot see (ProtectHome=/PrivateTmp=); put the file under /etc/runcell, owned by the service user, mode 0600 (install lets the service user's group into /etc/runcell)`);
    if (inline) out[i] = `--${m[1]}=${path}`;
    else out[++i] = path;
  }
  return out;
}

/** The program ExecStart runs: the compiled binary runs itself; from source, `bun src/main.ts`. */
function selfCommand(): string[] {
  return Bun.main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, resolve(process.argv[1]!)];
}

/** The backup dir of an installed runcell-backup.service, or null when there is none. */
function installedBackupDir(root: string): string | null {
  const path = join(at(root, UNIT_DIR), BACKUP_SERVICE_UNIT);
  return existsSync(path) ? unitBackupDir(readFileSync(path, "utf8")) : null;
}

/** The serve flags of the runcell.service installed in the root, or null when there is none. */
function installedServeArgs(root: string): string[] | null {
  const path = join(at(root, UNIT_DIR), SERVICE_UNIT);
  return existsSync(path) ? unitServeArgs(readFileSync(path, "utf8")) : null;
}

const KEPT_SERVE_HINT = "`-- <flags>` replaces them, `--` alone removes them";

/** Installed unit files of the root: name → path. */
function installedUnits(root: string): Map<string, string> {
  const dir = at(root, UNIT_DIR);
  const out = new Map<string, string>();
  for (const name of [SERVICE_UNIT, BACKUP_SERVICE_UNIT, BACKUP_TIMER_UNIT]) if (existsSync(join(dir, name))) out.set(name, join(dir, name));
  return out;
}

const WANTS: Record<string, string> = { [SERVICE_UNIT]: "multi-user.target.wants", [BACKUP_TIMER_UNIT]: "timers.target.wants" };

function isEnabled(root: string, name: string): boolean {
  try {
    return lstatSync(join(at(root, UNIT_DIR), WANTS[name]!, name)).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Stops (when systemd runs) and disables the given units, then deletes their files. Without
 * systemctl, the enablement symlinks are removed by hand.
 */
function removeUnits(root: string, names: string[], step: Step): void {
  const present = installedUnits(root);
  const files = names.filter((n) => present.has(n));
  if (!files.length) return;
  const installable = files.filter((n) => WANTS[n]);
  if (systemdRunning(root)) {
    step(`systemctl disable --now ${files.join(" ")}`);
    if (installable.length) must(systemctl(root, ["disable", "--now", ...installable]), "systemctl disable");
    const others = files.filter((n) => !WANTS[n]);
    if (others.length) must(systemctl(root, ["stop", ...others]), "systemctl stop");
  } else if (installable.length) {
    const r = systemctl(root, ["disable", ...installable]);
    if (!r.ok && !r.missing) throw new Failure(`systemctl disable failed: ${r.out}`);
    for (const n of installable) rmSync(join(at(root, UNIT_DIR), WANTS[n]!, n), { force: true });
  }
  for (const n of files) {
    rmSync(present.get(n)!);
    step(`removed ${present.get(n)}`);
  }
  if (systemdRunning(root)) run(["systemctl", "daemon-reload"]);
}

interface InstallPlan {
  root: string;
  user: string;
  dataDir: string;
  backupDir: string | null;
  /** backupDir is the one an earlier install set up (no --backup-daily this time). */
  keptBackup: boolean;
  /** The serve flags of the unit installed earlier, kept (no `--` this time), as shown; null: given now. */
  keptServeFlags: string | null;
  start: "auto" | "required" | "no";
  units: Map<string, string>;
}

function install(p: InstallPlan): number {
  const step: Step = (msg) => process.stdout.write(`==> ${msg}\n`);
  const { root } = p;
  try {
    const owner = ensureUser(root, p.user, p.dataDir, step);
    step(`data dir ${at(root, p.dataDir)} (0700, owned by ${p.user})`);
    ensureOwnedDir(at(root, p.dataDir), owner);
    if (p.backupDir) {
      step(`backup dir ${at(root, p.backupDir)} (0700, owned by ${p.user})`);
      ensureOwnedDir(at(root, p.backupDir), owner);
    }
    const envFile = at(root, ENV_FILE);
    // root's, and the service user's group may enter it: the key and password files put here
    // (--vault-key-file, --admin-password-file, a Docker host's certificates) are read by the
    // service as that user. The env file in it stays 0600 root: systemd reads it as root.
    const etc = at(root, "/etc/runcell");
    mkdirSync(etc, { recursive: true, mode: 0o750 });
    must(run(["chown", `0:${owner.gid}`, etc]), `chown ${etc}`);
    chmodSync(etc, 0o750);
    step(`${etc} (0750, root:${p.user}'s group: the service may read the files put there)`);
    if (!existsSync(envFile)) {
      writeFileSync(envFile, ENV_TEMPLATE, { mode: 0o600 });
      step(`wrote ${envFile} (0600): put RUNCELL_ADMIN_PASSWORD and provider keys there`);
    } else {
      // Kept as it is (it holds the operator's secrets), but not readable by others.
      const mode = statSync(envFile).mode & 0o777;
      if (mode !== 0o600) {
        chmodSync(envFile, 0o600);
        step(`${envFile} had mode 0${mode.toString(8).padStart(3, "0")}: set to 0600 (it holds secrets)`);
      }
    }
    // Only --no-backup-daily gets here without a backup dir while one is installed.
    if (!p.backupDir) removeUnits(root, [BACKUP_TIMER_UNIT, BACKUP_SERVICE_UNIT], step);
    else if (p.keptBackup) step(`keeping the nightly backup into ${at(root, p.backupDir)} (installed earlier; --no-backup-daily removes it)`);
    if (p.keptServeFlags) step(`keeping the serve flags installed earlier: ${p.keptServeFlags} (${KEPT_SERVE_HINT})`);
    const unitDir = at(root, UNIT_DIR);
    mkdirSync(unitDir, { recursive: true });
    for (const [name, text] of p.units) {
      writeUnit(join(unitDir, name), text);
      step(`wrote ${join(unitDir, name)}`);
    }
    const enable = [SERVICE_UNIT, ...(p.backupDir ? [BACKUP_TIMER_UNIT] : [])];
    const running = systemdRunning(root);
    if (running) must(run(["systemctl", "daemon-reload"]), "systemctl daemon-reload");
    step(`systemctl${root === "/" ? "" : ` --root ${root}`} enable ${enable.join(" ")}`);
    const enabled = systemctl(root, ["enable", ...enable]);
    if (!enabled.ok) {
      if (!enabled.missing) throw new Failure(`systemctl enable failed: ${enabled.out}`);
      process.stderr.write(`runcell service install: systemctl is not installed: the units are written but not enabled\n`);
    }
    if (p.start === "no") {
      step("not started (--no-start); start it with: systemctl start runcell");
      return 0;
    }
    if (!running) {
      process.stderr.write(
        `runcell service install: could not start runcell: ${notRunningReason(root)}.\n` +
          `The units are written${enabled.ok ? " and enabled: runcell starts when this system boots with systemd" : ""}.\n`,
      );
      return p.start === "required" ? 1 : 0;
    }
    // restart, not start: a reinstall with new flags takes effect now.
    step(`systemctl restart ${enable.join(" ")}`);
    must(run(["systemctl", "restart", ...enable]), "systemctl restart");
    step("runcell is running: `runcell service status`; logs (and the first-run setup link): journalctl -u runcell -f");
    return 0;
  } catch (e) {
    if (!(e instanceof Failure)) throw e;
    process.stderr.write(`runcell service install: ${e.message}\n`);
    return 1;
  }
}

function uninstall(root: string): number {
  const step: Step = (msg) => process.stdout.write(`==> ${msg}\n`);
  const units = installedUnits(root);
  if (!units.size) {
    process.stdout.write(`runcell is not installed as a service (no ${join(at(root, UNIT_DIR), SERVICE_UNIT)}): nothing to do\n`);
    return 0;
  }
  const text = (name: string) => (units.has(name) ? readFileSync(units.get(name)!, "utf8") : "");
  const dataDir = unitDataDir(text(SERVICE_UNIT));
  const backupDir = unitBackupDir(text(BACKUP_SERVICE_UNIT));
  const user = unitSetting(text(SERVICE_UNIT), "User");
  if (!systemdRunning(root)) step(`${notRunningReason(root)}: nothing to stop`);
  try {
    removeUnits(root, [SERVICE_UNIT, BACKUP_TIMER_UNIT, BACKUP_SERVICE_UNIT], step);
  } catch (e) {
    if (!(e instanceof Failure)) throw e;
    process.stderr.write(`runcell service uninstall: ${e.message}\n`);
    return 1;
  }
  const kept = [dataDir && at(root, dataDir), at(root, "/etc/runcell"), backupDir && at(root, backupDir)].filter(Boolean) as string[];
  process.stdout.write(
    (dataDir ? `The data is kept in ${at(root, dataDir)} (the database and secret.key, without which stored secrets cannot be decrypted).\n` : "") +
      `Also kept: ${user ? `the user ${user}, ` : ""}${at(root, ENV_FILE)}${backupDir ? `, the backups in ${at(root, backupDir)}` : ""}.\n` +
      `To delete them as well: rm -rf ${kept.join(" ")}${user ? ` && userdel ${root === "/" ? "" : `--root ${root} `}${user}` : ""}\n`,
  );
  return 0;
}

function status(root: string): number {
  const units = installedUnits(root);
  if (systemdRunning(root)) {
    const names = [SERVICE_UNIT, ...(units.has(BACKUP_TIMER_UNIT) ? [BACKUP_TIMER_UNIT] : [])];
    const r = Bun.spawnSync(["systemctl", "status", "--no-pager", "--full", ...names], { stdout: "inherit", stderr: "inherit" });
    return r.exitCode ?? 1;
  }
  const unitPath = join(at(root, UNIT_DIR), SERVICE_UNIT);
  let out = `${notRunningReason(root)}: runcell.service cannot run here, so there is no status to show.\n`;
  if (!units.has(SERVICE_UNIT)) {
    process.stdout.write(out + `${unitPath}: not installed (runcell service install)\n`);
    return 4; // systemctl status: no such unit
  }
  const text = readFileSync(unitPath, "utf8");
  out += `${unitPath}: installed, ${isEnabled(root, SERVICE_UNIT) ? "enabled" : "not enabled"}\n`;
  out += `user: ${unitSetting(text, "User") ?? "?"}, data dir: ${at(root, unitDataDir(text) ?? "?")}\n`;
  out += `ExecStart=${unitSetting(text, "ExecStart") ?? "?"}\n`;
  if (units.has(BACKUP_SERVICE_UNIT)) {
    const dir = unitBackupDir(readFileSync(units.get(BACKUP_SERVICE_UNIT)!, "utf8"));
    out += `nightly backup: into ${dir ? at(root, dir) : "?"} (${BACKUP_TIMER_UNIT} ${isEnabled(root, BACKUP_TIMER_UNIT) ? "enabled" : "not enabled"})\n`;
  }
  process.stdout.write(out);
  return 3; // systemctl status: not running
}

export const serviceCommand: Command = {
  name: "service",
  summary: "Run runcell as a systemd service: install (user, data dir, hardened unit, start), uninstall, status.",
  usage: USAGE,
  details: `  install           create the docker group (if missing) and a system user in it, the data dir (0700,
                    owned by the user), /etc/runcell (0750, the user's group may enter it: key files
                    go there, owned by the user) and ${ENV_FILE} (0600 root, for secrets); write a hardened
                    ${SERVICE_UNIT}; systemctl enable; start it where systemd is running
  --user U          system user to run as (default runcell)
  --data-dir DIR    data directory, the only writable path (default /var/lib/runcell)
  --backup-daily D  also ${BACKUP_SERVICE_UNIT} + ${BACKUP_TIMER_UNIT}: runcell backup --keep ${BACKUP_KEEP} D
                    (D/runcell-backup-<UTC timestamp>.tar.gz) every night at 03:00-03:30, keeping the
                    newest ${BACKUP_KEEP}; with -- --vault-key-file K it is told where the key is.
                    An install again without it keeps the nightly backup already installed
  --no-backup-daily remove the nightly backup an earlier install set up (its files are kept)
  --start           starting is required: exit 1 when systemd is not running (by default install
                    then says it could not start runcell and exits 0)
  --no-start        enable only; do not start
  --root DIR        install into the system under DIR (useradd --root, systemctl --root): never started
  --exec PATH       the runcell binary ExecStart runs (default: this one; it must be outside /home,
                    /root and /tmp, which the service cannot see)
  --dry-run         print the units and what would be done; change nothing
  -- <flags>        serve flags written into ExecStart (e.g. --http 127.0.0.1:7420 --public-url https://…);
                    secrets go in ${ENV_FILE}, not here. An install again without -- keeps the
                    serve flags installed earlier; -- with nothing after it removes them
  uninstall         stop, disable and delete the units; keep the data dir, the user, ${ENV_FILE}
                    and the backups (and say where)
  status            systemctl status runcell (its exit code: 0 running, 3 not running, 4 not installed),
                    or, where systemd is not running, what is installed (exit 3, or 4 when nothing is)`,
  examples: [
    "sudo runcell service install",
    "sudo runcell service install --backup-daily /var/backups/runcell -- --http 127.0.0.1:7420 --public-url https://agents.example.com --trust-proxy",
    "runcell service install --dry-run",
    "runcell service status",
    "sudo runcell service uninstall",
  ],
  async run(argv) {
    const split = argv.indexOf("--");
    const own = split < 0 ? argv : argv.slice(0, split);
    let serveArgs = split < 0 ? [] : argv.slice(split + 1);
    let args;
    let root: string;
    try {
      args = parseArgs(own, { user: true, "data-dir": true, "backup-daily": true, "no-backup-daily": false, root: true, exec: true, start: false, "dry-run": false }, false);
      const [sub, ...rest] = args.positionals;
      if (sub !== "install" && sub !== "uninstall" && sub !== "status") throw new UsageError(`expected "runcell service install", "uninstall" or "status" (see --help)`);
      if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
      root = resolve(String(args.extra.get("root") ?? "/"));
      if (sub !== "install") {
        const misplaced = [...args.extra.keys()].find((k) => k !== "root");
        if (misplaced || split >= 0) throw new UsageError(`${sub} takes only --root${misplaced ? ` (not --${misplaced})` : ""}`);
        if (sub === "status") return status(root);
        if (process.getuid?.() !== 0) throw new Failure("needs root (run it with sudo)");
        return uninstall(root);
      }
    } catch (e) {
      if (e instanceof Failure) return (process.stderr.write(`runcell service: ${e.message}\n`), 1);
      return failUsage("service", e);
    }

    let plan: InstallPlan;
    try {
      const user = String(args.extra.get("user") ?? "runcell");
      if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) throw new UsageError(`--user: "${user}" is not a valid user name`);
      if (user === "root") throw new UsageError("--user: not root; the service runs as a dedicated unprivileged user");
      const dataDir = checkDir("--data-dir", String(args.extra.get("data-dir") ?? "/var/lib/runcell"), "/var/lib/runcell");
      if (args.extra.has("backup-daily") && args.extra.get("no-backup-daily") === true) throw new UsageError("--backup-daily and --no-backup-daily do not go together");
      // A reinstall (new serve flags, a new binary) keeps the nightly backup an earlier install set
      // up, into the same dir: dropping it needs --no-backup-daily, not a flag left out.
      const kept = args.extra.has("backup-daily") || args.extra.get("no-backup-daily") === true ? null : installedBackupDir(root);
      const backupDir = args.extra.has("backup-daily") ? checkDir("--backup-daily", String(args.extra.get("backup-daily")), "/var/backups/runcell") : kept;
      if (backupDir && (backupDir === dataDir || backupDir.startsWith(dataDir + "/"))) throw new UsageError("--backup-daily: keep the backups outside the data dir (e.g. /var/backups/runcell)");
      // The nightly `runcell backup` reads the same env file, and refuses PostgreSQL: it would fail every night.
      if (backupDir && setsDatabaseUrl(root)) {
        const which = kept ? `the nightly backup installed earlier (into ${kept}; drop it with --no-backup-daily)` : "--backup-daily";
        throw new UsageError(`${which}: ${at(root, ENV_FILE)} sets RUNCELL_DATABASE_URL, and runcell backup copies the embedded SQLite database only; schedule pg_dump for PostgreSQL instead (README, Operations)`);
      }
      // A reinstall (a new binary, another backup dir) without `--` keeps the unit's serve flags, as
      // it keeps the nightly backup: emptying them needs `--` with nothing after it, not a part left out.
      const keptServe = split < 0 ? installedServeArgs(root) : null;
      if (keptServe) serveArgs = keptServe;
      // Validate the serve flags now, not at the first boot.
      const serve = parseArgs(serveArgs);
      serveArgs = absoluteFileFlags(serveArgs);
      // The files a Docker host's address names (tls_dir, ssh_key) must be visible to the service too.
      const hosts = serve.flags.get("docker-host");
      for (const [i, raw] of (Array.isArray(hosts) ? hosts : hosts === undefined ? [] : [hosts]).map(String).entries()) {
        let spec;
        try {
          spec = parseDockerHost(raw, i);
        } catch (e) {
          throw new UsageError(`--docker-host: ${(e as Error).message}`);
        }
        for (const [param, path] of [["tls_dir", spec.tlsDir], ["ssh_key", spec.sshKey]] as const) {
          const hidden = path ? hiddenBy(path) : undefined;
          if (hidden) throw new UsageError(`--docker-host: ${param}=${path} is under ${hidden}, which the service cannot see (ProtectHome=/PrivateTmp=); put it under /etc/runcell, readable by the service user (install lets the service user's group into /etc/runcell)`);
        }
      }
      if (serve.positionals.length) throw new UsageError(`unexpected serve argument "${serve.positionals[0]}"`);
      if (serve.flags.has("data-dir")) throw new UsageError("pass --data-dir before --, not as a serve flag");
      const secret = [...serve.flags.keys()].find((f) => SECRET_FLAGS.has(f));
      if (secret) throw new UsageError(`--${secret} does not belong in the unit file (world-readable, and flags show in ps): put ${envName(secret)}=… in ${ENV_FILE}`);
      const port = Number(/:(\d+)$/.exec(String(serve.flags.get("http") ?? ""))?.[1] ?? 7420);
      const shutdownMs = Number(serve.flags.get("shutdown-timeout") ?? 10_000);
      const command = args.extra.has("exec") ? [resolve(String(args.extra.get("exec")))] : selfCommand();
      quoteProgram(command[0]!);
      for (const path of command) {
        const hidden = hiddenBy(path);
        if (hidden) throw new Failure(`the service would run ${path}, under ${hidden}, which it cannot see (ProtectHome=/PrivateTmp=): install the binary first (./install.sh service puts it in /usr/local/bin)`);
      }
      const units = new Map<string, string>([[SERVICE_UNIT, renderUnit({ command, user, dataDir, serveArgs, bindPrivilegedPort: port > 0 && port < 1024, stopTimeoutSec: Math.max(30, Math.ceil(shutdownMs / 1000) + 20) })]]);
      if (backupDir) {
        // Where the vault key is when not in the data dir (as the service gets it): else every night warns the backup has no key.
        const vaultKeyFile = parseArgs(serveArgs).flags.get("vault-key-file");
        units.set(BACKUP_SERVICE_UNIT, renderBackupService({ command, user, dataDir, backupDir, vaultKeyFile: typeof vaultKeyFile === "string" ? vaultKeyFile : null }));
        units.set(BACKUP_TIMER_UNIT, renderBackupTimer({ backupDir }));
      }
      // --no-start is parseArgs' negation of --start, where the last of the two would win: both is a contradiction.
      if (own.includes("--start") && own.includes("--no-start")) throw new UsageError("--start and --no-start do not go together");
      const start = args.extra.get("start") === true ? "required" : args.extra.get("start") === false ? "no" : "auto";
      plan = { root, user, dataDir, backupDir, keptBackup: kept !== null, keptServeFlags: keptServe?.length ? keptServe.map(quoteArg).join(" ") : null, start, units };
    } catch (e) {
      if (e instanceof Failure) return (process.stderr.write(`runcell service install: ${e.message}\n`), 1);
      if (e instanceof UnitError) return failUsage("service", new UsageError(e.message));
      return failUsage("service", e);
    }

    if (args.extra.get("dry-run") === true) {
      const unitDir = at(root, UNIT_DIR);
      for (const [name, text] of plan.units) process.stdout.write(`# would write ${join(unitDir, name)}:\n${text}\n`);
      if (plan.keptBackup) process.stdout.write(`# would keep the nightly backup into ${at(root, plan.backupDir!)} (installed earlier; --no-backup-daily removes it)\n`);
      if (plan.keptServeFlags) process.stdout.write(`# would keep the serve flags installed earlier: ${plan.keptServeFlags} (${KEPT_SERVE_HINT})\n`);
      else if (!plan.backupDir && installedBackupDir(root)) process.stdout.write(`# would remove the nightly backup (--no-backup-daily); the backups themselves are kept\n`);
      process.stdout.write(
        `# would ensure group docker, system user ${plan.user} in it, ${at(root, plan.dataDir)} (0700, owned by ${plan.user})` +
          `${plan.backupDir ? `, ${at(root, plan.backupDir)} (0700)` : ""}, ${at(root, "/etc/runcell")} (0750 root:${plan.user}'s group), ${at(root, ENV_FILE)} (0600 root);\n` +
          `# then systemctl enable ${[SERVICE_UNIT, ...(plan.backupDir ? [BACKUP_TIMER_UNIT] : [])].join(" ")}` +
          `${plan.start === "no" ? "" : systemdRunning(root) ? " and start it" : `; not start it: ${notRunningReason(root)}`}\n`,
      );
      return 0;
    }
    if (process.getuid?.() !== 0) {
      process.stderr.write("runcell service install: needs root (run it with sudo); --dry-run shows what it would do\n");
      return 1;
    }
    return install(plan);
  },
};
