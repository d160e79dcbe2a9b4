/**
 * `runcell service install`: writes a hardened systemd unit that runs this binary as a dedicated
 * system user (created if missing, added to the docker group), with the data dir under
 * /var/lib/runcell, then reloads systemd and enables the service.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "../config.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

export interface UnitOptions {
  /** The program (and, from source, its script) that ExecStart runs. */
  command: string[];
  user: string;
  dataDir: string;
  /** Extra `serve` flags, already validated. */
  serveArgs: string[];
}

const quote = (a: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `"${a.replace(/(["\\$`])/g, "\\$1")}"`);

export function renderUnit(o: UnitOptions): string {
  const exec = [...o.command, "serve", "--data-dir", o.dataDir, ...o.serveArgs].map(quote).join(" ");
  const state = o.dataDir.startsWith("/var/lib/") ? `StateDirectory=${o.dataDir.slice("/var/lib/".length)}\nStateDirectoryMode=0700\n` : "";
  return `# Written by \`runcell service install\`. Edit the flags here, then: systemctl daemon-reload && systemctl restart runcell
[Unit]
Description=runcell — self-hosted AI agent platform
Documentation=runcell --help
After=network-online.target docker.service
Wants=network-online.target docker.service

[Service]
Type=simple
User=${o.user}
Group=${o.user}
SupplementaryGroups=docker
ExecStart=${exec}
# SIGTERM: stop accepting, finish in-flight requests, close sockets (1001), checkpoint the WAL.
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
RestartSec=2
# Provider keys and the admin password belong in this file (mode 0600), not on the command line:
EnvironmentFile=-/etc/runcell/runcell.env
UMask=0077
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
ReadWritePaths=${o.dataDir}
${state}ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
RestrictSUIDSGID=true
LockPersonality=true

[Install]
WantedBy=multi-user.target
`;
}

function run(cmd: string[]): { ok: boolean; out: string } {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  return { ok: r.exitCode === 0, out: (r.stdout.toString() + r.stderr.toString()).trim() };
}

export const serviceCommand: Command = {
  name: "service",
  summary: "Install runcell as a systemd service (dedicated user, hardened unit, enabled at boot).",
  usage: "runcell service install [--user runcell] [--data-dir /var/lib/runcell] [--dry-run] [-- <serve flags>]",
  details: `  --user U          system user to run as (created if missing, added to the docker group)
  --data-dir DIR    data directory (default /var/lib/runcell)
  --unit-dir DIR    where to write runcell.service (default /etc/systemd/system)
  --dry-run         print the unit and what would be done; change nothing
  -- <flags>        extra serve flags written into ExecStart (e.g. --http 0.0.0.0:7420 --public-url https://…)`,
  examples: [
    "sudo runcell service install",
    "sudo runcell service install --user agents -- --http 0.0.0.0:7420 --public-url https://agents.example.com --trust-proxy",
    "runcell service install --dry-run",
  ],
  async run(argv) {
    const split = argv.indexOf("--");
    const own = split < 0 ? argv : argv.slice(0, split);
    const serveArgs = split < 0 ? [] : argv.slice(split + 1);
    let args;
    try {
      args = parseArgs(own, { user: true, "data-dir": true, "unit-dir": true, "dry-run": false }, false);
      if (args.positionals[0] !== "install" || args.positionals.length !== 1) throw new UsageError('expected "runcell service install" (see --help)');
      // Validate the serve flags now, not at the first boot.
      parseArgs(serveArgs);
      if (serveArgs.includes("--data-dir")) throw new UsageError("pass --data-dir before --, not as a serve flag");
    } catch (e) {
      return failUsage("service", e);
    }
    const user = String(args.extra.get("user") ?? "runcell");
    if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) return failUsage("service", new UsageError(`--user: "${user}" is not a valid user name`));
    const dataDir = resolve(String(args.extra.get("data-dir") ?? "/var/lib/runcell"));
    const unitDir = String(args.extra.get("unit-dir") ?? "/etc/systemd/system");
    const dryRun = args.extra.get("dry-run") === true;
    // The compiled binary runs itself; from source, ExecStart is `bun src/main.ts`.
    const fromSource = !Bun.main.startsWith("/$bunfs/");
    const command = fromSource ? [process.execPath, resolve(process.argv[1]!)] : [process.execPath];
    const unit = renderUnit({ command, user, dataDir, serveArgs });
    const unitPath = join(unitDir, "runcell.service");

    if (dryRun) {
      process.stdout.write(`# would write ${unitPath}:\n${unit}\n# would ensure user ${user} (in group docker), ${dataDir} (0700), then systemctl enable --now runcell\n`);
      return 0;
    }
    const step = (msg: string) => process.stdout.write(`==> ${msg}\n`);
    const systemd = unitDir === "/etc/systemd/system";
    if (systemd) {
      if (process.getuid?.() !== 0) {
        console.error("runcell service install: needs root (run it with sudo), or use --unit-dir to only write the unit");
        return 1;
      }
      if (!run(["id", "-u", user]).ok) {
        step(`creating system user ${user}`);
        const r = run(["useradd", "--system", "--home-dir", dataDir, "--shell", "/usr/sbin/nologin", user]);
        if (!r.ok) return (console.error(`useradd failed: ${r.out}`), 1);
      }
      if (run(["getent", "group", "docker"]).ok) run(["usermod", "-aG", "docker", user]);
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      run(["chown", "-R", `${user}:${user}`, dataDir]);
    }
    mkdirSync(unitDir, { recursive: true });
    step(`writing ${unitPath}`);
    writeFileSync(unitPath, unit, { mode: 0o644 });
    if (systemd) {
      if (!existsSync("/etc/runcell")) mkdirSync("/etc/runcell", { mode: 0o700 });
      step("systemctl daemon-reload && systemctl enable --now runcell");
      const reload = run(["systemctl", "daemon-reload"]);
      const enable = reload.ok ? run(["systemctl", "enable", "--now", "runcell"]) : reload;
      if (!enable.ok) {
        console.error(`systemctl failed: ${enable.out}\nThe unit is written; start it with: systemctl enable --now runcell`);
        return 1;
      }
      step("runcell is running: journalctl -u runcell -f shows its logs; the first-run setup link is printed there");
    }
    return 0;
  },
};
