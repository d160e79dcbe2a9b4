/**
 * The profile form's lists: name/value rows (the profile's env, an MCP server's env or headers —
 * each a literal or a vault secret), MCP servers with the allowed-tools patterns, and git
 * repositories: their draft rows, the API values made from them, and their fieldsets. Inputs get
 * ids after the API's field paths ("pf-mcp_servers[0].url"), so a server error naming one of them
 * is shown next to it (fields.tsx); one naming a whole entry, next to that entry's fieldset.
 */
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import { Field, type FieldErrors, num } from "./fields.tsx";

type Kv = Record<string, string | { secret: string }>;
type Mcp = ProfileRecord["mcp_servers"][number];
type Repo = ProfileRecord["repositories"][number];

export interface KvRow {
  key: number;
  name: string;
  secret: boolean;
  value: string;
}
export interface McpRow {
  key: number;
  name: string;
  transport: Mcp["transport"];
  command: string;
  /** One argument per line. */
  args: string;
  url: string;
  /** The env (stdio) or the headers (http). */
  kv: KvRow[];
  timeout: string;
}
export interface RepoRow {
  key: number;
  url: string;
  ref: string;
  path: string;
  secret: string;
  depth: string;
}

let rowKey = 0;
const str = (v: unknown) => (v === undefined || v === null ? "" : String(v));
export const opt = (s: string) => s.trim() || undefined;

export const kvRows = (o: Kv | undefined): KvRow[] =>
  Object.entries(o ?? {}).map(([name, v]) => ({ key: rowKey++, name, secret: typeof v !== "string", value: typeof v === "string" ? v : v.secret }));
export const kvOf = (rows: KvRow[]): Kv => Object.fromEntries(rows.map((r) => [r.name.trim(), r.secret ? { secret: r.value.trim() } : r.value]));
/** The first name given twice (header names compare case-insensitively). */
export function twice(rows: KvRow[], fold = false): string | undefined {
  const names = rows.map((r) => (fold ? r.name.trim().toLowerCase() : r.name.trim()));
  const i = names.findIndex((n, j) => names.indexOf(n) !== j);
  return i < 0 ? undefined : rows[i]!.name.trim();
}

export const mcpRows = (list: Mcp[] = []): McpRow[] =>
  list.map((s) => ({
    key: rowKey++,
    name: s.name,
    transport: s.transport,
    command: s.transport === "stdio" ? s.command : "",
    args: s.transport === "stdio" ? (s.args ?? []).join("\n") : "",
    url: s.transport === "http" ? s.url : "",
    kv: kvRows(s.transport === "stdio" ? s.env : s.headers),
    timeout: str(s.timeout_ms),
  }));
/** The servers as the API takes them (what a row holds for the other transport is left out). */
export const mcpOf = (rows: McpRow[]): Mcp[] =>
  rows.map((s) => {
    const kv = s.kv.length ? kvOf(s.kv) : undefined;
    const common = { name: s.name.trim(), timeout_ms: num(s.timeout) };
    if (s.transport === "http") return { ...common, transport: "http", url: s.url.trim(), headers: kv };
    const args = s.args.split("\n").filter((a) => a.trim());
    return { ...common, transport: "stdio", command: s.command.trim(), args: args.length ? args : undefined, env: kv };
  });

/** allowed_tools: patterns separated by commas, spaces or new lines (a pattern holds none of them). */
export const patternsOf = (s: string) => s.split(/[\s,]+/).filter(Boolean);

export const repoRows = (list: Repo[] = []): RepoRow[] =>
  list.map((r) => ({ key: rowKey++, url: r.url, ref: str(r.ref), path: str(r.path), secret: str(r.credential_secret), depth: str(r.depth) }));
export const reposOf = (rows: RepoRow[]): Repo[] =>
  rows.map((r) => ({ url: r.url.trim(), ref: opt(r.ref), path: opt(r.path), credential_secret: opt(r.secret), depth: num(r.depth) }));

/** Row i of a list replaced by `row` merged in. */
const edit = <R,>(rows: R[], i: number, row: Partial<R>) => rows.map((r, j) => (j === i ? { ...r, ...row } : r));
const without = <R,>(rows: R[], i: number) => rows.filter((_, j) => j !== i);

const off = { autoCapitalize: "off", spellcheck: false } as const;

/**
 * Name/value rows under `field` ("env", "mcp_servers[0].headers"): a literal or the name of a vault
 * secret. Inputs are labelled "Name of <noun> 3" (plus " of <scope>" inside an MCP server).
 */
export function KvFields(p: {
  f: FieldErrors;
  field: string;
  legend: string;
  hint: string;
  noun: string;
  scope?: string;
  rows: KvRow[];
  max: number;
  env?: boolean;
  onChange: (rows: KvRow[]) => void;
}) {
  const { f, rows } = p;
  const of = p.scope ? ` of ${p.scope}` : "";
  const set = (i: number, r: Partial<KvRow>) => p.onChange(edit(rows, i, r));
  return (
    <>
      <fieldset {...f.props(p.field)}>
        <legend>{p.legend}</legend>
        <p class="meta">{p.hint}</p>
        {rows.map((r, i) => {
          const n = `${p.noun} ${i + 1}${of}`;
          return (
            <div key={r.key} class="env-row">
              <Field f={f} name={`${p.field}.${r.name.trim() || i}`} label={<span class="sr-only">Name of {n}</span>}>
                {(a) => (
                  <input
                    {...a}
                    {...off}
                    value={r.name}
                    required
                    maxLength={128}
                    pattern={p.env ? "[A-Za-z_][A-Za-z0-9_]*" : undefined}
                    placeholder={p.env ? "NAME" : "Header-Name"}
                    onInput={(e) => set(i, { name: e.currentTarget.value })}
                  />
                )}
              </Field>
              <label>
                <span class="sr-only">Kind of {n}</span>
                <select value={r.secret ? "secret" : "value"} onChange={(e) => set(i, { secret: e.currentTarget.value === "secret" })}>
                  <option value="value">value</option>
                  <option value="secret">secret</option>
                </select>
              </label>
              <label>
                <span class="sr-only">{r.secret ? `Secret name of ${n}` : `Value of ${n}`}</span>
                <input
                  {...off}
                  value={r.value}
                  required={r.secret}
                  list={r.secret ? "pf-secrets" : undefined}
                  placeholder={r.secret ? "vault secret name" : "value"}
                  onInput={(e) => set(i, { value: e.currentTarget.value })}
                />
              </label>
              <button type="button" class="danger" aria-label={`Remove ${r.name || n}${r.name ? of : ""}`} onClick={() => p.onChange(without(rows, i))}>
                Remove
              </button>
            </div>
          );
        })}
        <button
          type="button"
          disabled={rows.length >= p.max}
          aria-label={p.scope ? `Add ${p.noun} to ${p.scope}` : undefined}
          onClick={() => p.onChange([...rows, { key: rowKey++, name: "", secret: false, value: "" }])}
        >
          Add {p.noun}
        </button>
      </fieldset>
      {f.msg(p.field)}
    </>
  );
}

/** The MCP servers (at most 20) and the patterns of the tools the agent is offered. */
export function McpFields({ f, rows, allowed, onChange, onAllowed }: { f: FieldErrors; rows: McpRow[]; allowed: string; onChange: (r: McpRow[]) => void; onAllowed: (s: string) => void }) {
  return (
    <>
      <fieldset {...f.props("mcp_servers")}>
        <legend>MCP servers</legend>
        <p class="meta">
          Their tools reach the agent as <code>mcp__&lt;name&gt;__&lt;tool&gt;</code>. stdio: a command run inside the workspace; http: a streamable-HTTP endpoint the server calls.
        </p>
        {rows.map((s, i) => {
          const field = `mcp_servers[${i}]`;
          const scope = `MCP server ${i + 1}`;
          const http = s.transport === "http";
          const set = (r: Partial<McpRow>) => onChange(edit(rows, i, r));
          return (
            <div key={s.key}>
              <fieldset {...f.props(field)}>
                <legend>{scope}</legend>
                <div class="grid">
                  <Field f={f} name={`${field}.name`} label="Name">
                    {(a) => <input {...a} {...off} value={s.name} required maxLength={32} pattern="[A-Za-z0-9][\w\-]*" placeholder="github" onInput={(e) => set({ name: e.currentTarget.value })} />}
                  </Field>
                  <Field f={f} name={`${field}.transport`} label="Transport">
                    {(a) => (
                      <select {...a} value={s.transport} onChange={(e) => set({ transport: e.currentTarget.value as McpRow["transport"] })}>
                        <option value="stdio">stdio (a command)</option>
                        <option value="http">http (a URL)</option>
                      </select>
                    )}
                  </Field>
                  <Field f={f} name={`${field}.timeout_ms`} label="Timeout per call (ms)">
                    {(a) => <input {...a} type="number" min={1000} max={600_000} step={1} value={s.timeout} placeholder="default 120000" onInput={(e) => set({ timeout: e.currentTarget.value })} />}
                  </Field>
                </div>
                {http ? (
                  <Field f={f} name={`${field}.url`} label="URL">
                    {(a) => <input {...a} type="url" value={s.url} required maxLength={2048} placeholder="https://mcp.example.com/mcp" onInput={(e) => set({ url: e.currentTarget.value })} />}
                  </Field>
                ) : (
                  <div class="grid">
                    <Field f={f} name={`${field}.command`} label="Command">
                      {(a) => <input {...a} {...off} value={s.command} required maxLength={4096} placeholder="npx" onInput={(e) => set({ command: e.currentTarget.value })} />}
                    </Field>
                    <Field f={f} name={`${field}.args`} label="Arguments (one per line)">
                      {(a) => <textarea {...a} {...off} rows={2} value={s.args} placeholder={"-y\n@modelcontextprotocol/server-everything"} onInput={(e) => set({ args: e.currentTarget.value })} />}
                    </Field>
                  </div>
                )}
                <KvFields
                  f={f}
                  field={`${field}.${http ? "headers" : "env"}`}
                  legend={http ? "Headers" : "Environment of the server"}
                  hint={http ? "Sent with every request; a secret (e.g. Authorization) is resolved when connecting and never shown." : "Extra variables of the server process: a literal value or a vault secret."}
                  noun={http ? "header" : "variable"}
                  scope={scope}
                  rows={s.kv}
                  max={http ? 50 : 100}
                  env={!http}
                  onChange={(kv) => set({ kv })}
                />
                <button type="button" class="danger" aria-label={`Remove ${scope}${s.name.trim() ? ` (${s.name.trim()})` : ""}`} onClick={() => onChange(without(rows, i))}>
                  Remove MCP server
                </button>
              </fieldset>
              {f.msg(field)}
            </div>
          );
        })}
        <button
          type="button"
          disabled={rows.length >= 20}
          onClick={() => onChange([...rows, { key: rowKey++, name: "", transport: "stdio", command: "", args: "", url: "", kv: [], timeout: "" }])}
        >
          Add MCP server
        </button>
        <Field f={f} name="allowed_tools" label="Allowed MCP tools" describedBy="pf-allowed-hint">
          {(a) => <input {...a} {...off} value={allowed} placeholder="every tool of the servers above" onInput={(e) => onAllowed(e.currentTarget.value)} />}
        </Field>
        <p id="pf-allowed-hint" class="meta">
          Patterns separated by commas or spaces, e.g. <code>mcp__github__*, !mcp__github__delete_*</code>: <code>*</code> matches anything, a leading <code>!</code> excludes.
        </p>
      </fieldset>
      {f.msg("mcp_servers")}
    </>
  );
}

/** Git repositories (at most 20) cloned into /workspace before the first turn. */
export function RepoFields({ f, rows, onChange }: { f: FieldErrors; rows: RepoRow[]; onChange: (r: RepoRow[]) => void }) {
  return (
    <>
      <fieldset {...f.props("repositories")}>
        <legend>Repositories</legend>
        <p class="meta">Cloned into /workspace before the first turn. The credential is a vault secret with a token (or user:token; an ssh key for ssh URLs), used by the server only.</p>
        {rows.map((r, i) => {
          const field = `repositories[${i}]`;
          const set = (v: Partial<RepoRow>) => onChange(edit(rows, i, v));
          return (
            <div key={r.key}>
              <fieldset {...f.props(field)}>
                <legend>Repository {i + 1}</legend>
                <div class="grid">
                  <Field f={f} name={`${field}.url`} label="URL">
                    {(a) => <input {...a} {...off} value={r.url} required maxLength={2048} placeholder="https://github.com/org/repo.git" onInput={(e) => set({ url: e.currentTarget.value })} />}
                  </Field>
                  <Field f={f} name={`${field}.ref`} label="Branch, tag or commit">
                    {(a) => <input {...a} {...off} value={r.ref} maxLength={255} placeholder="the default branch" onInput={(e) => set({ ref: e.currentTarget.value })} />}
                  </Field>
                  <Field f={f} name={`${field}.path`} label="Directory under /workspace">
                    {(a) => <input {...a} {...off} value={r.path} maxLength={255} placeholder="the repository's name" onInput={(e) => set({ path: e.currentTarget.value })} />}
                  </Field>
                  <Field f={f} name={`${field}.credential_secret`} label="Credential secret">
                    {(a) => <input {...a} {...off} value={r.secret} list="pf-secrets" maxLength={64} placeholder="optional: a vault secret name" onInput={(e) => set({ secret: e.currentTarget.value })} />}
                  </Field>
                  <Field f={f} name={`${field}.depth`} label="History depth (0: full)">
                    {(a) => <input {...a} type="number" min={0} max={1_000_000} step={1} value={r.depth} placeholder="default 1" onInput={(e) => set({ depth: e.currentTarget.value })} />}
                  </Field>
                </div>
                <button type="button" class="danger" aria-label={`Remove repository ${i + 1}`} onClick={() => onChange(without(rows, i))}>
                  Remove repository
                </button>
              </fieldset>
              {f.msg(field)}
            </div>
          );
        })}
        <button type="button" disabled={rows.length >= 20} onClick={() => onChange([...rows, { key: rowKey++, url: "", ref: "", path: "", secret: "", depth: "" }])}>
          Add repository
        </button>
      </fieldset>
      {f.msg("repositories")}
    </>
  );
}
