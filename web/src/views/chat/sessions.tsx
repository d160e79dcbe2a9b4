/**
 * The session list: title (the first prompt), profile, status, cost, relative time; searchable.
 * Loaded when the view opens, when another session opens, when `refresh` moves, and when the
 * window gets the focus back (sessions started elsewhere — another tab, the API — show up).
 */
import { useEffect, useState } from "preact/hooks";
import type { SessionRecord } from "../../../../src/schema/session.ts";
import { all, ApiError } from "../../lib/api.ts";
import { ago, usd } from "../../lib/format.ts";
import { linkTo } from "../../lib/router.ts";

export function SessionList({ current, profiles, refresh }: { current: string | null; profiles: Map<string, string>; refresh: number }) {
  const [sessions, setSessions] = useState<SessionRecord[] | null>(null);
  const [query, setQuery] = useState("");
  const [error, setError] = useState("");
  const [focused, setFocused] = useState(0);
  useEffect(() => {
    const onFocus = () => setFocused((n) => n + 1);
    addEventListener("focus", onFocus);
    return () => removeEventListener("focus", onFocus);
  }, []);
  useEffect(() => {
    all<SessionRecord>("/v1/sessions", 500).then(
      (l) => {
        setSessions(l);
        setError("");
      },
      (e) => setError(e instanceof ApiError ? e.message : String(e)),
    );
  }, [refresh, current, focused]);
  const q = query.trim().toLowerCase();
  const shown = (sessions ?? []).filter((s) => !q || (s.title ?? "").toLowerCase().includes(q) || (profiles.get(s.profile_id) ?? "").toLowerCase().includes(q));
  return (
    <nav class="sessions" aria-label="Sessions">
      <a href="/" class="button primary new" onClick={linkTo("/")}>
        New session
      </a>
      <label>
        <span class="sr-only">Search sessions</span>
        <input type="search" placeholder="Search sessions" value={query} onInput={(e) => setQuery((e.currentTarget as HTMLInputElement).value)} />
      </label>
      <ul class="list">
        {shown.map((s) => (
          <li key={s.id}>
            <a href={`/sessions/${s.id}`} onClick={linkTo(`/sessions/${s.id}`)} aria-current={s.id === current ? "page" : undefined}>
              <span class="title">{s.title ?? "Untitled session"}</span>
              <span class="meta">
                {profiles.get(s.profile_id) ?? "deleted profile"} · {s.status === "active" ? "running" : "idle"} · {usd(s.cost_usd)} · {ago(s.updated_at)}
              </span>
            </a>
          </li>
        ))}
        {error && !sessions && (
          <li class="error" role="alert">
            The sessions could not be loaded: {error}
          </li>
        )}
        {sessions && shown.length === 0 && <li class="muted">{q ? "No session matches." : "No sessions yet."}</li>}
      </ul>
    </nav>
  );
}
