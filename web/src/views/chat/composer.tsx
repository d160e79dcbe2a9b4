/**
 * The message box: Enter sends, Shift+Enter is a new line; shown only where a message can be sent.
 * The text is kept per session in sessionStorage until sent (it survives a reload and signing in
 * again), and a refused message comes back into the box (`refused`, given to onSend).
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

export function Composer({
  onSend,
  draftKey,
  busy,
  onCancel,
  children,
}: {
  onSend: (prompt: string, refused: () => void) => void;
  /** Whose draft this is: the session's id, or "new". */
  draftKey: string;
  busy?: boolean;
  onCancel?: () => void;
  children?: ComponentChildren;
}) {
  const key = `runcell.draft.${draftKey}`;
  const [text, setShown] = useState(() => sessionStorage.getItem(key) ?? "");
  const setText = (v: string) => {
    setShown(v);
    if (v) sessionStorage.setItem(key, v);
    else sessionStorage.removeItem(key);
  };
  const submit = (e?: Event) => {
    e?.preventDefault();
    const prompt = text.trim();
    if (!prompt) return;
    setText("");
    onSend(prompt, () => {
      // Back into the box, before whatever was typed since.
      const typed = sessionStorage.getItem(key) ?? "";
      setText(typed.trim() ? `${prompt}\n\n${typed}` : prompt);
    });
  };
  return (
    <form class="composer" onSubmit={submit}>
      {children}
      <label class="grow">
        <span class="sr-only">Message</span>
        <textarea
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
        <button type="submit" class="primary" disabled={!text.trim()}>
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
