/**
 * The profile form, for creating (POST: empty fields are left out, so the server's defaults apply)
 * and editing (PATCH: only the fields that changed; model and limits merge on the server, so only
 * their changed parts are sent — all of the model when the provider changes).
 */
import { useEffect, useState } from "preact/hooks";
import type { MODEL_PROVIDERS, NETWORKS } from "../../../../src/db/schema.ts";
import type { LIMIT_BOUNDS, LimitKey, ProfileCreate, ProfilePatch, ProfileRecord, TOOL_NAMES, WARM_POOL_MAX as SERVER_WARM_POOL_MAX } from "../../../../src/schema/profile.ts";
import { get, patch, post } from "../../lib/api.ts";
import type { Me } from "../../../../src/schema/me.ts";
import { Field, num, setter, useFieldErrors } from "./fields.tsx";
import { KvFields, type KvRow, kvOf, kvRows, McpFields, type McpRow, mcpOf, mcpRows, opt, patternsOf, RepoFields, type RepoRow, repoRows, reposOf, twice } from "./lists.tsx";

// Copies of the server's constants (importing the values would bundle the server's schema
// library); `satisfies typeof …` makes the type check fail when they drift apart.
const TOOLS = ["Bash", "Read", "Write", "Edit", "AskUserQuestion", "Notify"] as const satisfies typeof TOOL_NAMES;
const PROVIDERS = ["anthropic", "openai", "demo"] as const satisfies typeof MODEL_PROVIDERS;
const NETS = ["none", "bridge"] as const satisfies typeof NETWORKS;
/** src/schema/profile.ts WARM_POOL_MAX (the operator's --max-warm-pool caps it further; the server says so). */
const WARM_POOL_MAX: typeof SERVER_WARM_POOL_MAX = 100;
const BOUNDS = {
  max_turns: { min: 1, max: 1000, integer: true, description: "Model requests per task" },
  max_budget_usd: { min: 0, max: 10_000, integer: false, exclusiveMin: true, description: "Cost cap per task (USD)" },
  max_concurrency: { min: 1, max: 1000, integer: true, description: "Running workspaces of this profile at once" },
  memory_mb: { min: 64, max: 262_144, integer: true, description: "Container memory (swap included)" },
  cpus: { min: 0.1, max: 64, integer: false, description: "Container CPUs" },
  pids: { min: 32, max: 65_536, integer: true, description: "Container processes" },
} as const satisfies typeof LIMIT_BOUNDS;
const LIMIT_KEYS = Object.keys(BOUNDS) as LimitKey[];
/** The operator's ceiling of each limit (GET /v1/me `limits`), where the policy has one. */
const CEILING_OF: Record<LimitKey, keyof Me["limits"]> = {
  max_turns: "max_turns",
  max_budget_usd: "max_budget_usd",
  max_concurrency: "max_concurrency",
  memory_mb: "max_memory_mb",
  cpus: "max_cpus",
  pids: "max_pids",
};
/** The highest value the server takes for each limit: its bound, lowered by the user's ceilings (none for an exempt admin). */
const useLimitMax = () => {
  const [ceilings, setCeilings] = useState<Me["limits"] | null>(null);
  useEffect(() => void get<Me>("/v1/me").then((me) => setCeilings(me.limits), () => {}), []);
  return (k: LimitKey): number => {
    const c = ceilings && !ceilings.exempt ? (ceilings[CEILING_OF[k]] as number) : undefined;
    return typeof c === "number" ? Math.min(BOUNDS[k].max, c) : BOUNDS[k].max;
  };
};
/** docs/profiles.md "Defaults" (max_concurrency: the operator's). */
const DEFAULTS: Partial<Record<LimitKey, number>> = { max_turns: 50, max_budget_usd: 5, memory_mb: 2048, cpus: 1, pids: 1024 };

interface Draft {
  name: string;
  system_prompt: string;
  image: string;
  network: string;
  warm_pool: string;
  provider: string;
  model: string;
  base_url: string;
  api_key_secret: string;
  price_in: string;
  price_out: string;
  tools: string[];
  env: KvRow[];
  limits: Record<string, string>;
  mcp: McpRow[];
  allowed_tools: string;
  repos: RepoRow[];
  host_labels: string;
}

const str = (v: unknown) => (v === undefined || v === null ? "" : String(v));

const draftOf = (p?: ProfileRecord): Draft => ({
  name: p?.name ?? "",
  system_prompt: p?.system_prompt ?? "",
  image: p?.image ?? "",
  network: p?.network ?? "none",
  warm_pool: str(p?.warm_pool ?? ""),
  provider: p?.model.provider ?? "",
  model: p?.model.name ?? "",
  base_url: p?.model.base_url ?? "",
  api_key_secret: p?.model.api_key_secret ?? "",
  price_in: str(p?.model.pricing?.input_per_mtok),
  price_out: str(p?.model.pricing?.output_per_mtok),
  tools: p ? [...p.tools] : [...TOOLS],
  env: kvRows(p?.env),
  limits: Object.fromEntries(LIMIT_KEYS.map((k) => [k, str(p?.limits[k])])),
  mcp: mcpRows(p?.mcp_servers),
  allowed_tools: (p?.allowed_tools ?? []).join(", "),
  repos: repoRows(p?.repositories),
  host_labels: (p?.host_labels ?? []).join(", "),
});

const pricingOf = (d: Draft) => (d.price_in || d.price_out ? { input_per_mtok: Number(d.price_in), output_per_mtok: Number(d.price_out) } : undefined);
const envOf = (d: Draft) => kvOf(d.env);
/** The three lists as the API takes them: each replaces the profile's as a whole. */
const listsOf = (d: Draft) => ({ mcp_servers: mcpOf(d.mcp), allowed_tools: patternsOf(d.allowed_tools), repositories: reposOf(d.repos) });
const toolsOf = (d: Draft) => TOOLS.filter((t) => d.tools.includes(t));

/** A whole model (create, or a PATCH that changes the provider); undefined when nothing is set. */
function modelOf(d: Draft): ProfileCreate["model"] {
  const keyed = d.provider !== "demo"; // demo refuses a base_url and a key (their inputs are disabled)
  const m = { provider: opt(d.provider), name: opt(d.model), base_url: keyed ? opt(d.base_url) : undefined, api_key_secret: keyed ? opt(d.api_key_secret) : undefined, pricing: pricingOf(d) };
  // Without a provider the server answers 400 on model.provider, shown next to the select.
  return Object.values(m).some((v) => v !== undefined) ? (m as ProfileCreate["model"]) : undefined;
}

function createBody(d: Draft): ProfileCreate {
  const limits = Object.fromEntries(LIMIT_KEYS.filter((k) => d.limits[k]).map((k) => [k, Number(d.limits[k])]));
  return {
    name: opt(d.name),
    system_prompt: d.system_prompt.trim() ? d.system_prompt : undefined,
    model: modelOf(d),
    image: opt(d.image),
    tools: toolsOf(d),
    env: envOf(d),
    limits: Object.keys(limits).length ? limits : undefined,
    network: d.network as ProfileCreate["network"],
    warm_pool: d.warm_pool.trim() ? Number(d.warm_pool) : undefined,
    host_labels: patternsOf(d.host_labels).length ? patternsOf(d.host_labels) : undefined,
    ...listsOf(d),
  };
}

/** The fields of `d` that differ from the record (empty: nothing changed). */
function patchBody(d: Draft, p: ProfileRecord): ProfilePatch {
  const o = draftOf(p);
  const b: Record<string, unknown> = {};
  if (d.name.trim() !== o.name) b.name = d.name.trim();
  if (d.system_prompt !== o.system_prompt) b.system_prompt = d.system_prompt;
  if (d.image.trim() !== o.image) b.image = d.image.trim();
  if (d.network !== o.network) b.network = d.network;
  if (d.warm_pool.trim() !== o.warm_pool) b.warm_pool = Number(d.warm_pool || 0);
  if (patternsOf(d.host_labels).join() !== patternsOf(o.host_labels).join()) b.host_labels = patternsOf(d.host_labels);
  if (toolsOf(d).join() !== toolsOf(o).join()) b.tools = toolsOf(d);
  if (JSON.stringify(envOf(d)) !== JSON.stringify(envOf(o))) b.env = envOf(d);
  const lists = listsOf(d);
  const was = listsOf(o);
  for (const k of ["mcp_servers", "allowed_tools", "repositories"] as const) if (JSON.stringify(lists[k]) !== JSON.stringify(was[k])) b[k] = lists[k];
  const limits = Object.fromEntries(LIMIT_KEYS.filter((k) => num(d.limits[k]!) !== num(o.limits[k]!)).map((k) => [k, num(d.limits[k]!)]));
  if (Object.keys(limits).length) b.limits = limits;
  if (d.provider !== o.provider) b.model = modelOf(d);
  else {
    const m: Record<string, unknown> = {};
    // null removes base_url / api_key_secret / pricing, and resets the name to the provider's default.
    for (const k of ["model", "base_url", "api_key_secret"] as const) if (d[k].trim() !== o[k]) m[k === "model" ? "name" : k] = opt(d[k]) ?? null;
    if (d.price_in !== o.price_in || d.price_out !== o.price_out) m.pricing = pricingOf(d) ?? null;
    if (Object.keys(m).length) b.model = m;
  }
  return b as ProfilePatch;
}

export function ProfileForm(props: { profile?: ProfileRecord; secrets: string[]; onSaved: (p: ProfileRecord, created: boolean) => void; onCancel: () => void }) {
  const p = props.profile;
  const [d, setD] = useState<Draft>(() => draftOf(p));
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState("");
  const f = useFieldErrors("pf-");
  const on = setter(d, setD);
  const maxOf = useLimitMax();

  const submit = async (e: Event) => {
    e.preventDefault();
    f.clear();
    setStatus("");
    // A name given twice would silently collapse into one entry of the object sent.
    const lists: [string, KvRow[], boolean][] = [["env", d.env, false], ...d.mcp.map((s, i): [string, KvRow[], boolean] => [`mcp_servers[${i}].${s.transport === "http" ? "headers" : "env"}`, s.kv, s.transport === "http"])];
    for (const [field, rows, fold] of lists) {
      const dup = twice(rows, fold);
      if (dup !== undefined) return f.fail(`${field}: ${dup} is set twice`, `${field}.${dup}`);
    }
    const body = p ? patchBody(d, p) : createBody(d);
    if (p && !Object.keys(body).length) return setStatus("No changes to save.");
    setBusy(true);
    try {
      const saved = p ? await patch<ProfileRecord>(`/v1/profiles/${p.id}`, body) : await post<ProfileRecord>("/v1/profiles", body);
      props.onSaved(saved, !p);
    } catch (err) {
      f.fail(err);
    } finally {
      setBusy(false);
    }
  };

  const needPrice = !!(d.price_in || d.price_out);
  const demo = d.provider === "demo";

  return (
    <form class="card edit-form" onSubmit={submit} aria-labelledby="pf-title">
      <h2 id="pf-title">{p ? `Edit ${p.name}` : "New profile"}</h2>
      {!p && <p class="meta">Every field is optional: what you leave empty gets the server's default.</p>}
      <div class="grid">
        <Field f={f} name="name" label="Name">
          {(a) => <input {...a} value={d.name} onInput={on("name")} required={!!p} maxLength={100} placeholder="Default" />}
        </Field>
        <Field f={f} name="image" label="Container image">
          {(a) => <input {...a} value={d.image} onInput={on("image")} required={!!p} maxLength={512} placeholder="the server's workspace image" spellcheck={false} autoCapitalize="off" />}
        </Field>
        <Field f={f} name="network" label="Network">
          {(a) => (
            <select {...a} value={d.network} onChange={on("network")}>
              {NETS.map((n) => (
                <option key={n} value={n}>
                  {n === "none" ? "none (no network)" : "bridge (internet access)"}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field f={f} name="warm_pool" label="Warm pool (ready containers)">
          {(a) => <input {...a} type="number" min={0} max={WARM_POOL_MAX} step={1} value={d.warm_pool} onInput={on("warm_pool")} placeholder="0" />}
        </Field>
        <Field f={f} name="host_labels" label="Docker host labels">
          {(a) => <input {...a} value={d.host_labels} onInput={on("host_labels")} placeholder="any host" autoCapitalize="off" spellcheck={false} title="key or key=value, separated by commas: only hosts with all of them run this profile" />}
        </Field>
      </div>
      <Field f={f} name="system_prompt" label="System prompt">
        {(a) => <textarea {...a} rows={4} value={d.system_prompt} onInput={on("system_prompt")} required={!!p} maxLength={100_000} placeholder={p ? undefined : "empty: a general agent prompt"} />}
      </Field>

      <fieldset {...f.props("model")}>
        <legend>Model</legend>
        <div class="grid">
          <Field f={f} name="model.provider" label="Provider">
            {(a) => (
              <select {...a} value={d.provider} onChange={(e) => setD({ ...d, provider: e.currentTarget.value, model: "" })}>
                {!p && <option value="">server default</option>}
                {PROVIDERS.map((v) => (
                  <option key={v} value={v}>
                    {v === "demo" ? "demo (offline)" : v === "openai" ? "openai / compatible" : v}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field f={f} name="model.name" label="Model name">
            {(a) => <input {...a} value={d.model} onInput={on("model")} maxLength={200} placeholder="default for the provider" spellcheck={false} autoCapitalize="off" />}
          </Field>
          <Field f={f} name="model.base_url" label="Base URL">
            {(a) => <input {...a} type="url" value={d.base_url} onInput={on("base_url")} disabled={demo} maxLength={2048} placeholder="optional: Ollama, vLLM, OpenRouter…" />}
          </Field>
          <Field f={f} name="model.api_key_secret" label="API key secret">
            {(a) => <input {...a} value={d.api_key_secret} onInput={on("api_key_secret")} disabled={demo} list="pf-secrets" maxLength={64} placeholder="optional: a vault secret name" autoCapitalize="off" spellcheck={false} />}
          </Field>
        </div>
        <fieldset {...f.props("model.pricing")}>
          <legend>Pricing override (USD per million tokens, optional)</legend>
          <div class="grid">
            <Field f={f} name="model.pricing.input_per_mtok" label="Input">
              {(a) => <input {...a} type="number" min={0} max={10_000} step="any" value={d.price_in} onInput={on("price_in")} required={needPrice} />}
            </Field>
            <Field f={f} name="model.pricing.output_per_mtok" label="Output">
              {(a) => <input {...a} type="number" min={0} max={10_000} step="any" value={d.price_out} onInput={on("price_out")} required={needPrice} />}
            </Field>
          </div>
        </fieldset>
        {f.msg("model.pricing")}
      </fieldset>
      {f.msg("model")}

      <fieldset {...f.props("tools")}>
        <legend>Tools the agent may use</legend>
        <div class="checks">
          {TOOLS.map((t) => (
            <label key={t} class="check">
              <input
                type="checkbox"
                checked={d.tools.includes(t)}
                onChange={(e) => setD({ ...d, tools: e.currentTarget.checked ? [...d.tools, t] : d.tools.filter((x) => x !== t) })}
              />
              {t}
            </label>
          ))}
        </div>
      </fieldset>
      {f.msg("tools")}

      <KvFields
        f={f}
        field="env"
        legend="Environment variables"
        hint="A literal value, or a secret from your vault (passed to the workspace, never shown)."
        noun="variable"
        rows={d.env}
        max={100}
        env
        onChange={(env) => setD({ ...d, env })}
      />

      <fieldset {...f.props("limits")}>
        <legend>Limits</legend>
        <div class="grid">
          {LIMIT_KEYS.map((k) => {
            const b: (typeof BOUNDS)[LimitKey] = BOUNDS[k];
            const min = "exclusiveMin" in b ? 0.01 : b.min;
            const max = maxOf(k);
            return (
              <Field key={k} f={f} name={`limits.${k}`} label={`${b.description} (${"exclusiveMin" in b ? ">" : ""}${b.min}–${max.toLocaleString("en-US")})`}>
                {(a) => (
                  <input
                    {...a}
                    type="number"
                    inputMode={b.integer ? "numeric" : "decimal"}
                    min={min}
                    max={max}
                    step={b.integer ? 1 : "any"}
                    value={d.limits[k]}
                    required={!!p}
                    placeholder={DEFAULTS[k] === undefined ? "default" : `default ${DEFAULTS[k]}`}
                    onInput={(e) => setD({ ...d, limits: { ...d.limits, [k]: e.currentTarget.value } })}
                  />
                )}
              </Field>
            );
          })}
        </div>
      </fieldset>
      {f.msg("limits")}

      <McpFields f={f} rows={d.mcp} allowed={d.allowed_tools} onChange={(mcp) => setD({ ...d, mcp })} onAllowed={(allowed_tools) => setD({ ...d, allowed_tools })} />
      <RepoFields f={f} rows={d.repos} onChange={(repos) => setD({ ...d, repos })} />

      <datalist id="pf-secrets">
        {props.secrets.map((s) => (
          <option key={s} value={s} />
        ))}
      </datalist>
      {f.general}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {p ? "Save changes" : "Create profile"}
        </button>
        {p && (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        )}
        <span role="status">{status}</span>
      </div>
    </form>
  );
}
