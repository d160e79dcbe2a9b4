/** A playbook's runs (GET /v1/playbooks/:id/runs), newest first, a page at a time; refreshed while one is active. */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { PlaybookRun } from "../../../../src/schema/playbook.ts";
import { get, type Page } from "../../lib/api.ts";
import { int, stamp, usd, when } from "../../lib/format.ts";
import { linkTo } from "../../lib/router.ts";

const ACTIVE = ["queued", "running", "waiting_input"];
export const statusText = (s: PlaybookRun["status"]) => (s === "waiting_input" ? "waiting for an answer" : s);

export function SessionLink({ run, children }: { run: PlaybookRun; children: ComponentChildren }) {
  return run.session_id ? (
    <a href={`/sessions/${run.session_id}`} onClick={linkTo(`/sessions/${run.session_id}`)}>
      {children}
    </a>
  ) : (
    <>{children}</>
  );
}

export function Runs({ id, reload }: { id: string; reload: number }) {
  const [runs, setRuns] = useState<PlaybookRun[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState("");
  const url = (cursor?: string | null) => `/v1/playbooks/${id}/runs?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
  const load = () =>
    get<Page<PlaybookRun>>(url()).then(
      (p) => {
        setRuns(p.data);
        setNext(p.next_cursor);
        setError("");
      },
      (e) => setError(e.message),
    );
  const more = () =>
    get<Page<PlaybookRun>>(url(next)).then(
      (p) => {
        setRuns([...runs, ...p.data]);
        setNext(p.next_cursor);
      },
      (e) => setError(e.message),
    );
  useEffect(() => void load(), [id, reload]);
  const active = runs.some((r) => ACTIVE.includes(r.status));
  useEffect(() => {
    if (!active) return;
    const t = setTimeout(load, 5000);
    return () => clearTimeout(t);
  }, [runs]);

  return (
    <section class="card" aria-labelledby="pb-runs">
      <div class="actions">
        <h2 id="pb-runs" class="grow">
          Runs
        </h2>
        <button type="button" onClick={load}>
          Refresh
        </button>
      </div>
      <Alert text={error} />
      {/* Focusable: on a phone the table scrolls sideways, and a keyboard must reach that too. */}
      <table tabIndex={0}>
        <caption class="sr-only">Runs of this playbook, newest first</caption>
        <THead columns={["Started", "Trigger", "Status", "Tokens in / out", "Cost", "Session"]} />
        <tbody>
          {runs.map((r, i) => (
            <tr key={r.task_id ?? `${r.created_at}-${i}`}>
              <td {...stamp(r.created_at)} />
              <td>{r.trigger}</td>
              <td>
                {statusText(r.status)}
                {r.error && <div class="meta">{r.error.message}</div>}
              </td>
              <td>
                {int(r.input_tokens)} / {int(r.output_tokens)}
              </td>
              <td>{usd(r.cost_usd)}</td>
              <td>{r.session_id ? <SessionLink run={r}>
                    Open<span class="sr-only"> the session of the run {when(r.created_at)}</span>
                  </SessionLink> : "—"}</td>
            </tr>
          ))}
          {runs.length === 0 && !error && (
            <EmptyRow cols={6}>No runs yet.</EmptyRow>
          )}
        </tbody>
      </table>
      {next && (
        <button type="button" onClick={more}>
          Load older runs
        </button>
      )}
    </section>
  );
}
