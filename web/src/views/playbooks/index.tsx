/**
 * Playbooks: the list and a form to create one (/playbooks), and one playbook (/playbooks/:id):
 * its settings, edit, enable/disable, "Run now" (→ the run's session), the trigger URL with a
 * copy button, Rotate and a curl example, its runs, and deletion.
 */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import type { PlaybookRecord } from "../../../../src/schema/playbook.ts";
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import { all, del, get, patch, post } from "../../lib/api.ts";
import { ago, stamp, when } from "../../lib/format.ts";
import { linkTo, navigate } from "../../lib/router.ts";
import { CopyButton } from "../profiles/fields.tsx";
import { PlaybookForm } from "./form.tsx";
import { Runs, SessionLink, statusText } from "./runs.tsx";

const profileName = (profiles: ProfileRecord[], id: string) => profiles.find((p) => p.id === id)?.name ?? `${id} (deleted)`;
/** The user's profiles (null until loaded, and when the load failed: then `error` says why, never an empty list). */
const useProfiles = () => {
  const [profiles, setProfiles] = useState<ProfileRecord[] | null>(null);
  const [error, setError] = useState("");
  useEffect(() => void all<ProfileRecord>("/v1/profiles").then(setProfiles, (e) => setError(`The profiles could not be loaded: ${(e as Error).message}`)), []);
  return { profiles, profilesError: error };
};

export function Playbooks() {
  const [list, setList] = useState<PlaybookRecord[] | null>(null);
  const [error, setError] = useState("");
  const { profiles, profilesError } = useProfiles();
  useEffect(() => void all<PlaybookRecord>("/v1/playbooks").then(setList, (e) => setError(e.message)), []);

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Playbooks</h1>
      <p class="muted">Saved prompts that run on demand, on a cron schedule, or when something POSTs to their trigger URL. Every run gets its own session.</p>
      <Alert text={error || profilesError} />
      <table class="card">
        <caption class="sr-only">Your playbooks</caption>
        <THead columns={["Name", "Profile", "Schedule", "Next run", "Last run"]} />
        <tbody>
          {list?.map((pb) => {
            const last = pb.last_runs[0];
            return (
              <tr key={pb.id}>
                <td>
                  <a href={`/playbooks/${pb.id}`} onClick={linkTo(`/playbooks/${pb.id}`)}>
                    {pb.name}
                  </a>
                </td>
                <td>{profiles ? profileName(profiles, pb.profile_id) : profilesError ? <code>{pb.profile_id}</code> : "…"}</td>
                <td>
                  {pb.schedule ? (
                    <>
                      <code>{pb.schedule}</code> <span class="meta">{pb.timezone}</span>
                    </>
                  ) : (
                    <span class="muted">on demand</span>
                  )}
                </td>
                <td>{!pb.enabled ? <span class="muted">disabled</span> : pb.next_run_at ? <span {...stamp(pb.next_run_at)} /> : "—"}</td>
                <td>
                  {last ? (
                    <SessionLink run={last}>
                      {statusText(last.status)}, {ago(last.created_at)}
                    </SessionLink>
                  ) : (
                    <span class="muted">never</span>
                  )}
                </td>
              </tr>
            );
          })}
          {list?.length === 0 && (
            <EmptyRow cols={5}>No playbooks yet.</EmptyRow>
          )}
        </tbody>
      </table>
      {profiles && <PlaybookForm profiles={profiles} onSaved={(pb) => navigate(`/playbooks/${pb.id}`)} />}
    </main>
  );
}

export function PlaybookDetail({ id }: { id: string }) {
  const [pb, setPb] = useState<PlaybookRecord | null | undefined>(undefined);
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");
  const [editing, setEditing] = useState(false);
  const [runs, setRuns] = useState(0);
  const [busy, setBusy] = useState(false);
  /** The session of the run "Run now" started. */
  const [started, setStarted] = useState<string | null>(null);
  const { profiles, profilesError } = useProfiles();
  useEffect(() => {
    setPb(undefined);
    get<PlaybookRecord>(`/v1/playbooks/${id}`).then(setPb, (e) => (e.status === 404 ? setPb(null) : setError(e.message)));
  }, [id]);

  /** Runs an action, showing its outcome; the playbook it returns (if any) replaces the shown one. */
  const act = async (fn: () => Promise<PlaybookRecord | void>, done: string) => {
    setError("");
    setStatus("");
    setStarted(null);
    setBusy(true);
    try {
      const r = await fn();
      if (r) setPb(r);
      setStatus(done);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  if (pb === undefined)
    return (
      <main id="main" tabIndex={-1} class="page">
        <Alert text={error} />
        {!error && <p class="muted">Loading…</p>}
      </main>
    );
  if (pb === null)
    return (
      <main id="main" tabIndex={-1} class="page">
        <h1>Playbook not found</h1>
        <p>
          <a href="/playbooks" onClick={linkTo("/playbooks")}>
            Back to your playbooks
          </a>
        </p>
      </main>
    );

  const runNow = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const input = String(new FormData(form).get("input") ?? "");
    return act(async () => {
      const r = await post<{ session_id: string }>(`/v1/playbooks/${pb.id}/run`, input.trim() ? { input } : {});
      setStarted(r.session_id);
      form.reset();
      setRuns((n) => n + 1);
      return get<PlaybookRecord>(`/v1/playbooks/${pb.id}`);
    }, "Run started.");
  };
  const toggle = () =>
    act(() => patch<PlaybookRecord>(`/v1/playbooks/${pb.id}`, { enabled: !pb.enabled }), pb.enabled ? "Disabled: the schedule and the trigger URL are off." : "Enabled.");
  const rotate = () =>
    confirm("Replace the trigger URL? The current one stops working at once.") &&
    act(() => post<PlaybookRecord>(`/v1/playbooks/${pb.id}/rotate-trigger`), "New trigger URL: the old one no longer works.");
  const remove = () =>
    confirm(`Delete the playbook "${pb.name}"? Its schedule and trigger URL stop; its runs' sessions stay.`) &&
    act(async () => {
      await del(`/v1/playbooks/${pb.id}`);
      navigate("/playbooks");
    }, "Deleted.");

  const curl = `curl -fsS -X POST '${pb.trigger_url}' \\\n  -H 'content-type: application/json' \\\n  -d '{"input": "optional text or JSON for this run"}'`;

  return (
    <main id="main" tabIndex={-1} class="page">
      <p>
        <a href="/playbooks" onClick={linkTo("/playbooks")}>
          ← Playbooks
        </a>
      </p>
      <h1>{pb.name}</h1>
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd data-testid="playbook-state">{pb.enabled ? "enabled" : "disabled"}</dd>
        </div>
        <div>
          <dt>Profile</dt>
          <dd>{profiles ? profileName(profiles, pb.profile_id) : profilesError ? <code>{pb.profile_id}</code> : "…"}</dd>
        </div>
        <div>
          <dt>Schedule</dt>
          <dd>
            {pb.schedule ? (
              <>
                <code>{pb.schedule}</code> ({pb.timezone})
              </>
            ) : (
              "on demand"
            )}
          </dd>
        </div>
        <div>
          <dt>Next run</dt>
          <dd>{pb.enabled ? when(pb.next_run_at) : "disabled"}</dd>
        </div>
      </dl>
      <div class="actions">
        <button type="button" onClick={toggle} disabled={busy}>
          {pb.enabled ? "Disable" : "Enable"}
        </button>
        <button type="button" onClick={() => setEditing(!editing)} aria-expanded={editing}>
          Edit
        </button>
        <button type="button" class="danger" onClick={remove} disabled={busy}>
          Delete
        </button>
      </div>
      <p role="status">
        {status}
        {started && (
          <>
            {" "}
            <a href={`/sessions/${started}`} onClick={linkTo(`/sessions/${started}`)} data-testid="run-session">
              Open its session
            </a>
          </>
        )}
      </p>
      <Alert text={error} />
      {editing && <Alert text={profilesError} />}
      {editing && profiles && (
        <PlaybookForm
          playbook={pb}
          profiles={profiles}
          onCancel={() => setEditing(false)}
          onSaved={(r) => {
            setPb(r);
            setEditing(false);
            setStatus("Saved.");
          }}
        />
      )}

      <form class="card" onSubmit={runNow} aria-labelledby="pb-run">
        <h2 id="pb-run">Run now</h2>
        <label>
          Input for this run (optional; appended to the prompt)
          <textarea name="input" rows={2} />
        </label>
        <button type="submit" class="primary" data-testid="run-now" disabled={busy}>
          Run now
        </button>
      </form>

      <section class="card" aria-labelledby="pb-trigger">
        <h2 id="pb-trigger">Trigger URL</h2>
        <p class="meta">
          A POST to this URL runs the playbook with no other credential: keep it like a password, and rotate it if it leaks.
          {!pb.enabled && " It answers 404 while the playbook is disabled."}
        </p>
        <code class="secret url" data-testid="trigger-url">
          {pb.trigger_url}
        </code>
        <div class="actions">
          <CopyButton text={pb.trigger_url} label="Copy URL" />
          <button type="button" onClick={rotate} disabled={busy}>
            Rotate
          </button>
        </div>
        <p>Run it from a script or another service:</p>
        <pre class="curl">
          {curl}
        </pre>
        <CopyButton text={curl} label="Copy command" />
      </section>

      <Runs id={pb.id} reload={runs} />
    </main>
  );
}
