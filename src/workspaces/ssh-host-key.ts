/**
 * Host key checking for ssh:// Docker hosts. dockerode's SSH client (ssh2) accepts any host key
 * unless told otherwise; runcell never does: the key must match the `host_key=` fingerprint of the
 * host's URL, or an entry of known_hosts (~/.ssh/known_hosts, then /etc/ssh/ssh_known_hosts; plain
 * and hashed host names, `[host]:port` for other ports than 22, `@revoked` honoured) — as OpenSSH's
 * `StrictHostKeyChecking yes`.
 */
import { createHash, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** `SHA256:` and the unpadded base64 of the key blob's SHA-256, as `ssh-keygen -lf` prints it. */
function fingerprint(key: Buffer): string {
  return "SHA256:" + createHash("sha256").update(key).digest("base64").replace(/=+$/, "");
}

/** How known_hosts names a host: `host`, or `[host]:port` when the port is not 22. */
const hostEntry = (host: string, port: number) => (port === 22 ? host : `[${host}]:${port}`);

function patternMatches(pattern: string, name: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [, , salt, hash] = pattern.split("|");
    if (!salt || !hash) return false;
    return createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64") === hash;
  }
  return pattern === name;
}

/** What known_hosts files say of this key for this host: "known", "revoked", or "unknown". */
function knownHostsVerdict(host: string, port: number, key: Buffer, files: readonly string[]): "known" | "revoked" | "unknown" {
  const name = hostEntry(host, port);
  const blob = key.toString("base64");
  let known = false;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (!line || line.startsWith("#")) continue;
      const fields = line.split(/\s+/);
      const marker = fields[0]!.startsWith("@") ? fields.shift()! : null;
      const [patterns, , keyB64] = fields;
      if (!patterns || !keyB64 || keyB64 !== blob) continue;
      const names = patterns.split(",");
      if (names.some((p) => p.startsWith("!") && patternMatches(p.slice(1), name))) continue;
      if (!names.some((p) => patternMatches(p, name))) continue;
      if (marker === "@revoked") return "revoked";
      if (marker === null) known = true;
    }
  }
  return known ? "known" : "unknown";
}

function defaultKnownHostsFiles(): string[] {
  return [join(process.env.HOME || homedir(), ".ssh", "known_hosts"), "/etc/ssh/ssh_known_hosts"];
}

/**
 * ssh2's `hostVerifier` for a host: the fingerprint must equal `expected` when given, else the
 * key must be in known_hosts. `onRefused` hears why a key was refused (the connection then fails
 * with ssh2's own "Host denied").
 */
export function hostVerifier(host: string, port: number, expected: string | null, onRefused: (why: string) => void): (key: Buffer) => boolean {
  return (key) => {
    const seen = fingerprint(key);
    if (expected) {
      if (seen === expected) return true;
      onRefused(`the host key of ${hostEntry(host, port)} is ${seen}, not the host_key= given (${expected})`);
      return false;
    }
    const verdict = knownHostsVerdict(host, port, key, defaultKnownHostsFiles());
    if (verdict === "known") return true;
    onRefused(
      verdict === "revoked"
        ? `the host key of ${hostEntry(host, port)} (${seen}) is marked @revoked in known_hosts`
        : `the host key of ${hostEntry(host, port)} (${seen}) is not in known_hosts: add it (ssh-keyscan, after checking it) or give ?host_key=${seen}`,
    );
    return false;
  };
}
