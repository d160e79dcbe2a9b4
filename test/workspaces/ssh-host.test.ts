/**
 * ssh:// Docker hosts against a real OpenSSH server (a private sshd on 127.0.0.1 with its own host
 * key, signing in as root with a key made here; the remote side is this machine's Docker CLI
 * running `docker system dial-stdio`):
 * - the runner interface's whole contract (box-contract.ts) over ssh://, key file + host_key;
 * - host keys are checked: a wrong host_key and an unknown host are refused with the fingerprint,
 *   a known_hosts entry (hashed, `[host]:port`) is accepted, an @revoked one refused;
 * - the ssh-agent (SSH_AUTH_SOCK) signs in when no ssh_key is given.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { silentLogger } from "../../src/log.ts";
import { parseDockerHost } from "../../src/lib/docker-hosts.ts";
import { DockerBoxEngine } from "../../src/workspaces/docker-box.ts";
import { DockerEngine } from "../../src/workspaces/docker.ts";
import { ImagePuller } from "../../src/workspaces/image.ts";
import { LABEL_INSTANCE } from "../../src/workspaces/spec.ts";
import { tempDir } from "../helpers/app.ts";
import { boxContract, testSpec } from "./box-contract.ts";
import { docker } from "./helpers.ts";

const IMAGE = process.env.RUNCELL_TEST_IMAGE ?? "runcell-test/busybox:latest";
const INSTANCE = `ssh-contract-${process.pid}`;
/** This file's instance label, or one a contract test made under it. */
const ours = (label: string | undefined) => label === INSTANCE || !!label?.startsWith(`${INSTANCE}-`);
const dir = tempDir("runcell-sshd-");
const port = 22000 + (process.pid % 1000);
const clientKey = join(dir, "client_ed25519");
let hostFingerprint = "";
let hostPublic = "";
let sshd: ReturnType<typeof Bun.spawn> | null = null;
let agent: { pid: number; socket: string } | null = null;

const sh = (cmd: string[]) => {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
};

beforeAll(async () => {
  sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", join(dir, "host_ed25519")]);
  sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", clientKey]);
  hostPublic = (await Bun.file(join(dir, "host_ed25519.pub")).text()).trim();
  hostFingerprint = sh(["ssh-keygen", "-lf", join(dir, "host_ed25519.pub")]).split(" ")[1]!;
  writeFileSync(join(dir, "authorized_keys"), await Bun.file(`${clientKey}.pub`).text(), { mode: 0o600 });
  writeFileSync(
    join(dir, "sshd_config"),
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${join(dir, "host_ed25519")}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "StrictModes no",
      "UsePAM no",
    ].join("\n") + "\n",
  );
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  sshd = Bun.spawn(["/usr/sbin/sshd", "-D", "-e", "-f", join(dir, "sshd_config")], { stdout: "ignore", stderr: "pipe" });
  for (let i = 0; i < 100; i++) {
    const probe = Bun.spawnSync(["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${port}`]);
    if (probe.exitCode === 0) return;
    await Bun.sleep(50);
  }
  throw new Error(`sshd did not listen on ${port}: ${sshd.stderr ? await new Response(sshd.stderr as ReadableStream).text() : ""}`);
});

afterAll(async () => {
  sshd?.kill();
  if (agent) process.kill(agent.pid);
  for (const c of await docker.listContainers({ all: true })) if (ours(c.Labels?.[LABEL_INSTANCE])) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  for (const v of (await docker.listVolumes()).Volumes ?? []) if (ours(v.Labels?.[LABEL_INSTANCE])) await docker.getVolume(v.Name).remove().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

const url = (params: string) => `ssh://root@127.0.0.1:${port}?${params}`;
const engineOf = (raw: string) => {
  const spec = parseDockerHost(raw, 0);
  return new DockerEngine(spec.url, spec);
};

describe("ssh:// host keys", () => {
  test("the right host_key and the key file: the engine answers", async () => {
    const e = engineOf(url(`ssh_key=${clientKey}&host_key=${hostFingerprint}`));
    expect(await e.available(0, 15_000)).toBe(true);
    expect(e.status.version).toBeTruthy();
  });

  test("a wrong host_key: refused, the error names the key the host showed", async () => {
    const e = engineOf(url(`ssh_key=${clientKey}&host_key=SHA256:${"A".repeat(43)}`));
    expect(await e.available(0, 15_000)).toBe(false);
    expect(e.status.error).toContain(hostFingerprint);
    expect(e.status.error).toContain("not the host_key= given");
  });

  test("no host_key: known_hosts decides (unknown → refused; hashed [host]:port entry → accepted; @revoked → refused)", async () => {
    const home = join(dir, "home");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    const before = process.env.HOME;
    process.env.HOME = home;
    try {
      writeFileSync(join(home, ".ssh", "known_hosts"), "");
      const unknown = engineOf(url(`ssh_key=${clientKey}`));
      expect(await unknown.available(0, 15_000)).toBe(false);
      expect(unknown.status.error).toContain("is not in known_hosts");
      expect(unknown.status.error).toContain(`?host_key=${hostFingerprint}`);

      const [type, key] = hostPublic.split(" ");
      writeFileSync(join(home, ".ssh", "known_hosts"), `[127.0.0.1]:${port} ${type} ${key}\n`);
      sh(["ssh-keygen", "-H", "-f", join(home, ".ssh", "known_hosts")]); // hashed, as Debian's ssh writes it
      expect(await Bun.file(join(home, ".ssh", "known_hosts")).text()).toStartWith("|1|");
      const known = engineOf(url(`ssh_key=${clientKey}`));
      expect(await known.available(0, 15_000)).toBe(true);

      writeFileSync(join(home, ".ssh", "known_hosts"), `@revoked [127.0.0.1]:${port} ${type} ${key}\n[127.0.0.1]:${port} ${type} ${key}\n`);
      const revoked = engineOf(url(`ssh_key=${clientKey}`));
      expect(await revoked.available(0, 15_000)).toBe(false);
      expect(revoked.status.error).toContain("@revoked");
    } finally {
      process.env.HOME = before;
    }
  });

  test("no ssh_key: the ssh-agent at SSH_AUTH_SOCK signs in", async () => {
    const socket = join(dir, "agent.sock");
    const out = sh(["ssh-agent", "-a", socket]);
    agent = { pid: Number(/SSH_AGENT_PID=(\d+)/.exec(out)![1]), socket };
    const add = Bun.spawnSync(["ssh-add", clientKey], { env: { ...process.env, SSH_AUTH_SOCK: socket }, stderr: "pipe" });
    expect(add.exitCode).toBe(0);
    const before = process.env.SSH_AUTH_SOCK;
    process.env.SSH_AUTH_SOCK = socket;
    try {
      const e = engineOf(url(`host_key=${hostFingerprint}`));
      expect(await e.available(0, 15_000)).toBe(true);
    } finally {
      if (before === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = before;
    }
  });
});

// The whole runner contract, every Engine API call over ssh:// (made lazily: sshd starts in beforeAll).
let sshEngine: DockerBoxEngine | null = null;
boxContract("Docker over ssh://", () => {
  if (!sshEngine) {
    const connection = engineOf(url(`ssh_key=${clientKey}&host_key=${hostFingerprint}`));
    sshEngine = new DockerBoxEngine(connection, new ImagePuller(connection, silentLogger));
  }
  return { engine: sshEngine, spec: testSpec(INSTANCE, IMAGE, "ssh") };
});
