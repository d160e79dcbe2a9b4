/**
 * Form plumbing shared by the profile and playbook forms: a server error that names a field
 * (ApiError.field, e.g. "model.base_url", "env.FOO", "tools[2]", "mcp_servers[0].url") is shown next to the input it
 * names (aria-invalid + aria-describedby) and that input is focused; an error naming no input on
 * the page is shown at the top of the form. Inputs get the id `<prefix><field>`.
 */
import type { ComponentChildren, JSX } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "../../lib/api.ts";
import "./forms.css";

export interface FieldErr {
  text: string;
  /** The id of the element the error belongs to; none: a form-level error. */
  id?: string;
}

const CONTROL = "input,select,textarea";

/**
 * The element id for an API field path: the field itself, else the nearest parent present on the
 * page ("mcp_servers[0].headers.X" → "mcp_servers[0].headers" → "mcp_servers[0]" → "mcp_servers");
 * then the same without list indexes ("tools[2]" → "tools").
 */
function target(prefix: string, field: string): string | undefined {
  for (let path of [field, field.replace(/\[\d+\]/g, "")]) {
    while (path) {
      if (document.getElementById(prefix + path)) return prefix + path;
      const parent = path.replace(/(\.[^.[]*|\[\d+\])$/, "");
      path = parent === path ? "" : parent;
    }
  }
  return undefined;
}

export function useFieldErrors(prefix: string) {
  const [err, setErr] = useState<FieldErr | null>(null);
  useEffect(() => {
    const el = err?.id ? document.getElementById(err.id) : null;
    const folded = el?.closest("details");
    if (folded) folded.open = true;
    (el?.matches(CONTROL) ? el : el?.querySelector<HTMLElement>(CONTROL))?.focus();
  }, [err]);
  const id = (field: string) => prefix + field;
  return {
    err,
    /** Shows an error; `field` overrides the one the server named. */
    fail(e: unknown, field?: string) {
      const f = field ?? (e instanceof ApiError ? e.field : undefined);
      setErr({ text: e instanceof Error ? e.message : String(e), id: f ? target(prefix, f) : undefined });
    },
    clear: () => setErr(null),
    /** id, and the aria wiring when the error is about this field. */
    props(field: string, describedBy?: string) {
      const mine = err?.id === id(field);
      const by = [mine && `${id(field)}-err`, describedBy].filter(Boolean).join(" ");
      return { id: id(field), "aria-invalid": mine || undefined, "aria-describedby": by || undefined };
    },
    msg: (field: string) =>
      err?.id === id(field) ? (
        <p id={`${id(field)}-err`} class="error field-err" role="alert">
          {err.text}
        </p>
      ) : null,
    general: err && !err.id && (
      <p class="error" role="alert">
        {err.text}
      </p>
    ),
  };
}
export type FieldErrors = ReturnType<typeof useFieldErrors>;

type Props = ReturnType<FieldErrors["props"]>;

/** A labelled control with its error below the label (so the error is not part of the label's name). */
export function Field(p: { f: FieldErrors; name: string; label: ComponentChildren; describedBy?: string; children: (props: Props) => JSX.Element }) {
  return (
    <div>
      <label>
        {p.label}
        {p.children(p.f.props(p.name, p.describedBy))}
      </label>
      {p.f.msg(p.name)}
    </div>
  );
}

/** A number input's value: "" → undefined. */
export const num = (s: string) => (s.trim() === "" ? undefined : Number(s));

/** onInput for a text field of a state object. */
export const setter =
  <T,>(get: T, set: (v: T) => void) =>
  (k: keyof T) =>
  (e: Event) =>
    set({ ...get, [k]: (e.currentTarget as HTMLInputElement).value });

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  const copy = () =>
    navigator.clipboard?.writeText(text).then(() => {
      setDone(true);
      setTimeout(() => setDone(false), 1500);
    });
  return (
    <button type="button" onClick={copy}>
      {done ? "Copied" : label}
    </button>
  );
}
