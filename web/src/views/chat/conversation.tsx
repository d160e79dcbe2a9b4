/**
 * The open session: its transcript (replayed, then live, over the shared StreamClient), rendered
 * once per animation frame, the last turns only (older ones behind a button), and the composer.
 * The view follows the newest turn while it is scrolled to the bottom (where it opens); on a narrow
 * screen the page itself scrolls, not the transcript, and it is the page that follows.
 */
import { Alert } from "../../components/feedback.tsx";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { all, ApiError, get, post } from "../../lib/api.ts";
import { int, usd } from "../../lib/format.ts";
import { linkTo } from "../../lib/router.ts";
import type { ErrorFrame, StreamClient } from "../../lib/stream.ts";
import { Composer } from "./composer.tsx";
import type { SessionRecord } from "../../../../src/schema/session.ts";
import { type TaskFigures, Transcript } from "./model.ts";
import { TurnView } from "./turn.tsx";

const WINDOW = 40;

/**
 * `profiles`: the user's profiles by id (null while they load) — a session whose profile was
 * deleted takes no new message (the server would refuse it): it shows why instead of a composer.
 */
export function Conversation({ sessionId, stream, onSettled, profiles }: { sessionId: string; stream: StreamClient; onSettled?: () => void; profiles?: Map<string, string> | null }) {
  const model = useMemo(() => new Transcript(sessionId), [sessionId]);
  const [, setTick] = useState(0);
  const [shown, setShown] = useState(WINDOW);
  const [error, setError] = useState("");
  const [notFound, setNotFound] = useState(false);
  const raf = useRef(0);
  /** The user is at the bottom of the transcript: new content keeps it there. */
  const atBottom = useRef(true);
  /** The prompts (task records) have arrived, or failed to: turns are drawn with their prompts or not at all. */
  const prompts = useRef(false);
  const list = useRef<HTMLDivElement>(null);
  const gone = useRef(false);
  /** The session's tokens and cost: its record's (GET /v1/sessions/:id), read again when a task ends. */
  const [figures, setFigures] = useState<{ input: number; output: number; cost: number } | null>(null);
  const [profileId, setProfileId] = useState<string | null>(null);
  const loadFigures = () =>
    get<SessionRecord>(`/v1/sessions/${encodeURIComponent(sessionId)}`).then(
      (s) => {
        if (gone.current) return;
        setFigures({ input: s.input_tokens, output: s.output_tokens, cost: s.cost_usd });
        setProfileId(s.profile_id);
      },
      () => {},
    );
  const profileGone = profiles != null && profileId !== null && !profiles.has(profileId);
  /** A task that ended without a turn.done (cancelled, failed): its turn's figures from its record. */
  const loadTaskUsage = (taskId: string) =>
    get<TaskFigures>(`/v1/tasks/${encodeURIComponent(taskId)}`).then(
      (t) => {
        if (gone.current) return;
        model.setUsage(t);
        schedule();
      },
      () => {},
    );

  /** Draws again at the next animation frame. */
  const schedule = () => {
    if (raf.current || gone.current) return;
    raf.current = requestAnimationFrame(() => {
      raf.current = 0;
      setTick((n) => n + 1);
    });
  };
  /** Turns without their prompt (a task another client started, or one that began as the page loaded): looked up. */
  const lookUpPrompts = () => {
    if (!prompts.current || model.replaying) return;
    for (const id of model.takeUnprompted())
      get<{ prompt: string }>(`/v1/tasks/${encodeURIComponent(id)}`).then(
        (t) => {
          if (gone.current) return;
          model.claim(id, t.prompt);
          schedule();
        },
        () => {},
      );
  };

  useEffect(() => {
    gone.current = false;
    let cancelled = false;
    stream.onFrame = (f) => {
      if (f.type === "error") {
        setError(`${f.code}: ${f.message}`);
        return;
      }
      if ("session_id" in f && f.session_id !== sessionId) return;
      if (model.apply(f) && !model.replaying) {
        schedule();
        lookUpPrompts();
        // A turn ended live: the session list's cost and status moved, and the session's figures.
        if (f.type === "task:done" || f.type === "task:failed") {
          onSettled?.();
          void loadFigures();
          if (f.type === "task:failed" || f.status === "cancelled") void loadTaskUsage(f.task_id);
        }
        // A replay ended (the page opened, or reconnected: tasks may have ended meanwhile).
        if (f.type === "session.replay_end") void loadFigures();
      }
    };
    // Reconnected: what the page holds of an unfinished turn is dropped and replayed (model.rewind).
    stream.onReconnect = () => model.rewind();
    // The replay from the start, then live frames; the prompts (task records) load meanwhile and
    // are folded in whenever they arrive (the replay does not wait for them).
    model.replaying = true;
    stream.follow(sessionId, model.lastSeq, (f) => (f.code === "NOT_FOUND" ? setNotFound(true) : setError(`${f.code}: ${f.message}`)));
    all<TaskFigures>(`/v1/tasks?session_id=${encodeURIComponent(sessionId)}`)
      .then((tasks) => {
        if (cancelled) return;
        model.setPrompts(tasks.reverse());
        prompts.current = true;
        lookUpPrompts();
        schedule();
      })
      .catch((e) => {
        prompts.current = true;
        if (!cancelled) setError(e instanceof ApiError ? e.message : String(e));
      });
    return () => {
      cancelled = true;
      gone.current = true;
      stream.onReconnect = () => undefined;
      if (raf.current) cancelAnimationFrame(raf.current);
      raf.current = 0;
    };
  }, [sessionId]);

  // Opens at the bottom, and stays there while the user is there (again a frame later: blocks
  // coming into view take their real height then). The scroller is the transcript, or, on a narrow
  // screen where the page grows with it instead (`.split{height:auto}`), the document.
  const lastTop = useRef(0);
  const scroller = (): HTMLElement | null => {
    const el = list.current?.parentElement;
    if (!el) return null;
    return el.scrollHeight > el.clientHeight + 1 ? el : ((document.scrollingElement as HTMLElement | null) ?? document.documentElement);
  };
  const follow = () => {
    const el = scroller();
    if (!el || !atBottom.current) return;
    el.scrollTop = el.scrollHeight;
    lastTop.current = el.scrollTop;
  };
  useEffect(() => {
    follow();
    const r = requestAnimationFrame(follow);
    return () => cancelAnimationFrame(r);
  });
  // Heights that move without this view drawing again (an image loading; on a narrow screen the
  // session list above it loading): followed too.
  useEffect(() => {
    const ro = new ResizeObserver(follow);
    if (list.current) ro.observe(list.current);
    const page = list.current?.closest("main");
    if (page) ro.observe(page);
    return () => ro.disconnect();
  }, []);
  // Scrolled up by the user (not moved down by us, nor at the bottom): stop following. Scrolls of
  // what is not the scroller now (the document on a wide screen) are not the user's reading.
  const onScroll = (e: Event) => {
    const el = scroller();
    const target = e.currentTarget === window || e.currentTarget === document ? (document.scrollingElement ?? document.documentElement) : e.currentTarget;
    if (!el || target !== el) return;
    const near = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    atBottom.current = near || (atBottom.current && el.scrollTop >= lastTop.current);
    lastTop.current = el.scrollTop;
  };
  useEffect(() => {
    addEventListener("scroll", onScroll);
    return () => removeEventListener("scroll", onScroll);
  }, []);

  // Sent with POST /v1/tasks: its answer is the new task's id, so the prompt goes above that task's
  // turn and no other (another client may submit to this session at the same time), and the
  // composer keeps the text until then (an unreachable server, a refusal).
  const send = async (prompt: string) => {
    setError("");
    try {
      const { task_id } = await post<{ task_id: string }>("/v1/tasks", { session_id: sessionId, prompt });
      model.claim(task_id, prompt);
      schedule();
    } catch (e) {
      setError(e instanceof ApiError ? (e.code === "NETWORK" ? "The server could not be reached: your message was not sent, it is still in the box." : `${e.code}: ${e.message}`) : String(e));
      throw e;
    }
  };
  const answer = (taskId: string, text: string, refused: () => void) =>
    stream.send({ type: "task.answer", task_id: taskId, answer: text }, (f: ErrorFrame) => {
      setError(`${f.code}: ${f.message}`);
      refused();
    });
  const cancel = (taskId: string) => post(`/v1/tasks/${taskId}/cancel`).catch((e) => setError(e instanceof ApiError ? e.message : String(e)));

  // Copy buttons of code blocks (no inline handlers: one delegated listener).
  const onClick = (e: MouseEvent) => {
    const btn = (e.target as HTMLElement).closest("[data-copy]");
    if (!btn) return;
    const code = btn.parentElement?.querySelector("code")?.textContent ?? "";
    navigator.clipboard?.writeText(code).then(() => {
      btn.textContent = "Copied";
      setTimeout(() => (btn.textContent = "Copy"), 1500);
    }, () => {});
  };

  if (notFound)
    return (
      <section class="conversation" aria-labelledby="conversation-title">
        <div class="transcript">
          <div class="welcome">
            <h1 id="conversation-title">Session not found</h1>
            <p>
              There is no session <code>{sessionId}</code> of yours.{" "}
              <a href="/" onClick={linkTo("/")}>
                Start a new session
              </a>
            </p>
          </div>
        </div>
      </section>
    );

  // Drawn once the replay and the prompts are both in (they load side by side).
  const ready = !model.replaying && prompts.current;
  const turns = ready ? model.turns : [];
  const hidden = Math.max(0, turns.length - shown);
  const totals = figures ?? model.totals;
  const running = ready ? model.running : null;
  return (
    <section class="conversation" aria-labelledby="conversation-title">
      <h1 id="conversation-title" class="sr-only">
        Session {sessionId}
      </h1>
      <div class="transcript" aria-live="polite" onClick={onClick} onScroll={onScroll}>
        <div ref={list}>
          {hidden > 0 && (
            <button type="button" class="link earlier" onClick={() => setShown(shown + WINDOW)}>
              Show {Math.min(hidden, WINDOW)} earlier turns ({hidden} hidden)
            </button>
          )}
          {turns.slice(hidden).map((t) => (
            <TurnView key={t.taskId} turn={t} version={t.version} onAnswer={answer} onCancel={cancel} />
          ))}
          {!ready && (
            <p class="muted" role="status">
              Loading the session…
            </p>
          )}
          {ready && turns.length === 0 && <p class="muted empty">No messages yet: write the first one below.</p>}
        </div>
      </div>
      <p class="meta totals" aria-label="Session totals">
        {int(totals.input)} tokens in · {int(totals.output)} out · {usd(totals.cost)}
      </p>
      <Alert text={error} />
      {profileGone ? (
        <p class="muted gone" role="status">
          This session's profile was deleted, so it takes no new messages.{" "}
          <a href="/" onClick={linkTo("/")}>
            Start a new session
          </a>
          .
        </p>
      ) : (
        <Composer onSend={send} draftKey={sessionId} busy={running !== null} onCancel={running ? () => cancel(running.taskId) : undefined} />
      )}
    </section>
  );
}
