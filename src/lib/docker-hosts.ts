/**
 * Docker host addresses as the operator writes them (`--docker-host`, repeatable): an engine URL
 * with optional query parameters that runcell reads and removes before connecting.
 *
 *   unix:///var/run/docker.sock
 *   unix:///run/docker-b.sock?name=b&labels=ssd,region=eu&capacity=40
 *   tcp://10.0.0.5:2376?name=gpu1&labels=gpu&tls_dir=/etc/runcell/docker-gpu1
 *   ssh://deploy@10.0.0.6?name=edge
 *
 * - `name`: what a workspace row records as its host (default: `default` for the first host,
 *   `host2`, `host3`… for the next ones). Renaming a host orphans its workspaces' rows: name hosts
 *   explicitly once there are several.
 * - `labels`: comma list of `key` or `key=value`; a profile's `host_labels` must all be among them.
 * - `capacity`: most workspaces (running or starting, warm-pool members included) placed there;
 *   omitted, no limit.
 * - `tls_dir`: a directory holding Docker's client files `ca.pem`, `cert.pem`, `key.pem` (like
 *   DOCKER_CERT_PATH); `tcp://` with it is TLS with the client certificate, verified against ca.pem.
 * - `ssh_key` (ssh:// only): the private key file to sign in with; without it, the ssh-agent at
 *   SSH_AUTH_SOCK. The remote user runs `docker system dial-stdio` (the Docker CLI must be there).
 * - `host_key` (ssh:// only): the server's host key fingerprint as `ssh-keygen -lf` prints it
 *   (`SHA256:…`); without it, the host must be in ~/.ssh/known_hosts (or /etc/ssh/ssh_known_hosts)
 *   of the user runcell runs as. An unknown host key is refused, never trusted on first use.
 */

export interface DockerHostSpec {
  name: string;
  /** The engine URL without runcell's parameters. */
  url: string;
  labels: string[];
  /** null: no limit. */
  capacity: number | null;
  tlsDir: string | null;
  /** ssh://: the private key file (null: the ssh-agent). */
  sshKey: string | null;
  /** ssh://: the expected host key fingerprint, `SHA256:…` (null: known_hosts). */
  hostKey: string | null;
}

const NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/i;
const LABEL = /^[a-z0-9][a-z0-9_.-]{0,62}(=[^,\s]{0,200})?$/i;
const KNOWN = new Set(["name", "labels", "capacity", "tls_dir", "ssh_key", "host_key"]);
const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;

/** The default name of the host at `index` (0-based) when the operator gave none. */
export const defaultHostName = (index: number) => (index === 0 ? "default" : `host${index + 1}`);

/** Parses one `--docker-host` value; throws an Error saying what is wrong. */
export function parseDockerHost(raw: string, index: number): DockerHostSpec {
  const text = raw.trim();
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`"${raw}" is not a Docker host URL (use unix:///path, tcp://host:port or ssh://user@host)`);
  }
  if (!["unix:", "tcp:", "http:", "https:", "ssh:"].includes(u.protocol)) {
    throw new Error(`unsupported Docker host "${raw}" (use unix://, tcp:// or ssh://)`);
  }
  // Said now, not as a refused connection at the first engine call (`unix://` would go to
  // 127.0.0.1:80, `tcp://` to the local socket).
  if (u.protocol === "unix:" ? !/[^/]/.test(u.pathname) : !u.hostname) {
    throw new Error(u.protocol === "unix:" ? `"${raw}" names no socket (use unix:///path/to/docker.sock)` : `"${raw}" names no host (use ${u.protocol === "ssh:" ? "ssh://user@host" : `${u.protocol}//host:port`})`);
  }
  for (const key of u.searchParams.keys()) {
    if (!KNOWN.has(key)) throw new Error(`"${raw}": unknown parameter "${key}" (known: ${[...KNOWN].join(", ")})`);
  }
  const name = u.searchParams.get("name") ?? defaultHostName(index);
  if (!NAME.test(name)) throw new Error(`"${raw}": name must be 1–63 letters, digits, "_", "." or "-", got "${name}"`);
  const labels = (u.searchParams.get("labels") ?? "")
    .split(",")
    .map((l) => l.trim())
    .filter(Boolean);
  const badLabel = labels.find((l) => !LABEL.test(l));
  if (badLabel) throw new Error(`"${raw}": label "${badLabel}" must be key or key=value (key: letters, digits, "_", "." or "-")`);
  let capacity: number | null = null;
  const cap = u.searchParams.get("capacity");
  if (cap !== null) {
    if (!/^\d+$/.test(cap) || Number(cap) < 1 || Number(cap) > 100_000) throw new Error(`"${raw}": capacity must be a whole number from 1 to 100000, got "${cap}"`);
    capacity = Number(cap);
  }
  const tlsDir = u.searchParams.get("tls_dir");
  if (tlsDir !== null && !tlsDir.startsWith("/")) throw new Error(`"${raw}": tls_dir must be an absolute path`);
  if (tlsDir !== null && u.protocol !== "tcp:" && u.protocol !== "https:") throw new Error(`"${raw}": tls_dir applies to tcp:// hosts only`);
  const sshKey = u.searchParams.get("ssh_key");
  // A fingerprint's "+" reads as a space in a query string; it never holds a space itself.
  const hostKey = u.searchParams.get("host_key")?.replaceAll(" ", "+") ?? null;
  if ((sshKey !== null || hostKey !== null) && u.protocol !== "ssh:") throw new Error(`"${raw}": ssh_key and host_key apply to ssh:// hosts only`);
  if (sshKey !== null && !sshKey.startsWith("/")) throw new Error(`"${raw}": ssh_key must be an absolute path`);
  if (hostKey !== null && !FINGERPRINT.test(hostKey)) throw new Error(`"${raw}": host_key must be a fingerprint as \`ssh-keygen -lf\` prints it (SHA256: and 43 base64 characters)`);
  for (const key of KNOWN) u.searchParams.delete(key);
  const url = u.protocol === "unix:" ? `unix://${u.pathname}` : u.toString().replace(/\?$/, "").replace(/\/$/, "");
  return { name, url, labels, capacity, tlsDir, sshKey, hostKey };
}

/** Parses every host; names must be unique. */
export function parseDockerHosts(raws: readonly string[]): DockerHostSpec[] {
  const specs = raws.map((r, i) => parseDockerHost(r, i));
  const seen = new Set<string>();
  for (const s of specs) {
    if (seen.has(s.name)) throw new Error(`two Docker hosts are named "${s.name}": give each --docker-host its own ?name=`);
    seen.add(s.name);
  }
  return specs;
}

/** Whether a host's labels hold every label a profile asks for (each compared whole: `gpu`, `region=eu`). */
export function labelsMatch(hostLabels: readonly string[], wanted: readonly string[]): boolean {
  return wanted.every((w) => hostLabels.includes(w));
}
