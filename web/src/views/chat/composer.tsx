/**
 * The message box: Enter sends, Shift+Enter is a new line; shown only where a message can be sent.
 * The text is kept per session in sessionStorage (it survives a reload and signing in again) and
 * stays in the box until the server has taken it: `onSend` resolves once it was accepted — then
 * the sent text leaves the box (what was typed after it stays) — and rejects when it was refused
 * or could not be sent (the sender says why; the text is still there to send again).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

/** Puts the focus in the box when nothing else holds it (a page just opened, an answer just taken). */
const focusIfLost = (box: HTMLTextAreaElement | null) => {
  const active = document.activeElement;
  if (box && (!active || active === document.body)) box.focus();
};

export function Composer({
  onSend,
  draftKey,
  busy,
  onCancel,
  children,
}: {
  onSend: (prompt: string) => Promise<void>;
  /** Whose draft this is: the session's id, or "new". */
  draftKey: string;
  busy?: boolean;
  onCancel?: () => void;
  children?: ComponentChildren;
}) {
  const key = `runcell.draft.${draftKey}`;
  const [text, setShown] = useState(() => sessionStorage.getItem(key) ?? "");
  /** A message on its way: Send waits for the server's answer (no second copy of it). */
  const [sending, setSending] = useState(false);
  const latest = useRef(text);
  const box = useRef<HTMLTextAreaElement>(null);
  // A session opened (its first message just sent, or picked from the list): ready to type in.
  useEffect(() => focusIfLost(box.current), []);
  const setText = (v: string) => {
    latest.current = v;
    setShown(v);
    if (v) sessionStorage.setItem(key, v);
    else sessionStorage.removeItem(key);
  };
  const submit = (e?: Event) => {
    e?.preventDefault();
    const sent = text;
    const prompt = sent.trim();
    if (!prompt || sending) return;
    setSending(true);
    onSend(prompt).then(
      () => {
        // Taken: out of the box, keeping what was typed after it meanwhile.
        const now = latest.current;
        setText(now.startsWith(sent) ? now.slice(sent.length).trimStart() : now.trim() === prompt ? "" : now);
        setSending(false);
        focusIfLost(box.current);
      },
      () => {
        setSending(false);
        focusIfLost(box.current);
      },
    );
  };
  return (
    <form class="composer" onSubmit={submit} aria-busy={sending}>
      {children}
      <label class="grow">
        <span class="sr-only">Message</span>
        <textarea
          ref={box}
          name="prompt"
          rows={3}
          value={text}
          placeholder="Message the agent…  (Enter sends, Shift+Enter for a new line)"
          onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) submit(e);
          }}
        />
      </label>
      <div class="col">
        <button type="submit" class="primary" disabled={!text.trim() || sending}>
          Send
        </button>
        {busy && onCancel && (
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
