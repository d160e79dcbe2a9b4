/**
 * Configuration: flags > RUNCELL_* environment > <data-dir>/runcell.toml|.json > defaults,
 * resolved and validated once. One table (OPTIONS) drives the flag parser, the environment and
 * file keys, validation and `--help`, so they cannot drift apart.
 */
import { SQL } from "bun";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { type DockerHostSpec, parseDockerHosts } from "./lib/docker-hosts.ts";
import { formatDuration, parseDuration } from "./lib/time.ts";

export class ConfigError extends Error {}

type Kind = "string" | "int" | "number" | "bool" | "duration" | "durations" | "url" | "listen" | "enum" | "list" | "hosts";

interface OptionSpec {
  /** Flag name without dashes; env is RUNCELL_<FLAG_IN_SNAKE_UPPER>, file key is flag_in_snake. */
  flag: string;
  kind: Kind;
  help: string;
  default?: unknown;
  values?: readonly string[];
  min?: number;
  max?: number;
  /** Secrets may come from flags or env but are never printed by `--help` defaults. */
  secret?: boolean;
  /** Not read from the data-dir file (it locates the file). */
  noFile?: boolean;
  /** The environment variable, when not RUNCELL_<FLAG_IN_SNAKE_UPPER>. */
  env?: string;
}

export const OPTIONS: readonly OptionSpec[] = [
  { flag: "http", kind: "listen", default: "127.0.0.1:7420", help: "address to listen on (host:port)" },
  {
    flag: "database",
    kind: "string",
    env: "RUNCELL_DATABASE_URL",
    secret: true,
    help: "postgres://user:password@host:5432/db to keep the state in PostgreSQL (shared by several servers); without it, the embedded SQLite file in the data dir",
  },
  { flag: "data-dir", kind: "string", default: "./runcell_data", noFile: true, help: "directory for the database, keys and runcell.json (created 0700)" },
  { flag: "public-url", kind: "url", help: "URL users reach the server at (default http://<http address>); cookies get Secure behind https" },
  {
    flag: "docker-host",
    kind: "hosts",
    default: ["unix:///var/run/docker.sock"],
    help: "Docker engine for workspaces: unix:///path, tcp://host:port or ssh://user@host, with optional ?name=&labels=&capacity=&tls_dir= (ssh://: &ssh_key=&host_key=); repeat the flag for several hosts (env: space-separated; file: a list)",
  },
  { flag: "admin-password-file", kind: "string", help: "file holding the /admin password (hashed into the database at start)" },
  {
    flag: "vault-key-file",
    kind: "string",
    help: "file holding the vault key (32 bytes, base64) instead of <data dir>/secret.key: kept out of the data dir and its backups, and the same for every server sharing a database",
  },
  { flag: "signup", kind: "enum", values: ["closed", "open"], default: "closed", help: "who may create an account: closed (admin/setup link only) or open" },
  { flag: "allow-private-webhooks", kind: "bool", default: false, help: "allow webhook URLs on loopback/private networks (SSRF guard off)" },
  { flag: "trust-proxy", kind: "bool", default: false, help: "take the client address from X-Forwarded-For (its last entry), set by a reverse proxy" },
  { flag: "log-level", kind: "enum", values: ["debug", "info", "warn", "error"], default: "info", help: "minimum level of the JSON log lines" },
  { flag: "rate-limit-per-minute", kind: "int", default: 60, min: 1, max: 1_000_000_000, help: "requests per minute per caller (token bucket refill)" },
  { flag: "rate-limit-burst", kind: "int", default: 10, min: 1, max: 1_000_000_000, help: "token bucket size per caller" },
  { flag: "default-max-concurrency", kind: "int", default: 5, min: 1, max: 1000, help: "running workspaces per profile unless the profile says otherwise" },
  { flag: "workspace-image", kind: "string", default: "runcell/workspace:latest", help: "default container image for new profiles" },
  { flag: "workspace-idle-timeout", kind: "duration", default: 30 * 60_000, min: 1000, help: "stop a workspace after this long without activity" },
  { flag: "max-warm-pool", kind: "int", default: 2, min: 0, max: 100, help: "ceiling of a profile's warm_pool (started containers kept ready for its next sessions)" },
  { flag: "max-warm-pool-total", kind: "int", default: 8, min: 0, max: 10_000, help: "warm-pool containers across all profiles (they count here, not against their owner's limits, until taken)" },
  { flag: "workspace-start-parallelism", kind: "int", default: 4, min: 1, max: 64, help: "container creations sent to the engine at once; further starts wait their turn in order" },
  { flag: "download-spool-mb", kind: "int", default: 1024, min: 1, max: 10_000_000, help: "disk that file downloads under way may hold at once in <data dir>/tmp (each file over 1 MiB is copied there while its client reads it); a download past it is refused 429 with Retry-After" },
  { flag: "docker-timeout", kind: "duration", default: 60_000, min: 1_000, max: 1_800_000, help: "how long one Docker engine call (create, start, inspect, remove, starting a command…) may take before it fails with CONTAINER_FAILED; image pulls, command output and file transfers are not bounded by it" },
  { flag: "github-client-id", kind: "string", help: "GitHub OAuth app client id (enables GitHub sign-in)" },
  { flag: "github-client-secret", kind: "string", secret: true, help: "GitHub OAuth app client secret" },
  { flag: "github-authorize-url", kind: "url", default: "https://github.com/login/oauth/authorize", help: "GitHub authorize endpoint" },
  { flag: "github-token-url", kind: "url", default: "https://github.com/login/oauth/access_token", help: "GitHub token endpoint" },
  { flag: "github-api-url", kind: "url", default: "https://api.github.com", help: "GitHub REST API base (for /user and /user/emails)" },
  { flag: "google-client-id", kind: "string", help: "Google OAuth client id (enables Google sign-in)" },
  { flag: "google-client-secret", kind: "string", secret: true, help: "Google OAuth client secret" },
  { flag: "google-authorize-url", kind: "url", default: "https://accounts.google.com/o/oauth2/v2/auth", help: "Google authorize endpoint" },
  { flag: "google-token-url", kind: "url", default: "https://oauth2.googleapis.com/token", help: "Google token endpoint" },
  { flag: "google-userinfo-url", kind: "url", default: "https://openidconnect.googleapis.com/v1/userinfo", help: "Google OpenID Connect userinfo endpoint" },
  { flag: "webhook-attempts", kind: "int", default: 3, min: 1, max: 10, help: "delivery attempts per notification before it is logged failed" },
  { flag: "webhook-backoff", kind: "durations", default: [5000, 15000, 45000], help: "waits between attempts (comma list; the last repeats)" },
  { flag: "webhook-timeout", kind: "duration", default: 10_000, min: 100, max: 600_000, help: "timeout of one delivery attempt" },
  { flag: "replica-lease", kind: "duration", default: 30_000, min: 1_000, max: 600_000, help: "PostgreSQL replicas: how long a replica's task leases and heartbeat hold unless renewed; a replica that dies has its tasks continued by another after this long" },
  { flag: "shutdown-timeout", kind: "duration", default: 10_000, min: 0, max: 3_600_000, help: "how long SIGTERM waits for in-flight requests" },
  { flag: "allow-model-hosts", kind: "list", default: [], help: "hosts (or host:port) on loopback/private networks every user's profiles may use as model.base_url, e.g. a local Ollama (admins may use any)" },
  { flag: "max-sockets-per-caller", kind: "int", default: 20, min: 1, max: 10_000, help: "open /v1/stream sockets per user (one more is refused with close code 4029)" },
  { flag: "audit-retention", kind: "duration", default: 90 * 86_400_000, min: 3_600_000, help: "how long audit log rows are kept" },
  // Operator policy: what each non-admin user may consume (per-user overrides: PATCH /admin/users/:id).
  { flag: "max-profiles-per-user", kind: "int", default: 50, min: 0, max: 1_000_000, help: "profiles per user" },
  { flag: "max-running-workspaces-per-user", kind: "int", default: 10, min: 0, max: 100_000, help: "running workspaces per user across all their profiles" },
  { flag: "max-memory-mb", kind: "int", default: 4096, min: 64, max: 262_144, help: "ceiling of a profile's limits.memory_mb" },
  { flag: "max-cpus", kind: "number", default: 2, min: 0.1, max: 64, help: "ceiling of a profile's limits.cpus" },
  { flag: "max-pids", kind: "int", default: 4096, min: 32, max: 65_536, help: "ceiling of a profile's limits.pids" },
  { flag: "max-profile-concurrency", kind: "int", default: 10, min: 1, max: 1000, help: "ceiling of a profile's limits.max_concurrency" },
  { flag: "max-turns", kind: "int", default: 200, min: 1, max: 1000, help: "ceiling of a profile's (and a task's) max_turns" },
  { flag: "max-task-budget-usd", kind: "number", default: 20, min: 0.01, max: 10_000, help: "ceiling of a profile's (and a task's) max_budget_usd" },
  { flag: "allowed-images", kind: "list", default: [], help: "image patterns non-admin profiles may use (* matches anything); empty: the workspace image only" },
  { flag: "allow-bridge-network", kind: "bool", default: false, help: "let non-admin profiles use network: bridge (workspaces reach the network)" },
  { flag: "monthly-spend-usd", kind: "number", default: 0, min: 0, max: 1_000_000, help: "per-user monthly spend cap on the server's own provider keys (0: no cap)" },
  { flag: "workspace-disk-mb", kind: "int", default: 10_240, min: 0, max: 10_000_000, help: "disk cap per workspace volume, checked every minute (0: no cap)" },
  { flag: "min-schedule-interval", kind: "duration", default: 60_000, min: 1_000, max: 86_400_000, help: "shortest time between two runs of a playbook's schedule (whole seconds, rounded up); a schedule that fires more often is refused" },
];

/** Flags whose values are secrets: kept out of unit files (service install) and masked where a command line is shown (doctor). */
export const SECRET_FLAGS: ReadonlySet<string> = new Set(OPTIONS.filter((o) => o.secret).map((o) => o.flag));

/** The operator's policy defaults (src/admin/policy.ts applies them, with per-user overrides). */
export interface PolicyDefaults {
  maxProfiles: number;
  maxRunningWorkspaces: number;
  maxMemoryMb: number;
  maxCpus: number;
  maxPids: number;
  maxConcurrency: number;
  maxTurns: number;
  maxBudgetUsd: number;
  /** Image patterns; empty: the workspace image only. */
  allowedImages: string[];
  allowBridgeNetwork: boolean;
  /** 0: no cap. */
  monthlySpendUsd: number;
  /** 0: no cap. */
  workspaceDiskMb: number;
  /** Seconds between two runs of a playbook's schedule, at least. */
  minScheduleIntervalSec: number;
}

export interface OAuthProviderConfig {
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  /** GitHub: REST API base. Google: userinfo URL. */
  apiUrl: string;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  publicUrl: string;
  /** The first Docker host's URL (doctor, `runcell image build`). */
  dockerHost: string;
  /** Every Docker host workspaces may be placed on (at least one). */
  dockerHosts: DockerHostSpec[];
  adminPasswordFile: string | null;
  /** The vault key's file when not <data dir>/secret.key (--vault-key-file). */
  vaultKeyFile: string | null;
  /** --database: a postgres:// URL (the state in PostgreSQL); null: the SQLite file in the data dir. */
  databaseUrl: string | null;
  /** From RUNCELL_ADMIN_PASSWORD only (never a flag: flags show in `ps`). */
  adminPassword: string | null;
  signup: "closed" | "open";
  allowPrivateWebhooks: boolean;
  trustProxy: boolean;
  logLevel: "debug" | "info" | "warn" | "error";
  rateLimit: { perMinute: number; burst: number };
  defaultMaxConcurrency: number;
  workspaceImage: string;
  workspaceIdleTimeoutMs: number;
  /** Ceiling of a profile's warm_pool. */
  maxWarmPool: number;
  /** Warm-pool members across all profiles. */
  maxWarmPoolTotal: number;
  /** Container creations in flight against the engine at once. */
  workspaceStartParallelism: number;
  /** How long one Docker engine call may take (workspaces/docker-box.ts `bounded`). */
  dockerTimeoutMs: number;
  /** Disk the file downloads under way may hold at once (workspaces/spool.ts), MiB. */
  downloadSpoolMb: number;
  github: OAuthProviderConfig | null;
  google: OAuthProviderConfig | null;
  webhook: { attempts: number; backoffMs: number[]; timeoutMs: number };
  shutdownTimeoutMs: number;
  /** PostgreSQL replicas: how long task leases and a replica's heartbeat hold unless renewed. */
  replicaLeaseMs: number;
  /** Loopback/private model hosts every user may use (`host` or `host:port`). */
  allowModelHosts: string[];
  maxSocketsPerCaller: number;
  auditRetentionMs: number;
  policy: PolicyDefaults;
  /** Where each explicitly set option came from (flag, env name or file key); defaults are absent. */
  sources?: Readonly<Record<string, string>>;
}

export const envName = (flag: string) => specByFlag.get(flag)?.env ?? "RUNCELL_" + flag.toUpperCase().replace(/-/g, "_");
const fileKey = (flag: string) => flag.replace(/-/g, "_");
const specByFlag = new Map(OPTIONS.map((o) => [o.flag, o]));

function convert(spec: OptionSpec, raw: unknown, origin: string): unknown {
  const bad = (why: string): never => {
    throw new ConfigError(`${origin}: ${why}`);
  };
  if (spec.kind === "bool") {
    if (typeof raw === "boolean") return raw;
    const s = String(raw).toLowerCase();
    if (["1", "true", "yes", "on"].includes(s)) return true;
    if (["0", "false", "no", "off"].includes(s)) return false;
    return bad(`expected true or false, got "${raw}"`);
  }
  if (spec.kind === "hosts") {
    const parts = Array.isArray(raw) ? raw.map(String) : String(raw).split(/\s+/);
    const hosts = parts.map((p) => p.trim()).filter(Boolean);
    if (hosts.length === 0) bad("expected at least one Docker host");
    try {
      parseDockerHosts(hosts);
    } catch (e) {
      bad((e as Error).message);
    }
    return hosts;
  }
  if (spec.kind === "list") {
    const parts = Array.isArray(raw) ? raw.map(String) : String(raw).split(",");
    return parts.map((p) => p.trim()).filter(Boolean);
  }
  if (spec.kind === "durations") {
    const parts = Array.isArray(raw) ? raw.map(String) : String(raw).split(",");
    const out = parts.map((p) => parseDuration(p));
    if (out.length === 0 || out.some((d) => d == null || d < 0)) bad(`expected a comma-separated list of durations like 5s,15s,45s, got "${raw}"`);
    return out;
  }
  const s = typeof raw === "number" ? String(raw) : raw;
  if (typeof s !== "string") return bad(`expected a ${spec.kind}, got ${JSON.stringify(raw)}`);
  switch (spec.kind) {
    case "int": {
      if (!/^-?\d+$/.test(s.trim())) bad(`expected an integer, got "${s}"`);
      const n = Number(s);
      if (spec.min != null && n < spec.min) bad(`must be at least ${spec.min}, got ${n}`);
      if (spec.max != null && n > spec.max) bad(`must be at most ${spec.max}, got ${n}`);
      return n;
    }
    case "number": {
      const n = Number(s);
      if (s.trim() === "" || !Number.isFinite(n)) bad(`expected a number, got "${s}"`);
      if (spec.min != null && n < spec.min) bad(`must be at least ${spec.min}, got ${n}`);
      if (spec.max != null && n > spec.max) bad(`must be at most ${spec.max}, got ${n}`);
      return n;
    }
    case "duration": {
      const d = parseDuration(s);
      if (d == null) return bad(`expected a duration like 500ms, 10s, 30m or 1h, got "${s}"`);
      if (spec.min != null && d < spec.min) bad(`must be at least ${formatDuration(spec.min)}, got ${s}`);
      if (spec.max != null && d > spec.max) bad(`must be at most ${formatDuration(spec.max)}, got ${s}`);
      return d;
    }
    case "url": {
      let u: URL;
      try {
        u = new URL(s);
      } catch {
        return bad(`expected an absolute http(s) URL, got "${s}"`);
      }
      if (u.protocol !== "http:" && u.protocol !== "https:") bad(`expected an http(s) URL, got "${s}"`);
      // A URL of these settings is printed and logged (the setup link, "listening"): no credentials in it.
      if (u.username || u.password) bad(`the URL must not hold a user name or password, got "${u.protocol}//…@${u.host}"`);
      // As the URL parser writes it (the scheme and host lower-cased): `HTTPS://…` is https everywhere.
      return u.href.replace(/\/+$/, "");
    }
    case "listen": {
      const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s]*):(\d{1,5})$/.exec(s.trim());
      const port = m ? Number(m[2]) : NaN;
      if (!m || port > 65535) return bad(`expected host:port such as 127.0.0.1:7420 or 0.0.0.0:7420, got "${s}"`);
      return s.trim();
    }
    case "enum":
      if (!spec.values!.includes(s)) bad(`expected one of ${spec.values!.join(", ")}, got "${s}"`);
      return s;
    default:
      if (s.trim() === "") bad("must not be empty");
      return s;
  }
}

export interface ParsedArgs {
  /** Config flags given on the command line, already converted. */
  flags: Map<string, unknown>;
  /** Flags that belong to the command itself (declared by the caller). */
  extra: Map<string, string | boolean>;
  positionals: string[];
}

/** Config flags a command takes when not all of them: `command` names it in the refusal of the others. */
export interface ConfigFlagSubset {
  command: string;
  only: readonly string[];
}

/**
 * Parses `--flag value`, `--flag=value`, `--bool`, `--no-bool`. Config flags come from OPTIONS
 * (all of them, none, or a subset); `commandFlags` declares the command's own flags (true = takes
 * a value). Anything else is an error naming the flag.
 */
export function parseArgs(argv: string[], commandFlags: Record<string, boolean> = {}, allowConfigFlags: boolean | ConfigFlagSubset = true): ParsedArgs {
  const flags = new Map<string, unknown>();
  const extra = new Map<string, string | boolean>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--") || arg === "--") {
      positionals.push(arg);
      continue;
    }
    let [name, value] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const negated = name.startsWith("no-") && (specByFlag.get(name.slice(3))?.kind === "bool" || commandFlags[name.slice(3)] === false);
    if (negated) name = name.slice(3);
    if (Object.hasOwn(commandFlags, name)) {
      if (commandFlags[name]) {
        if (value === undefined) value = argv[++i];
        if (value === undefined) throw new ConfigError(`--${name} needs a value`);
        extra.set(name, value);
      } else extra.set(name, !negated);
      continue;
    }
    const spec = allowConfigFlags ? specByFlag.get(name) : undefined;
    if (!spec) throw new ConfigError(`unknown flag --${name} (see --help)`);
    // Refused before its value is read: a serve setting is not this command's to validate.
    if (typeof allowConfigFlags === "object" && !allowConfigFlags.only.includes(name)) {
      throw new ConfigError(`--${name} is a serve flag; \`runcell ${allowConfigFlags.command}\` takes ${listFlags(allowConfigFlags.only)} of the configuration (see --help)`);
    }
    if (spec.kind === "bool") {
      flags.set(name, negated ? false : value === undefined ? true : convert(spec, value, `--${name}`));
      continue;
    }
    if (value === undefined) value = argv[++i];
    if (value === undefined || value.startsWith("--")) throw new ConfigError(`--${name} needs a value`);
    // A repeatable flag (--docker-host) adds to what earlier occurrences gave.
    const prior = spec.kind === "hosts" ? ((flags.get(name) as string[] | undefined) ?? []) : [];
    flags.set(name, spec.kind === "hosts" ? convert(spec, [...prior, value], `--${name}`) : convert(spec, value, `--${name}`));
  }
  return { flags, extra, positionals };
}

function readConfigFile(dataDir: string): Record<string, unknown> {
  const toml = join(dataDir, "runcell.toml");
  const json = join(dataDir, "runcell.json");
  const hasToml = existsSync(toml);
  const hasJson = existsSync(json);
  if (hasToml && hasJson) throw new ConfigError(`both ${toml} and ${json} exist; keep one`);
  if (!hasToml && !hasJson) return {};
  const path = hasToml ? toml : json;
  let parsed: unknown;
  try {
    const text = readFileSync(path, "utf8");
    parsed = hasToml ? Bun.TOML.parse(text) : JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${path}: cannot parse: ${(e as Error).message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new ConfigError(`${path}: expected an object of settings`);
  return Object.assign(Object.create(null), parsed, { __path: path });
}

/**
 * A setting as the data dir's runcell.toml|json holds it, unconverted and unchecked (null: no file,
 * or the setting is not in it): for a command that must know what serve would read there without
 * resolving serve's configuration. Throws ConfigError for a file that cannot be read or parsed.
 */
export function fileSetting(dataDir: string, flag: string): { path: string; key: string; value: unknown } | null {
  const file = readConfigFile(resolve(dataDir));
  const key = fileKey(flag);
  return file[key] === undefined ? null : { path: file.__path as string, key, value: file[key] };
}

/**
 * Resolves the final configuration from parsed flags, the environment and the data-dir file.
 * `only`: the settings a command other than serve uses (`runcell admin` needs where the database
 * is, not the listen address); the others are not read from the environment or the file — a value
 * there that only serve uses, broken or not, is serve's to refuse — and stay at their defaults.
 * The file itself must still parse and name known settings.
 */
export function resolveConfig(flags: Map<string, unknown>, env: Record<string, string | undefined> = process.env, only?: readonly string[]): Config {
  const value = new Map<string, unknown>();
  const dataDirSpec = specByFlag.get("data-dir")!;
  const dataDir = resolve(
    String(flags.get("data-dir") ?? (env[envName("data-dir")] ? convert(dataDirSpec, env[envName("data-dir")], envName("data-dir")) : dataDirSpec.default)),
  );
  const file = readConfigFile(dataDir);
  const filePath = file.__path as string | undefined;
  for (const key of Object.keys(file)) {
    if (key === "__path") continue;
    const spec = specByFlag.get(key.replace(/_/g, "-"));
    if (!spec || spec.noFile || key !== fileKey(spec.flag)) throw new ConfigError(`${filePath}: unknown setting "${key}"`);
  }
  const sources: Record<string, string> = {};
  for (const spec of OPTIONS) {
    if (only && !only.includes(spec.flag)) {
      if (spec.default !== undefined) value.set(spec.flag, spec.default);
      continue;
    }
    if (flags.has(spec.flag)) value.set(spec.flag, flags.get(spec.flag));
    else if (env[envName(spec.flag)] !== undefined && env[envName(spec.flag)] !== "") value.set(spec.flag, convert(spec, env[envName(spec.flag)], envName(spec.flag)));
    else if (!spec.noFile && file[fileKey(spec.flag)] !== undefined) value.set(spec.flag, convert(spec, file[fileKey(spec.flag)], `${filePath}: ${fileKey(spec.flag)}`));
    else if (spec.default !== undefined) value.set(spec.flag, spec.default);
    if (flags.has(spec.flag)) sources[spec.flag] = `--${spec.flag}`;
    else if (env[envName(spec.flag)]) sources[spec.flag] = envName(spec.flag);
    else if (!spec.noFile && file[fileKey(spec.flag)] !== undefined) sources[spec.flag] = `${filePath}: ${fileKey(spec.flag)}`;
  }
  const get = <T>(flag: string) => value.get(flag) as T;
  const listen = get<string>("http");
  const sep = listen.lastIndexOf(":");
  const host = listen.slice(0, sep).replace(/^\[|\]$/g, "") || "0.0.0.0";
  const port = Number(listen.slice(sep + 1));
  const browserHost = host === "0.0.0.0" || host === "::" ? "localhost" : host.includes(":") ? `[${host}]` : host;
  const publicUrl = get<string | undefined>("public-url") ?? `http://${browserHost}:${port}`;

  const dockerHosts = parseDockerHosts(get<string[]>("docker-host"));

  const oauth = (p: "github" | "google", apiKey: string): OAuthProviderConfig | null => {
    const clientId = get<string | undefined>(`${p}-client-id`);
    const clientSecret = get<string | undefined>(`${p}-client-secret`);
    if (!clientId && !clientSecret) return null;
    if (!clientId || !clientSecret) throw new ConfigError(`${p} sign-in needs both --${p}-client-id and --${p}-client-secret`);
    return { clientId, clientSecret, authorizeUrl: get(`${p}-authorize-url`), tokenUrl: get(`${p}-token-url`), apiUrl: get(`${p}-${apiKey}`) };
  };

  return {
    host,
    port,
    dataDir,
    publicUrl,
    dockerHost: dockerHosts[0]!.url,
    dockerHosts,
    adminPasswordFile: get<string | undefined>("admin-password-file") ?? null,
    vaultKeyFile: get<string | undefined>("vault-key-file") ?? null,
    databaseUrl: databaseUrl(get<string | undefined>("database"), sources.database),
    adminPassword: env.RUNCELL_ADMIN_PASSWORD || null,
    signup: get("signup"),
    allowPrivateWebhooks: get("allow-private-webhooks"),
    trustProxy: get("trust-proxy"),
    logLevel: get("log-level"),
    rateLimit: { perMinute: get("rate-limit-per-minute"), burst: get("rate-limit-burst") },
    defaultMaxConcurrency: get("default-max-concurrency"),
    workspaceImage: get("workspace-image"),
    workspaceIdleTimeoutMs: get("workspace-idle-timeout"),
    maxWarmPool: get("max-warm-pool"),
    maxWarmPoolTotal: get("max-warm-pool-total"),
    workspaceStartParallelism: get("workspace-start-parallelism"),
    dockerTimeoutMs: get("docker-timeout"),
    downloadSpoolMb: get("download-spool-mb"),
    github: oauth("github", "api-url"),
    google: oauth("google", "userinfo-url"),
    webhook: { attempts: get("webhook-attempts"), backoffMs: get("webhook-backoff"), timeoutMs: get("webhook-timeout") },
    shutdownTimeoutMs: get("shutdown-timeout"),
    replicaLeaseMs: get("replica-lease"),
    allowModelHosts: get<string[]>("allow-model-hosts").map((h) => h.toLowerCase()),
    maxSocketsPerCaller: get("max-sockets-per-caller"),
    auditRetentionMs: get("audit-retention"),
    policy: {
      maxProfiles: get("max-profiles-per-user"),
      maxRunningWorkspaces: get("max-running-workspaces-per-user"),
      maxMemoryMb: get("max-memory-mb"),
      maxCpus: get("max-cpus"),
      maxPids: get("max-pids"),
      maxConcurrency: get("max-profile-concurrency"),
      maxTurns: get("max-turns"),
      maxBudgetUsd: get("max-task-budget-usd"),
      allowedImages: get("allowed-images"),
      allowBridgeNetwork: get("allow-bridge-network"),
      monthlySpendUsd: get("monthly-spend-usd"),
      workspaceDiskMb: get("workspace-disk-mb"),
      // The API and the overrides count it in whole seconds, like a playbook's answer_timeout.
      minScheduleIntervalSec: Math.ceil(get<number>("min-schedule-interval") / 1000),
    },
    sources,
  };
}

/** --database: a postgres:// URL (its password never shows in the error). */
function databaseUrl(raw: string | undefined, origin: string | undefined): string | null {
  if (raw === undefined || raw === "") return null;
  let url: URL | null = null;
  try {
    url = new URL(raw);
  } catch {
    // reported below
  }
  if (!url || !/^postgres(ql)?:$/.test(url.protocol) || !url.hostname) {
    const shown = url ? `${url.protocol}//${url.host}${url.pathname}` : "(not a URL)";
    throw new ConfigError(`${origin ?? "--database"}: expected postgres://user:password@host:5432/database, got ${shown}`);
  }
  // The driver reads the URL's options (sslmode=…, connect_timeout=…) when the client is made, not
  // when it connects: made here (it connects only at the first query), a value it refuses is this
  // usage error too rather than a crash of whichever command opens the database first.
  try {
    void new SQL(raw).close().catch(() => {});
  } catch (e) {
    let why = (e as Error).message;
    for (const secret of new Set([url.password, decodeURIComponent(url.password)])) if (secret) why = why.replaceAll(secret, "***");
    throw new ConfigError(`${origin ?? "--database"}: ${why}`);
  }
  return raw;
}

/** `--a, --b and --c`. */
const listFlags = (flags: readonly string[]) => flags.map((f) => `--${f}`).join(", ").replace(/, ([^,]*)$/, " and $1");

/** Lines for `--help`: every config flag (or those of `only`) with its env name and default. */
export function optionsHelp(only?: readonly string[]): string {
  return OPTIONS.filter((o) => !only || only.includes(o.flag)).map((o) => {
    const def =
      o.default === undefined || o.secret
        ? ""
        : o.kind === "list" && (o.default as string[]).length === 0
          ? ""
          : ` (default ${o.kind === "duration" ? formatDuration(o.default as number) : o.kind === "durations" || o.kind === "list" ? (o.default as (number | string)[]).map((d) => (typeof d === "number" ? formatDuration(d) : d)).join(",") : String(o.default)})`;
    const arg = o.kind === "bool" ? "" : o.kind === "enum" ? ` ${o.values!.join("|")}` : ` <${o.kind === "listen" ? "host:port" : o.kind === "hosts" ? "url" : o.kind}>`;
    return `  --${o.flag}${arg}\n      ${o.help}${def}  [${envName(o.flag)}]`;
  }).join("\n");
}
