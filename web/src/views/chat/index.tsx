/**
 * Chat: the session list and either the open session or a new one. With no session open the
 * composer starts one with the selected profile (the last used by default) and sends the message;
 * without any profile it is not shown — the view says how to make one. The profile picker's list
 * is loaded again when it gets the focus and when the window does (profiles made elsewhere show up).
 */
import { Alert } from "../../components/feedback.tsx";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { ProfileRecord } from "../../../../src/schema/profile.ts";
import { all, ApiError } from "../../lib/api.ts";
import { linkTo, navigate } from "../../lib/router.ts";
import { lastProfile, setLastProfile } from "../../lib/session.ts";
import { StreamClient, type StreamState } from "../../lib/stream.ts";
import { Composer } from "./composer.tsx";
import { Conversation } from "./conversation.tsx";
import { SessionList } from "./sessions.tsx";

const stream = new StreamClient();

export function Chat({ sessionId }: { sessionId: string | null }) {
  const [profiles, setProfiles] = useState<ProfileRecord[] | null>(null);
  const [profileId, setProfileId] = useState<string>(lastProfile);
  const [refresh, setRefresh] = useState(0);
  const [error, setError] = useState("");
  const [link, setLink] = useState<StreamState>(stream.state);
  useEffect(() => {
    stream.onState = setLink;
    return () => void (stream.onState = () => {});
  }, []);

  const loadProfiles = () =>
    all<ProfileRecord>("/v1/profiles").then(
      (ps) => {
        setProfiles(ps);
        setProfileId((id) => (ps.some((p) => p.id === id) ? id : (ps[0]?.id ?? "")));
      },
      (e) => setError(e instanceof ApiError ? e.message : String(e)),
    );
  useEffect(() => void loadProfiles(), []);
  useEffect(() => {
    if (sessionId) return;
    const onFocus = () => void loadProfiles();
    addEventListener("focus", onFocus);
    return () => removeEventListener("focus", onFocus);
  }, [sessionId]);

  const names = useMemo(() => new Map((profiles ?? []).map((p) => [p.id, p.name])), [profiles]);

  // Taken once its session exists (session.ready): the new session's page shows its first turn
  // (and its failure, if its workspace cannot start). Until then it waits in the composer.
  const start = (prompt: string) =>
    new Promise<void>((taken, refused) => {
      setError("");
      setLastProfile(profileId);
      stream.unfollow();
      stream.onFrame = (f) => {
        if (f.type === "session.ready") {
          taken();
          navigate(`/sessions/${f.session_id}`);
        } else if (f.type === "error") setError(`${f.code}: ${f.message}`);
      };
      stream.send({ type: "task.submit", profile_id: profileId, prompt }, (f) => {
        setError(`${f.code}: ${f.message}`);
        refused();
      });
    });

  return (
    <>
      {link === "reconnecting" && (
        <p class="slowdown" role="status">
          Offline: the server cannot be reached. Reconnecting… An unsent message stays in its box.
        </p>
      )}
      <main id="main" tabIndex={-1} class="split">
      <SessionList current={sessionId} profiles={names} refresh={refresh} />
      {sessionId ? (
        <Conversation key={sessionId} sessionId={sessionId} stream={stream} profiles={profiles ? names : null} onSettled={() => setRefresh((n) => n + 1)} />
      ) : (
        <section class="conversation" aria-label="New session">
          <div class="transcript">
            <div class="welcome">
              <h1>New session</h1>
              {profiles && profiles.length === 0 ? (
                <p>
                  You need a profile first: it says which model the agent uses and what its workspace may do.{" "}
                  <a href="/profiles" onClick={linkTo("/profiles")}>
                    Create a profile
                  </a>
                  .
                </p>
              ) : (
                <p class="muted">Pick a profile and write your first message: the session and its workspace start with it.</p>
              )}
            </div>
          </div>
          <Alert text={error} />
          {profiles && profiles.length > 0 && (
            <Composer onSend={start} draftKey="new">
              <label>
                Profile{" "}
                <select value={profileId} onFocus={() => void loadProfiles()} onChange={(e) => setProfileId((e.currentTarget as HTMLSelectElement).value)}>
                  {profiles.map((p) => (
                    <option key={p.id} value={p.id}>
                      {p.name}
                    </option>
                  ))}
                </select>
              </label>
            </Composer>
          )}
        </section>
      )}
      </main>
    </>
  );
}
