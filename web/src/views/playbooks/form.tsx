/**
 * The playbook form (create: POST; edit: PATCH with the changed fields only) and the schedule's
 * live preview: the next five slots, computed in the browser by croner — the very library and
 * version the server schedules with, so a pattern the preview accepts is one the server accepts.
 */
import { Cron } from "croner";
import { useMemo, useState } from "preact/hooks";
import type { MAX_CONTINUATIONS, PlaybookCreate, PlaybookPatch, PlaybookRecord } from "../../../../src/schema/playbook.ts";
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import { linkTo } from "../../lib/router.ts";
import { patch, post } from "../../lib/api.ts";
import { Field, num, setter, useFieldErrors } from "../profiles/fields.tsx";

// Bounds of src/schema/playbook.ts (its values would bundle the server's schema library).
const MAX_CONT: typeof MAX_CONTINUATIONS = 10;
const ANSWER_MAX = 30 * 24 * 3600; // ANSWER_TIMEOUT_MAX
export const LOCAL_TZ = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

interface Draft {
  name: string;
  profile_id: string;
  prompt: string;
  schedule: string;
  timezone: string;
  enabled: boolean;
  max_continuations: string;
  max_turns: string;
  max_budget_usd: string;
  answer_timeout: string;
}
const s = (v: number | null | undefined) => (v === null || v === undefined ? "" : String(v));
const draftOf = (p: PlaybookRecord | undefined, profileId: string): Draft => ({
  name: p?.name ?? "",
  profile_id: p?.profile_id ?? profileId,
  prompt: p?.prompt ?? "",
  schedule: p?.schedule ?? "",
  timezone: p?.timezone ?? LOCAL_TZ,
  enabled: p?.enabled ?? true,
  max_continuations: s(p?.max_continuations ?? 0),
  max_turns: s(p?.max_turns),
  max_budget_usd: s(p?.max_budget_usd),
  answer_timeout: s(p?.answer_timeout),
});

/** The draft as the API's body: every field (create) or the changed ones (edit). */
function bodyOf(d: Draft, p?: PlaybookRecord): PlaybookCreate | PlaybookPatch {
  const full: Required<PlaybookPatch> = {
    name: d.name.trim(),
    profile_id: d.profile_id,
    prompt: d.prompt,
    schedule: d.schedule.trim() || null,
    timezone: d.timezone.trim(),
    enabled: d.enabled,
    max_continuations: num(d.max_continuations) ?? 0,
    max_turns: num(d.max_turns) ?? null,
    max_budget_usd: num(d.max_budget_usd) ?? null,
    answer_timeout: num(d.answer_timeout) ?? null,
  };
  if (!p) return full as PlaybookCreate;
  return Object.fromEntries(Object.entries(full).filter(([k, v]) => v !== p[k as keyof PlaybookRecord]));
}

/** `field`: the one the error is about (focused when the form is sent). */
export type Preview = { runs: Date[] } | { error: string; field: "schedule" | "timezone" } | null;

/** The next `n` slots of a pattern in a time zone, or why there are none; null without a pattern. */
export function preview(pattern: string, tz: string, n = 5): Preview {
  if (!pattern.trim()) return null;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    return { error: `"${tz}" is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)`, field: "timezone" };
  }
  try {
    const runs = new Cron(pattern.trim(), { timezone: tz, paused: true }).nextRuns(n);
    return runs.length ? { runs } : { error: "This schedule never fires (no future time matches it)", field: "schedule" };
  } catch (e) {
    return { error: `Not a valid cron expression: ${(e as Error).message.replace(/^CronPattern: /, "")}`, field: "schedule" };
  }
}

const fmt = (d: Date, seconds: boolean) =>
  d.toLocaleString(undefined, { weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: seconds ? "2-digit" : undefined });

export function SchedulePreview({ p, id }: { p: Preview; id: string }) {
  if (!p) return <p id={id} class="meta preview">No schedule: the playbook runs only on demand and from its trigger URL.</p>;
  if ("error" in p)
    return (
      <p id={id} class="error preview">
        {p.error}
      </p>
    );
  const secs = p.runs.some((r) => r.getSeconds() !== 0);
  return (
    <div id={id} class="preview">
      Next runs, in your time zone ({LOCAL_TZ}):
      <ol>
        {p.runs.map((r) => (
          <li key={r.getTime()}>
            <time dateTime={r.toISOString()}>{fmt(r, secs)}</time>
          </li>
        ))}
      </ol>
    </div>
  );
}

let zones: string[] | undefined;

export function PlaybookForm(props: { playbook?: PlaybookRecord; profiles: ProfileRecord[]; onSaved: (p: PlaybookRecord, created: boolean) => void; onCancel?: () => void }) {
  const pb = props.playbook;
  const [d, setD] = useState<Draft>(() => draftOf(pb, props.profiles[0]?.id ?? ""));
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState("");
  const f = useFieldErrors("pb-");
  const on = setter(d, setD);
  const pv = useMemo(() => preview(d.schedule, d.timezone.trim() || "UTC"), [d.schedule, d.timezone]);
  zones ??= (Intl as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.("timeZone") ?? [];

  const submit = async (e: Event) => {
    e.preventDefault();
    f.clear();
    setStatus("");
    if (pv && "error" in pv) return document.getElementById(`pb-${pv.field}`)?.focus();
    const body = bodyOf(d, pb);
    if (pb && !Object.keys(body).length) return setStatus("No changes to save.");
    setBusy(true);
    try {
      const saved = pb ? await patch<PlaybookRecord>(`/v1/playbooks/${pb.id}`, body) : await post<PlaybookRecord>("/v1/playbooks", body);
      props.onSaved(saved, !pb);
    } catch (err) {
      // A profile that is not (or no longer) yours is a 404 without a field.
      f.fail(err, (err as { status?: number }).status === 404 ? "profile_id" : undefined);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card edit-form" onSubmit={submit} aria-labelledby="pb-title">
      <h2 id="pb-title">{pb ? "Edit playbook" : "New playbook"}</h2>
      <div class="grid">
        <Field f={f} name="name" label="Name">
          {(a) => <input {...a} value={d.name} onInput={on("name")} required maxLength={100} placeholder="e.g. nightly build check" />}
        </Field>
        <Field f={f} name="profile_id" label="Profile">
          {(a) => (
            <select {...a} value={d.profile_id} onChange={on("profile_id")} required>
              {!props.profiles.some((x) => x.id === d.profile_id) && <option value={d.profile_id}>{d.profile_id ? `${d.profile_id} (deleted)` : "—"}</option>}
              {props.profiles.map((x) => (
                <option key={x.id} value={x.id}>
                  {x.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      {props.profiles.length === 0 && (
        <p class="meta">
          You need a profile first:{" "}
          <a href="/profiles" onClick={linkTo("/profiles")}>
            create one
          </a>
          .
        </p>
      )}
      <Field f={f} name="prompt" label="Prompt">
        {(a) => <textarea {...a} rows={5} value={d.prompt} onInput={on("prompt")} required maxLength={100_000} placeholder="What the agent should do on every run" />}
      </Field>
      <div class="grid">
        <Field f={f} name="schedule" label="Schedule (cron, optional)" describedBy="pb-preview">
          {(a) => (
            <input
              {...a}
              aria-invalid={a["aria-invalid"] || (pv !== null && "error" in pv && pv.field === "schedule") || undefined}
              value={d.schedule}
              onInput={on("schedule")}
              maxLength={200}
              placeholder="e.g. 0 3 * * * or @daily"
              spellcheck={false}
              autoCapitalize="off"
            />
          )}
        </Field>
        <Field f={f} name="timezone" label="Time zone of the schedule" describedBy="pb-preview">
          {(a) => <input {...a} aria-invalid={a["aria-invalid"] || (pv !== null && "error" in pv && pv.field === "timezone") || undefined} value={d.timezone} onInput={on("timezone")} required maxLength={64} list="pb-zones" spellcheck={false} autoCapitalize="off" />}
        </Field>
      </div>
      <div aria-live="polite">
        <SchedulePreview p={pv} id="pb-preview" />
      </div>
      <datalist id="pb-zones">
        {zones.map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
      {!pb && (
        <label class="check">
          <input type="checkbox" checked={d.enabled} onChange={(e) => setD({ ...d, enabled: e.currentTarget.checked })} /> Enabled (a disabled playbook fires neither on its
          schedule nor from its trigger URL)
        </label>
      )}
      <details open={!!pb && (pb.max_continuations > 0 || pb.max_turns !== null || pb.max_budget_usd !== null || pb.answer_timeout !== null)}>
        <summary>Limits and questions</summary>
        <div class="grid">
          <Field f={f} name="max_continuations" label={`Fresh-context continuations (0–${MAX_CONT})`}>
            {(a) => <input {...a} type="number" min={0} max={MAX_CONT} step={1} value={d.max_continuations} onInput={on("max_continuations")} required />}
          </Field>
          <Field f={f} name="max_turns" label="Model requests per run (1–1,000)">
            {(a) => <input {...a} type="number" min={1} max={1000} step={1} value={d.max_turns} onInput={on("max_turns")} placeholder="the profile's" />}
          </Field>
          <Field f={f} name="max_budget_usd" label="Cost cap per run (USD)">
            {(a) => <input {...a} type="number" min={0.01} max={10_000} step="any" value={d.max_budget_usd} onInput={on("max_budget_usd")} placeholder="the profile's" />}
          </Field>
          <Field f={f} name="answer_timeout" label="Seconds to wait for an answer">
            {(a) => <input {...a} type="number" min={1} max={ANSWER_MAX} step={1} value={d.answer_timeout} onInput={on("answer_timeout")} placeholder="wait indefinitely" />}
          </Field>
        </div>
      </details>
      {f.general}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {pb ? "Save changes" : "Create playbook"}
        </button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        )}
        <span role="status">{status}</span>
      </div>
    </form>
  );
}
