/**
 * Structured JSON-lines logging with levels. Every line passes through `redact`, which removes
 * credentials by key name (password, secret, token, authorization, cookie, api key…) and by
 * shape (rc_ tokens, bearer values, `?token=` and other credential query parameters in URLs), so
 * a secret cannot reach the log even when a caller logs a whole object or a URL.
 */
import { DrizzleQueryError } from "drizzle-orm";

export type Level = "debug" | "info" | "warn" | "error";
const RANK: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
  enabled(level: Level): boolean;
}

const SECRET_KEY = /pass(word)?|secret|token|authorization|cookie|api[_-]?key|credential|signature|^sig$|private[_-]?key/i;
/**
 * Keys that match SECRET_KEY by name but hold no secret. (No `session_id` is a credential here: an
 * agent session's id is `sess_…`, a login session's `login_…`; the cookie's value is its
 * `session_token`, caught by `token`.)
 */
const SAFE_KEYS = new Set([
  "token_id", "input_tokens", "output_tokens", "max_tokens", "max_output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "tokens",
  "has_secret", "api_key_secret", "secret_name",
]);
const REDACTED = "[redacted]";

const TOKEN_SHAPE = /\brc_[0-9a-fA-F]{8,}/g;
const BEARER_SHAPE = /\b(Bearer)[ .]+[^\s",;]+/gi;
const QUERY_SECRET = /([?&](?:token|access_token|api_key|key|sig|secret|code|state|password)=)[^&#\s"]*/gi;
const SETUP_FRAGMENT = /(\/setup#)[A-Za-z0-9_-]+/g;
/** The secret of a playbook trigger URL: /hooks/playbooks/<pb_id>/<secret>. */
const TRIGGER_SECRET = /(\/hooks\/playbooks\/[^/\s"?#]+\/)[^/\s"?#]+/g;

export function redactString(s: string): string {
  if (s.length > 0 && !/rc_|earer|[?&]|\/setup#|\/hooks\//.test(s)) return s;
  return s
    .replace(TOKEN_SHAPE, "rc_" + REDACTED)
    .replace(BEARER_SHAPE, "$1 " + REDACTED)
    .replace(QUERY_SECRET, "$1" + REDACTED)
    .replace(SETUP_FRAGMENT, "$1" + REDACTED)
    .replace(TRIGGER_SECRET, "$1" + REDACTED);
}

export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactString(value);
  if (value === null || typeof value !== "object") return value;
  if (depth > 6) return "[depth]";
  if (value instanceof DrizzleQueryError) {
    // The statement without its parameters (row values: frames, hashes, sealed secrets), and the driver's error.
    const withoutParams = (s: string) => s.replace(/\nparams: [\s\S]*?(?=\n\s+at |$)/, "");
    return {
      name: value.name,
      message: redactString(`Failed query: ${value.query}`),
      cause: value.cause ? redact(value.cause, depth + 1) : undefined,
      stack: value.stack ? redactString(withoutParams(value.stack)) : undefined,
    };
  }
  if (value instanceof Error) {
    return { name: value.name, message: redactString(value.message), stack: value.stack ? redactString(value.stack) : undefined };
  }
  if (Array.isArray(value)) return value.slice(0, 50).map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEY.test(k) && !SAFE_KEYS.has(k) && v != null && v !== "" ? REDACTED : redact(v, depth + 1);
  }
  return out;
}

export interface LoggerOptions {
  level?: Level;
  /** Where finished lines go; defaults to stdout. Tests pass an array sink. */
  sink?: (line: string) => void;
}

export function createLogger(opts: LoggerOptions = {}, base: Fields = {}): Logger {
  const min = RANK[opts.level ?? "info"];
  const sink = opts.sink ?? ((line: string) => process.stdout.write(line + "\n"));
  const write = (level: Level, msg: string, fields?: Fields) => {
    if (RANK[level] < min) return;
    const record = { time: new Date().toISOString(), level, msg: redactString(msg), ...(redact({ ...base, ...fields }) as Fields) };
    sink(JSON.stringify(record));
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: (fields) => createLogger(opts, { ...base, ...fields }),
    enabled: (level) => RANK[level] >= min,
  };
}

/** A logger that drops everything (CLI commands that print for humans). */
export const silentLogger: Logger = createLogger({ level: "error", sink: () => {} });
