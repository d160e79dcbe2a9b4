/**
 * The systemd units `runcell service install` writes: runcell.service (a hardened `runcell serve`)
 * and, with --backup-daily, runcell-backup.service + runcell-backup.timer (a nightly
 * `runcell backup --keep 14 <dir>`). Pure text in, text out: src/cli/service.ts does
 * the writing, the user and systemctl.
 */

export const SERVICE_UNIT = "runcell.service";
export const BACKUP_SERVICE_UNIT = "runcell-backup.service";
export const BACKUP_TIMER_UNIT = "runcell-backup.timer";
/** Read by systemd (as root) before it starts the service: secrets go here, not on the command line. */
export const ENV_FILE = "/etc/runcell/runcell.env";
/** Nightly backups kept: after each new one, all but the newest this many are deleted. */
export const BACKUP_KEEP = 14;

export interface UnitOptions {
  /** The program (and, from source, its script) that ExecStart runs; [0] is an absolute path. */
  command: string[];
  user: string;
  /** Absolute; the only path the service may write. */
  dataDir: string;
  /** Extra `serve` flags, already validated. */
  serveArgs: string[];
  /** Give the service CAP_NET_BIND_SERVICE (it listens on a port below 1024). */
  bindPrivilegedPort?: boolean;
  /** TimeoutStopSec=, in seconds: longer than serve's --shutdown-timeout. */
  stopTimeoutSec?: number;
}

/** A value that cannot be written into a unit file. */
export class UnitError extends Error {}

/** Characters an argument may have and stay unquoted in a unit file. */
const PLAIN = /^[A-Za-z0-9_@+=:,./-]+$/;

/**
 * One argument of ExecStart= as systemd reads it back (systemd.service(5), "Command lines"):
 * `%` is a specifier (`%%` is a literal one), `$` expands a variable (`$$` is a literal one), and
 * inside double quotes `\` and `"` are escaped C-style.
 */
export function quoteArg(a: string): string {
  if (/[\x00-\x1f\x7f]/.test(a)) throw new UnitError(`a unit file argument cannot hold control characters: ${JSON.stringify(a)}`);
  if (PLAIN.test(a)) return a;
  const escaped = a.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%").replace(/\$/g, "$$$$");
  return `"${escaped}"`;
}

/**
 * The program of ExecStart=: systemd expands specifiers in it but not variables, and refuses
 * "special characters", so only `%` is escaped and `$`, quotes and backslashes are refused.
 */
export function quoteProgram(path: string): string {
  if (!path.startsWith("/")) throw new UnitError(`the program must be an absolute path: ${path}`);
  if (/[\x00-\x1f\x7f"'\\$]/.test(path)) throw new UnitError(`systemd cannot run a program whose path holds quotes, backslashes or $: ${path}`);
  return PLAIN.test(path) ? path : `"${path.replace(/%/g, "%%")}"`;
}

export function commandLine(words: string[]): string {
  return [quoteProgram(words[0]!), ...words.slice(1).map(quoteArg)].join(" ");
}

/**
 * The confinement shared by both services. It leaves what runcell needs: the data dir (and the
 * backup dir) writable, the Docker socket (an AF_UNIX socket in /run, reached through the docker
 * group; connecting to a socket is not a write to the read-only /run), and the network.
 */
function hardening(writable: string[], caps: string): string {
  return `# Confinement. Deliberately absent: MemoryDenyWriteExecute= (Bun's JavaScript JIT and bun:ffi,
# which the data-dir lock uses, write executable memory), PrivateUsers= (it would drop the docker
# group, and with it the socket), PrivateNetwork=/IPAddressDeny= (model APIs, webhooks and a
# tcp:// Docker host need the network).
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=${writable.join(" ")}
PrivateTmp=yes
ProtectHome=yes
PrivateDevices=yes
PrivateMounts=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
CapabilityBoundingSet=${caps}
${caps ? `AmbientCapabilities=${caps}\n` : ""}UMask=0077
`;
}

export function renderUnit(o: UnitOptions): string {
  const exec = commandLine([...o.command, "serve", "--data-dir", o.dataDir, ...o.serveArgs]);
  const state = o.dataDir.startsWith("/var/lib/") ? `StateDirectory=${o.dataDir.slice("/var/lib/".length)}\nStateDirectoryMode=0700\n` : "";
  const caps = o.bindPrivilegedPort ? "CAP_NET_BIND_SERVICE" : "";
  return `# Written by \`runcell service install\`: run it again to change the flags (or edit this file,
# then: systemctl daemon-reload && systemctl restart runcell). Logs: journalctl -u runcell -f
[Unit]
Description=runcell, a self-hosted platform that runs AI agents in Docker workspaces
After=docker.service network-online.target
# Wants=, not Requires=: runcell serves without Docker (sign-in, history, settings; workspaces are
# reported unavailable until the engine answers). Requires= would stop runcell each time Docker
# stops or restarts, and keep it from starting at all on a host without Docker.
Wants=docker.service network-online.target
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
Type=exec
User=${o.user}
SupplementaryGroups=docker
ExecStart=${exec}
# Provider keys, RUNCELL_ADMIN_PASSWORD, OAuth secrets: one KEY=value a line, mode 0600.
EnvironmentFile=-${ENV_FILE}
# SIGTERM: stop accepting, finish in-flight requests, close sockets (1001), checkpoint the WAL.
KillSignal=SIGTERM
TimeoutStopSec=${o.stopTimeoutSec ?? 30}
Restart=on-failure
RestartSec=5
# Exit status 2 is bad usage or configuration: restarting cannot fix it.
RestartPreventExitStatus=2
${state}${hardening([o.dataDir], caps)}
[Install]
WantedBy=multi-user.target
`;
}

export interface BackupOptions {
  command: string[];
  user: string;
  dataDir: string;
  backupDir: string;
  /** The service's --vault-key-file: the backup says where the key is instead of warning that it holds none. */
  vaultKeyFile: string | null;
}

/**
 * runcell-backup.service: `runcell backup --data-dir <data> --keep 14 <dir>`, which writes
 * `<dir>/runcell-backup-<UTC timestamp, ms>.tar.gz` — a name no second run takes, be it the
 * timer's catch-up run (Persistent=) or a `systemctl start runcell-backup` the same day — and then
 * deletes all but the newest 14 of them.
 */
export function renderBackupService(o: BackupOptions): string {
  const exec = commandLine([...o.command, "backup", "--data-dir", o.dataDir, ...(o.vaultKeyFile ? ["--vault-key-file", o.vaultKeyFile] : []), "--keep", String(BACKUP_KEEP), o.backupDir]);
  // Nothing else is deleted: --keep counts runcell's own runcell-backup-<timestamp> names only, so
  // the operator's files in the dir (`runcell backup … runcell-$(date +%F).tar.gz`, as its --help
  // shows) and the nightly files of earlier versions (runcell-YYYYMMDD.tar.gz) stay.
  return `# Written by \`runcell service install --backup-daily ${o.backupDir}\`; started by runcell-backup.timer.
# Run one now: systemctl start runcell-backup (each run writes its own timestamped file).
[Unit]
Description=runcell backup into ${o.backupDir}
After=runcell.service

[Service]
Type=oneshot
User=${o.user}
Environment=RUNCELL_BACKUP_DIR=${o.backupDir}
EnvironmentFile=-${ENV_FILE}
# Keeps the newest ${BACKUP_KEEP} backups (--keep).
ExecStart=${exec}
Nice=10
IOSchedulingClass=idle
${hardening([o.dataDir, o.backupDir], "")}`;
}

export function renderBackupTimer(o: { backupDir: string }): string {
  return `# Written by \`runcell service install --backup-daily ${o.backupDir}\`. Next run: systemctl list-timers runcell-backup
[Unit]
Description=Nightly runcell backup into ${o.backupDir}

[Timer]
OnCalendar=*-*-* 03:00:00
RandomizedDelaySec=30min
# A night missed while the machine was off is made up at the next boot.
Persistent=true

[Install]
WantedBy=timers.target
`;
}

/** The first value of `Key=` in a unit file, or null. */
export function unitSetting(text: string, key: string): string | null {
  const m = new RegExp(`^${key}=(.*)$`, "m").exec(text);
  return m ? m[1]!.trim() : null;
}

/** The data dir of an installed runcell.service (its ReadWritePaths=), or null. */
export function unitDataDir(text: string): string | null {
  return unitSetting(text, "ReadWritePaths")?.split(/\s+/)[0] || null;
}

/**
 * The words of an ExecStart= line as systemd reads them (the inverse of commandLine): split on
 * whitespace; inside double quotes `\` escapes the next character; `%%` and `$$` are a literal
 * `%` and `$`.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted && c === "\\" && i + 1 < line.length) word = (word ?? "") + line[++i];
    else if (c === '"') {
      quoted = !quoted;
      word ??= "";
    } else if (!quoted && /\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if ((c === "%" || c === "$") && line[i + 1] === c) {
      word = (word ?? "") + c;
      i++;
    } else word = (word ?? "") + c;
  }
  if (word !== null) words.push(word);
  return words;
}

/** The serve flags of an installed runcell.service (what follows `serve --data-dir <dir>` in its ExecStart=), or null. */
export function unitServeArgs(text: string): string[] | null {
  const exec = unitSetting(text, "ExecStart");
  if (!exec) return null;
  const words = splitCommandLine(exec);
  const at = words.findIndex((w, i) => w === "serve" && words[i + 1] === "--data-dir");
  return at < 0 ? null : words.slice(at + 3);
}

/** The backup dir of an installed runcell-backup.service, or null. */
export function unitBackupDir(text: string): string | null {
  return /^Environment=RUNCELL_BACKUP_DIR=(.*)$/m.exec(text)?.[1]?.trim() || null;
}
