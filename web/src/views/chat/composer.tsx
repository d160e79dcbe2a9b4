/** The message box: Enter sends, Shift+Enter is a new line; shown only where a message can be sent. */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";

export function Composer({ onSend, busy, onCancel, children }: { onSend: (prompt: string) => void; busy?: boolean; onCancel?: () => void; children?: ComponentChildren }) {
  const [text, setText] = useState("");
  const submit = (e?: Event) => {
    e?.preventDefault();
    const prompt = text.trim();
    if (!prompt) return;
    onSend(prompt);
    setText("");
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
