/**
 * Secrets: the vault's names and times, a form that sets or replaces a value (PUT /v1/secrets/:name)
 * and deletion. Values are write-only: never shown, never fetched back.
 */
import { EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useRef, useState } from "preact/hooks";
import type { SecretRecord } from "../../../../src/schema/secret.ts";
import { all, ApiError, del, put } from "../../lib/api.ts";
import { stamp } from "../../lib/format.ts";

type Err = { text: string; field?: string };
const toErr = (e: unknown): Err => (e instanceof ApiError ? { text: e.message, field: e.field } : { text: String(e) });

export function Secrets() {
  const [secrets, setSecrets] = useState<SecretRecord[] | null>(null);
  /** The name being replaced (the name field is then fixed), or null for a new secret. */
  const [replacing, setReplacing] = useState<string | null>(null);
  const [multiline, setMultiline] = useState(false);
  /** The value typed (kept when the field switches between one line and several). */
  const [value, setValue] = useState("");
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState("");
  const [error, setError] = useState<Err | null>(null);
  const form = useRef<HTMLFormElement>(null);
  const load = () => all<SecretRecord>("/v1/secrets").then(setSecrets, (e) => setError(toErr(e)));
  useEffect(() => void load(), []);

  const reset = () => {
    form.current?.reset();
    setValue("");
    setReplacing(null);
    setError(null);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const name = replacing ?? String(f.get("name") ?? "").trim();
    if (!replacing && secrets?.some((s) => s.name === name) && !confirm(`A secret named ${name} exists. Replace its value?`)) return;
    setError(null);
    setStatus("");
    setBusy(true);
    try {
      await put(`/v1/secrets/${encodeURIComponent(name)}`, { value });
      reset();
      setStatus(`Saved ${name}.`);
      await load();
    } catch (err) {
      const e = toErr(err);
      setError(e);
      // The focus goes to what to fix (it was on the button, disabled meanwhile): the field the
      // server named, else the button to try again.
      const target = e.field === "name" && !replacing ? "[name=name]" : e.field === "value" ? "[name=value]" : "button[type=submit]";
      setTimeout(() => form.current?.querySelector<HTMLElement>(target)?.focus());
    } finally {
      setBusy(false);
    }
  };
  const replace = (name: string) => {
    reset();
    setReplacing(name);
    setStatus("");
    setTimeout(() => form.current?.querySelector<HTMLElement>("[name=value]")?.focus());
  };
  const remove = async (name: string) => {
    if (!confirm(`Delete the secret ${name}? Profiles that use it lose the value.`)) return;
    setStatus("");
    setError(null);
    try {
      await del(`/v1/secrets/${encodeURIComponent(name)}`);
      if (replacing === name) reset();
      setStatus(`Deleted ${name}.`);
    } catch (err) {
      setError(toErr(err));
    }
    await load();
  };

  const fieldError = (field: string) =>
    error?.field === field ? (
      <span id={`secret-${field}-error`} class="error" role="alert">
        {error.text}
      </span>
    ) : null;
  const invalid = (field: string) =>
    error?.field === field ? { "aria-invalid": true as const, "aria-describedby": `secret-${field}-error` } : {};
  const valueProps = {
    name: "value",
    required: true,
    autoComplete: "off",
    spellcheck: false,
    value,
    onInput: (e: Event) => setValue((e.currentTarget as HTMLInputElement).value),
    ...invalid("value"),
  };

  return (
    <main id="main" tabIndex={-1} class="page">
      <h1>Secrets</h1>
      <p class="muted">
        Values are encrypted at rest and never shown again. A profile passes one to its workspace as an environment variable:{" "}
        <code>{'env: { NAME: { secret: "NAME" } }'}</code>.
      </p>
      <form ref={form} class="card" onSubmit={save} aria-labelledby="secret-form">
        <h2 id="secret-form">{replacing ? `Replace the value of ${replacing}` : "Set a secret"}</h2>
        <div class="grid">
          <div>
            <label>
              Name
              <input
                name="name"
                required={!replacing}
                readOnly={!!replacing}
                value={replacing ?? undefined}
                maxLength={64}
                placeholder="e.g. GITHUB_TOKEN"
                autoComplete="off"
                autoCapitalize="off"
                spellcheck={false}
                {...invalid("name")}
              />
            </label>
            {fieldError("name")}
          </div>
          <div>
            <label>
              Value
              {multiline ? <textarea rows={4} {...valueProps} /> : <input type="password" {...valueProps} />}
            </label>
            {fieldError("value")}
          </div>
        </div>
        <label>
          <input type="checkbox" checked={multiline} onChange={(e) => setMultiline(e.currentTarget.checked)} style="width:auto;margin:0 6px 0 0;vertical-align:middle" />
          Multi-line (for a PEM key; shown while you type)
        </label>
        <div class="row">
          <button type="submit" class="primary" disabled={busy}>
            {replacing ? "Replace value" : "Save secret"}
          </button>
          {replacing && (
            <button type="button" onClick={reset}>
              Cancel
            </button>
          )}
        </div>
        {error && error.field !== "name" && error.field !== "value" && (
          <p class="error" role="alert">
            {error.text}
          </p>
        )}
      </form>
      <p role="status">{status}</p>
      <table class="card">
        <caption class="sr-only">Your secrets</caption>
        <THead columns={["Name", "Created", "Updated", ""]} />
        <tbody>
          {secrets?.map((s) => (
            <tr key={s.name}>
              <td>
                <code>{s.name}</code>
              </td>
              <td {...stamp(s.created_at)} />
              <td {...stamp(s.updated_at)} />
              <td>
                <button type="button" onClick={() => replace(s.name)} aria-label={`Replace the value of ${s.name}`}>
                  Replace
                </button>{" "}
                <button type="button" class="danger" onClick={() => remove(s.name)} aria-label={`Delete ${s.name}`}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
          {secrets?.length === 0 && (
            <EmptyRow cols={4}>No secrets yet.</EmptyRow>
          )}
        </tbody>
      </table>
    </main>
  );
}
